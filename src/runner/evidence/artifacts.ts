// Where a run's artifacts live and how they are written.
// Every file is written to a temporary name beside its destination and renamed into place, so a reader (or a
// re-run after a crash) sees either the old complete file or the new complete one, never a half-written one.
import { randomBytes } from "node:crypto";
import { mkdir, rename, rm, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";

/** `artifacts/<stack>` under the project directory. */
export function artifactsDirOf(projectDir: string, stack: string): string {
  return join(projectDir, "artifacts", stack);
}

/** The run record beside the captures. */
export const RUN_RECORD_FILE = "run.json";
/** Captures, one file per traffic/v1 listing entry, under their listed names. */
export const TRAFFIC_DIR = "traffic";
/** Each computer's site-proxy log, as fetched through the gateway: `<computer>.jsonl`. */
export const PROXY_LOGS_DIR = "proxy-logs";
/** Each computer's request log, as one HAR 1.2 document: `<computer>.har`. */
export const REQUESTS_DIR = "requests";

/** A temporary path beside `destination` (same directory, so the rename is atomic), hidden and unique. */
export function temporaryPathFor(destination: string): string {
  return join(
    dirname(destination),
    `.${destination.split("/").pop()}.${process.pid}.${randomBytes(4).toString("hex")}.tmp`,
  );
}

/** Writes `data` to `destination` atomically (temporary file, then rename), creating its directory. */
export async function writeFileAtomic(destination: string, data: string | Uint8Array): Promise<void> {
  await mkdir(dirname(destination), { recursive: true });
  const temporary = temporaryPathFor(destination);
  try {
    await writeFile(temporary, data);
    await rename(temporary, destination);
  } catch (error) {
    await rm(temporary, { force: true });
    throw error;
  }
}
