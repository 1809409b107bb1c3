// The proxy's log: one JSON line per event, appended to a file that the supervisor also appends to.
// Appends are O_APPEND writes of whole lines, so the two processes' lines never interleave (what part of a failed
// write went in is cut off again: turn-writes.ts).
import * as fs from "node:fs";
import * as path from "node:path";
import type { SiteProxyLogRecord } from "../protocol/site-proxy";
import { TurnWrites } from "./turn-writes";

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
 * The proxy's log, written as turn-writes.ts writes: the lines of one turn of the event loop together, at its end,
 * under load one write for many connections.
 */
export function openEventLog(file: string): EventLog {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  const turn = new TurnWrites({
    open: () => fs.openSync(file, "a"),
    tell: (message) => process.stderr.write(`multienv-site-proxy: the log ${file}: ${message}\n`),
    noun: ["line", "lines"],
  });
  return {
    write(entry) {
      turn.add(line(entry));
    },
    flushed() {
      turn.flush();
      return Promise.resolve();
    },
    close() {
      turn.close();
      return Promise.resolve();
    },
  };
}

/** Writes one record at once; for the supervisor, whose few lines must be on disk before it goes on. */
export function appendEventSync(file: string, entry: LogEntry): void {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.appendFileSync(file, line(entry));
}
