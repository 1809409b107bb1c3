// The proxy's log: one JSON line per event, appended to a file that the supervisor also appends to.
// Appends are O_APPEND writes of whole lines, so the two processes' lines never interleave.
import * as fs from "node:fs";
import * as path from "node:path";
import type { SiteProxyLogRecord } from "../protocol/site-proxy";

/** A record as handed to the log: the log stamps the time. */
export type LogEntry = SiteProxyLogRecord extends infer R
  ? R extends SiteProxyLogRecord
    ? Omit<R, "time">
    : never
  : never;

export interface EventLog {
  write(entry: LogEntry): void;
  /** Resolves once every line written so far is in the file. */
  flushed(): Promise<void>;
  close(): Promise<void>;
}

/** The time stamp of the last line, kept for the lines of the same millisecond. */
let stamped = { ms: NaN, iso: "" };

function now(): string {
  const ms = Date.now();
  if (ms !== stamped.ms) stamped = { ms, iso: new Date(ms).toISOString() };
  return stamped.iso;
}

/**
 * `{"event": ..., "time": ..., ...the rest}`. A proxy writes a line per request, so the entry (its event first, as
 * every caller writes it) is serialised as it is and the time put in after the event, rather than copied into a new
 * object first.
 */
function line(entry: LogEntry): string {
  const json = JSON.stringify(entry);
  const event = `{"event":${JSON.stringify(entry.event)}`;
  if (json.startsWith(event)) return `${event},"time":"${now()}"${json.slice(event.length)}\n`;
  const { event: name, ...rest } = entry;
  return JSON.stringify({ event: name, time: now(), ...rest }) + "\n";
}

/**
 * A log that writes asynchronously, so the proxy's hot path never waits on the disk. The lines of one turn of the
 * event loop go out in one write (at the end of that turn): under load that is one write for many connections.
 */
export function openEventLog(file: string): EventLog {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  const stream = fs.createWriteStream(file, { flags: "a" });
  stream.on("error", (err) =>
    process.stderr.write(`multienv-site-proxy: cannot write the log ${file}: ${err.message}\n`),
  );
  let pending: string[] = [];
  const flush = () => {
    if (pending.length === 0) return;
    stream.write(pending.join(""));
    pending = [];
  };
  return {
    write(entry) {
      if (pending.length === 0) setImmediate(flush);
      pending.push(line(entry));
    },
    flushed() {
      flush();
      return new Promise((resolve) => stream.write("", () => resolve()));
    },
    close() {
      flush();
      return new Promise((resolve) => stream.end(resolve));
    },
  };
}

/** Writes one record at once; for the supervisor, whose few lines must be on disk before it goes on. */
export function appendEventSync(file: string, entry: LogEntry): void {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.appendFileSync(file, line(entry));
}
