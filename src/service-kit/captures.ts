// traffic/v1 as the gateway and a capture server serve it: the capture sidecars' rotating pcap files, read from the
// captures folder (mounted read-only). Only names matching CAPTURE_FILE_PATTERN are
// listed or served, and only regular files: a link, a FIFO, a device or a directory named
// like a capture is never followed, never opened in a way that waits (a FIFO's open blocks
// a thread-pool thread until a writer comes, and four of those stop every file and DNS
// operation of the process), and never read.
import { constants, createReadStream } from "node:fs";
import { lstat, open, readdir, type FileHandle } from "node:fs/promises";
import type { Stats } from "node:fs";
import type { ServerResponse } from "node:http";
import { join } from "node:path";
import {
  parseCaptureName,
  PCAP_MEDIA_TYPE,
  type TrafficCapture,
  type TrafficCaptureListing,
} from "../protocol/traffic";
import { replyJson } from "./reply";

/**
 * Opens a capture file for reading only if it is a regular file: O_NOFOLLOW refuses a link,
 * O_NONBLOCK makes opening a FIFO or a device return at once, and fstat on what was opened
 * (not a path looked at earlier, which may have been swapped since) decides.
 */
export async function openCapture(dir: string, name: string): Promise<{ handle: FileHandle; info: Stats } | undefined> {
  let handle: FileHandle;
  try {
    handle = await open(join(dir, name), constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch {
    return undefined;
  }
  const info = await handle.stat().catch(() => undefined);
  if (!info?.isFile()) {
    await handle.close();
    return undefined;
  }
  return { handle, info };
}

/**
 * Every capture file in `dir`, oldest first (by modification time, then name). Each container's current files
 * are the run after its last earlier one (`.run<K>.` files), the first when it has none.
 */
export async function listCaptures(dir: string): Promise<TrafficCapture[]> {
  const entries = await readdir(dir, { withFileTypes: true });
  const captures: Array<TrafficCapture & { mtimeMs: number }> = [];
  const earlierRuns = new Map<string, number>();
  for (const entry of entries) {
    const parsed = parseCaptureName(entry.name);
    if (!parsed) continue;
    // lstat (which opens nothing), not the entry's type: some filesystems report none, and a link is never a capture.
    const info = await lstat(join(dir, entry.name)).catch(() => undefined); // rotated away meanwhile
    if (!info?.isFile()) continue;
    const container = `${parsed.site}-${parsed.role}`;
    if (parsed.earlierRun !== undefined)
      earlierRuns.set(container, Math.max(earlierRuns.get(container) ?? 0, parsed.earlierRun));
    captures.push({
      name: entry.name,
      site: parsed.site,
      role: parsed.role,
      container,
      run: parsed.earlierRun ?? 0,
      bytes: info.size,
      modified: info.mtime.toISOString(),
      mtimeMs: info.mtimeMs,
    });
  }
  for (const capture of captures) if (capture.run === 0) capture.run = (earlierRuns.get(capture.container) ?? 0) + 1;
  captures.sort((a, b) => a.mtimeMs - b.mtimeMs || a.name.localeCompare(b.name));
  return captures.map(({ mtimeMs: _, ...capture }) => capture);
}

export async function serveListing(dir: string, res: ServerResponse): Promise<void> {
  const listing: TrafficCaptureListing = { captures: await listCaptures(dir) };
  replyJson(res, 200, listing);
}

/**
 * Streams one capture with its length, as it is when opened (tcpdump may still be appending);
 * or says why not (the caller answers).
 */
export async function serveCapture(
  dir: string,
  name: string,
  res: ServerResponse,
): Promise<{ status: number; error: string; reason: string } | undefined> {
  if (!parseCaptureName(name))
    return { status: 400, error: "not a capture file name", reason: "not a capture file name" };
  const opened = await openCapture(dir, name);
  if (!opened)
    return { status: 404, error: "no such capture", reason: "no regular file of that name in the captures folder" };
  const { handle, info } = opened;
  res.writeHead(200, {
    "Content-Type": PCAP_MEDIA_TYPE,
    "Content-Length": info.size,
    "Content-Disposition": `attachment; filename="${name}"`,
    "Last-Modified": info.mtime.toUTCString(),
  });
  if (res.req.method === "HEAD" || info.size === 0) {
    await handle.close();
    res.end();
    return undefined;
  }
  const stream = createReadStream("", { fd: handle, start: 0, end: info.size - 1 });
  stream.on("error", () => res.destroy());
  res.on("close", () => stream.destroy());
  stream.pipe(res);
  return undefined;
}
