// Collecting the request logs: each computer's entries, read through the gateway's requests/v1, kept for the
// episode whose proxy log lines name them (the same split as the proxy logs'), and stored as one complete HAR 1.2
// document per computer, `requests/<computer>.har`, recorded in run.json with its size and SHA-256.
//
// A log may be far larger than memory should hold (eight files of 64 MiB by default), so nothing holds it whole: the
// entries stream from the gateway line by line into a spool file beside the HAR (only the episode's), with a small
// index of each (where it is, when it began, what places it on a page); the HAR is then written from the spool in
// time order, hashed as it is written. The read has no ceiling of its own, only an idle limit: a gateway that sends
// nothing for IDLE_TIMEOUT_MS is given up on, one still sending is waited for, however large the log.
//
// An episode's entries the proxy's rotation removed before this read (its `request-log-evicted` lines name them)
// are counted: the HAR says how many are missing (its `comment` and `_multienv.missingEntries`), and so does run.json.
import { createHash } from "node:crypto";
import { createWriteStream, type WriteStream } from "node:fs";
import { mkdir, open, rename, rm } from "node:fs/promises";
import { once } from "node:events";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline";
import { GatewayClient, GatewayRequestError } from "../../protocol/gateway-client";
import { HarPages, pageFacts, type PageFacts, type RequestLogEntry } from "../../protocol/request-log";
import { parseLiveSiteProxyLog } from "../../protocol/site-proxy";
import { REQUESTS_DIR, temporaryPathFor } from "./artifacts";
import { errorMessage } from "../errors";
import type { RequestLogRecord } from "./run-record";

/** Who made the HAR documents, in their `creator`. */
export const HAR_CREATOR = { name: "multienv", version: "1" };

/** How long the gateway may send nothing while the log is read before the read is given up. */
export const IDLE_TIMEOUT_MS = 60_000;

/** The ids of the exchanges whose `request` lines are in the proxy log text `logText` (an episode's lines). */
export function exchangeIds(logText: string): Set<string> {
  const ids = new Set<string>();
  for (const record of parseLiveSiteProxyLog(logText))
    if (record.event === "request" && record.id !== undefined) ids.add(record.id);
  return ids;
}

/** The exchanges the request log's rotation removed, as the proxy log `logText` (the whole log) names them. */
export function evictedIds(logText: string): Set<string> {
  const ids = new Set<string>();
  if (!logText.includes('"request-log-evicted"')) return ids;
  for (const record of parseLiveSiteProxyLog(logText))
    if (record.event === "request-log-evicted") for (const id of record.logIds) ids.add(id);
  return ids;
}

/** One entry in the spool: where its line is, and what orders it and places it on a page. */
interface Spooled extends PageFacts {
  at: number;
  bytes: number;
  logId: string;
}

/** Writes to `stream`, waiting while its buffer is full. */
async function written(stream: WriteStream, bytes: Buffer | string): Promise<void> {
  if (!stream.write(bytes)) await once(stream, "drain");
}

async function closed(stream: WriteStream): Promise<void> {
  stream.end();
  await once(stream, "close");
}

/**
 * Reads a computer's request log through the gateway line by line, spooling the entries of the exchanges `ids` names
 * to `spool`; undefined when the computer keeps no request log (404).
 */
async function spoolRequestLog(
  gatewayUrl: string,
  token: string,
  computer: string,
  ids: ReadonlySet<string>,
  spool: string,
): Promise<Spooled[] | undefined> {
  const what = `fetching the request log of computer ${computer}`;
  const abort = new AbortController();
  let idle: NodeJS.Timeout | undefined;
  const stillSending = () => {
    clearTimeout(idle);
    idle = setTimeout(
      () => abort.abort(new Error(`the gateway sent nothing for ${IDLE_TIMEOUT_MS / 1000} s`)),
      IDLE_TIMEOUT_MS,
    );
  };
  stillSending();
  try {
    const body = await new GatewayClient(gatewayUrl, token).requestLog(computer, abort.signal);
    if (body === undefined) return undefined;
    body.on("data", stillSending);
    const out = createWriteStream(spool);
    const spooled: Spooled[] = [];
    let at = 0;
    try {
      for await (const line of createInterface({ input: body, crlfDelay: Infinity })) {
        if (line.trim() === "") continue;
        let entry: RequestLogEntry;
        try {
          entry = JSON.parse(line) as RequestLogEntry;
        } catch {
          continue; // a torn last line
        }
        const logId = entry._multienv?.logId;
        if (logId === undefined || !ids.has(logId)) continue;
        // The HAR gives each entry its page: one the log carried is not kept (as harDocument does).
        let kept = line;
        if (entry.pageref !== undefined) {
          delete entry.pageref;
          kept = JSON.stringify(entry);
        }
        const bytes = Buffer.from(kept + "\n");
        spooled.push({ ...pageFacts(entry), at, bytes: bytes.length - 1, logId });
        at += bytes.length;
        await written(out, bytes);
      }
    } finally {
      await closed(out);
    }
    return spooled;
  } catch (error) {
    // The client's own line names the request already.
    if (error instanceof GatewayRequestError && !abort.signal.aborted) throw error;
    throw new Error(`${what}: ${errorMessage(abort.signal.aborted ? abort.signal.reason : error)}`, { cause: error });
  } finally {
    clearTimeout(idle);
  }
}

/** What the HAR says when entries of the episode are missing. */
function missingComment(missing: number): string {
  return `${missing} of this episode's exchanges are missing: the site proxy's request log rotated their entries away before they were collected`;
}

/**
 * Writes `requests/<computer>.har` under `artifactsDir` from the spooled entries, in time order, each on its page;
 * says what was stored.
 */
async function writeHar(
  artifactsDir: string,
  computer: string,
  spool: string,
  spooled: Spooled[],
  missing: number,
): Promise<RequestLogRecord> {
  const file = `${REQUESTS_DIR}/${computer}.har`;
  const destination = join(artifactsDir, file);
  const temporary = temporaryPathFor(destination);
  // Stable: entries that began together keep the order the log had them in.
  const sorted = [...spooled].sort((a, b) =>
    a.startedDateTime < b.startedDateTime ? -1 : a.startedDateTime > b.startedDateTime ? 1 : 0,
  );
  const pages = new HarPages();
  const pageOf = sorted.map((entry) => pages.place(entry));
  const hash = createHash("sha256");
  let bytes = 0;
  const out = createWriteStream(temporary);
  const write = async (chunk: Buffer | string) => {
    const buffer = typeof chunk === "string" ? Buffer.from(chunk) : chunk;
    hash.update(buffer);
    bytes += buffer.length;
    await written(out, buffer);
  };
  const source = await open(spool, "r");
  try {
    const head = {
      version: "1.2",
      creator: HAR_CREATOR,
      ...(missing > 0 ? { comment: missingComment(missing), _multienv: { missingEntries: missing } } : {}),
      pages: pages.pages,
    };
    await write(`{"log":${JSON.stringify(head).slice(0, -1)},"entries":[`);
    for (let i = 0; i < sorted.length; i++) {
      const entry = sorted[i];
      const line = Buffer.allocUnsafe(entry.bytes);
      await source.read(line, 0, entry.bytes, entry.at);
      const page = pageOf[i];
      if (i > 0) await write(",");
      if (page === undefined) await write(line);
      else {
        await write(`{"pageref":${JSON.stringify(page)}${line.length > 2 ? "," : ""}`);
        await write(line.subarray(1));
      }
    }
    await write("]}}");
    await closed(out);
    await rename(temporary, destination);
  } catch (error) {
    out.destroy();
    await rm(temporary, { force: true });
    throw error;
  } finally {
    await source.close();
  }
  return {
    file,
    bytes,
    sha256: hash.digest("hex"),
    entries: sorted.length,
    ...(missing > 0 ? { missing } : {}),
  };
}

export interface RequestLogSource {
  gatewayUrl: string;
  token: string;
  computer: string;
  /** The episode's lines of the computer's proxy log, read before the request log: which exchanges are its. */
  episodeLog: string;
  /** The whole proxy log, read after the request log: what the rotation removed until then. */
  wholeLogAfter(): Promise<string>;
}

/**
 * Stores the computer's request log as `requests/<computer>.har` under `artifactsDir`: the entries of the exchanges
 * the episode's proxy log lines name, with how many of them the rotation removed. Undefined when the computer keeps
 * no request log.
 */
export async function storeRequestLog(
  artifactsDir: string,
  source: RequestLogSource,
): Promise<RequestLogRecord | undefined> {
  const ids = exchangeIds(source.episodeLog);
  const spool = join(artifactsDir, REQUESTS_DIR, `.${source.computer}.entries.spool`);
  await mkdir(dirname(spool), { recursive: true });
  try {
    const spooled = await spoolRequestLog(source.gatewayUrl, source.token, source.computer, ids, spool);
    if (spooled === undefined) return undefined;
    const collected = new Set(spooled.map((entry) => entry.logId));
    let missing = 0;
    for (const id of evictedIds(await source.wholeLogAfter())) if (ids.has(id) && !collected.has(id)) missing++;
    return await writeHar(artifactsDir, source.computer, spool, spooled, missing);
  } finally {
    await rm(spool, { force: true });
  }
}

/** The line that says a computer's request log lost entries of the episode, or undefined when it lost none. */
export function lossLine(computer: string, record: RequestLogRecord): string | undefined {
  if (record.missing === undefined || record.missing === 0) return undefined;
  return `the request log of computer ${computer} lost ${record.missing} of this episode's exchanges before they were collected (the site proxy's rotation removed them; ${record.file} holds the other ${record.entries}): collect more often, as each reset does`;
}
