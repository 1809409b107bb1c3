// Collecting the request logs: each computer's entries, read through the gateway's requests/v1, kept for the
// episode whose proxy log lines name them (the same split as the proxy logs'), and stored as one complete HAR 1.2
// document per computer, `requests/<computer>.har`, recorded in run.json with its size and SHA-256.
import { createHash } from "node:crypto";
import { join } from "node:path";
import { bearer } from "../../protocol/auth";
import { harDocument, parseRequestLog, requestLogPath, type RequestLogEntry } from "../../protocol/request-log";
import { parseLiveSiteProxyLog } from "../../protocol/site-proxy";
import { REQUESTS_DIR, writeFileAtomic } from "./artifacts";
import { errorMessage } from "../errors";
import type { RequestLogRecord } from "./run-record";

/** Who made the HAR documents, in their `creator`. */
export const HAR_CREATOR = { name: "multienv", version: "1" };

const READ_TIMEOUT_MS = 120_000;

/** A computer's request log through the gateway, or undefined when it keeps none (404). */
export async function fetchRequestLog(
  gatewayUrl: string,
  token: string,
  computer: string,
): Promise<RequestLogEntry[] | undefined> {
  const what = `fetching the request log of computer ${computer}`;
  const response = await fetch(gatewayUrl.replace(/\/+$/, "") + requestLogPath(computer), {
    headers: { authorization: bearer(token) },
    signal: AbortSignal.timeout(READ_TIMEOUT_MS),
  }).catch((error: unknown) => {
    throw new Error(`${what}: ${errorMessage(error)}`);
  });
  const body = await response.text();
  if (response.status === 404) return undefined;
  if (!response.ok) throw new Error(`${what}: HTTP ${response.status} ${body.slice(0, 300)}`.trim());
  return parseRequestLog(body);
}

/** The entries whose exchanges the proxy log text (an episode's lines) has `request` lines of. */
export function entriesOfLog(entries: RequestLogEntry[], logText: string): RequestLogEntry[] {
  const ids = new Set<string>();
  for (const record of parseLiveSiteProxyLog(logText))
    if (record.event === "request" && record.id !== undefined) ids.add(record.id);
  return entries.filter((entry) => ids.has(entry._multienv.logId));
}

/** Stores `entries` as `requests/<computer>.har` under `artifactsDir` and says what was stored. */
export async function storeHar(
  artifactsDir: string,
  computer: string,
  entries: RequestLogEntry[],
): Promise<RequestLogRecord> {
  const file = `${REQUESTS_DIR}/${computer}.har`;
  const bytes = Buffer.from(JSON.stringify(harDocument(entries, HAR_CREATOR)));
  await writeFileAtomic(join(artifactsDir, file), bytes);
  return {
    file,
    bytes: bytes.length,
    sha256: createHash("sha256").update(bytes).digest("hex"),
    entries: entries.length,
  };
}
