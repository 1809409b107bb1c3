// traffic/v1 on the gateway: the capture sidecars' rotating pcap files, read from the
// captures folder (mounted read-only). Only names matching CAPTURE_FILE_PATTERN are
// listed or served, and a served file is opened without following links, so nothing
// outside the folder is ever read.
import { constants, createReadStream } from "node:fs";
import { lstat, open, readdir } from "node:fs/promises";
import type { ServerResponse } from "node:http";
import { join } from "node:path";
import { parseCaptureName, PCAP_MEDIA_TYPE, type TrafficCapture, type TrafficCaptureListing } from "../protocol/traffic";
import { replyJson } from "./reply";

/** Every capture file in `dir`, oldest first (by modification time, then name). */
export async function listCaptures(dir: string): Promise<TrafficCapture[]> {
  const entries = await readdir(dir, { withFileTypes: true });
  const captures: Array<TrafficCapture & { mtimeMs: number }> = [];
  for (const entry of entries) {
    const parsed = parseCaptureName(entry.name);
    if (!parsed) continue;
    // lstat, not the entry's type: some filesystems report none, and a link is never a capture.
    const info = await lstat(join(dir, entry.name)).catch(() => undefined); // rotated away meanwhile
    if (!info?.isFile()) continue;
    captures.push({
      name: entry.name,
      site: parsed.site,
      role: parsed.role,
      container: `${parsed.site}-${parsed.role}`,
      bytes: info.size,
      modified: info.mtime.toISOString(),
      mtimeMs: info.mtimeMs,
    });
  }
  captures.sort((a, b) => a.mtimeMs - b.mtimeMs || a.name.localeCompare(b.name));
  return captures.map(({ mtimeMs: _, ...capture }) => capture);
}

export async function serveListing(dir: string, res: ServerResponse): Promise<void> {
  const listing: TrafficCaptureListing = { captures: await listCaptures(dir) };
  replyJson(res, 200, listing);
}

/** Streams one capture with its length, as it is when opened (tcpdump may still be appending). */
export async function serveCapture(dir: string, name: string, res: ServerResponse): Promise<void> {
  if (!parseCaptureName(name)) {
    replyJson(res, 400, { error: "not a capture file name", name });
    return;
  }
  let handle;
  try {
    handle = await open(join(dir, name), constants.O_RDONLY | constants.O_NOFOLLOW);
  } catch {
    replyJson(res, 404, { error: "no such capture", name });
    return;
  }
  const info = await handle.stat();
  if (!info.isFile()) {
    await handle.close();
    replyJson(res, 404, { error: "no such capture", name });
    return;
  }
  res.writeHead(200, {
    "Content-Type": PCAP_MEDIA_TYPE,
    "Content-Length": info.size,
    "Content-Disposition": `attachment; filename="${name}"`,
    "Last-Modified": info.mtime.toUTCString(),
  });
  if (res.req.method === "HEAD" || info.size === 0) {
    await handle.close();
    res.end();
    return;
  }
  const stream = createReadStream("", { fd: handle, start: 0, end: info.size - 1 });
  stream.on("error", () => res.destroy());
  res.on("close", () => stream.destroy());
  stream.pipe(res);
}
