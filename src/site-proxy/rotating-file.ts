// The request log's files on disk: whole lines appended to `requests.<N>.jsonl`, the next file begun once one holds
// `fileBytes`, and the oldest removed so that at most `files` remain, as a capture's rotating files are. A proxy that
// starts again begins a new file after the last one, never appending to a file whose last line a crash may have torn.
//
// Its lines are written as turn-writes.ts writes them: those of one turn of the event loop together, at its end.
//
// A file is never removed unsaid: before it goes, what it held (its entries' count and their exchanges' ids) is told
// (the proxy writes it in its own log, a `request-log-evicted` line), so a collection that finds an exchange's entry
// missing can tell that it was rotated away and say so.
import * as fs from "node:fs";
import * as path from "node:path";
import { REQUEST_LOG_FILE_PATTERN, requestLogFileName } from "../protocol/request-log";
import type { RequestLogEvictedRecord } from "../protocol/site-proxy";
import { TurnWrites } from "./turn-writes";

/** What a removed file held, as the proxy's log says it. */
export type Eviction = Omit<RequestLogEvictedRecord, "time">;

/** Where evictions are told when openRotatingFile is given no `evicted` of its own: set once by the proxy's start. */
let tellEviction: (eviction: Eviction) => void = () => undefined;

/** Tells every later eviction of a request log file to `tell` (the proxy's start passes its event log's write). */
export function reportEvictionsTo(tell: (eviction: Eviction) => void): void {
  tellEviction = tell;
}

/**
 * The key of an entry's exchange id as JSON.stringify writes it: inside a string a quote is always escaped, so this
 * stands unescaped only as the key itself, once a line.
 */
const LOG_ID = /"logId":"((?:[^"\\]|\\.)*)"/g;

/** What the file at `file` holds: its whole lines and their exchanges' ids (nothing when it cannot be read). */
function evictionOf(file: string): Eviction {
  let text = "";
  try {
    text = fs.readFileSync(file, "latin1");
  } catch {
    // Gone already: nothing more to say of it.
  }
  let entries = 0;
  for (let at = text.indexOf("\n"); at !== -1; at = text.indexOf("\n", at + 1)) entries++;
  const logIds = Array.from(text.matchAll(LOG_ID), (match) => JSON.parse(`"${match[1]}"`) as string);
  return { event: "request-log-evicted", file: path.basename(file), entries, logIds };
}

export interface RotatingFile {
  /** Appends one line (without its newline), written at the end of this turn of the event loop. */
  append(line: string): void;
  /** Writes the lines appended so far now; resolves once they are in their file. */
  flushed(): Promise<void>;
  close(): Promise<void>;
}

/** The indexes of the request log's files in `dir`, oldest first. */
export function requestLogFiles(dir: string): number[] {
  let names: string[];
  try {
    names = fs.readdirSync(dir);
  } catch {
    return [];
  }
  return names
    .map((name) => REQUEST_LOG_FILE_PATTERN.exec(name)?.[1])
    .filter((index): index is string => index !== undefined)
    .map(Number)
    .sort((a, b) => a - b);
}

export function openRotatingFile(
  dir: string,
  fileBytes: number,
  files: number,
  evicted: (eviction: Eviction) => void = (eviction) => tellEviction(eviction),
): RotatingFile {
  fs.mkdirSync(dir, { recursive: true });
  const existing = requestLogFiles(dir);
  let index = existing.length > 0 ? existing[existing.length - 1] + 1 : 0;
  /** Bytes in the file so far, the lines waiting for the end of the turn included. */
  let written = 0;
  const removeOld = () => {
    for (const old of requestLogFiles(dir).filter((i) => i <= index - files)) {
      const file = path.join(dir, requestLogFileName(old));
      // Read and told before it goes (a file is at most fileBytes, read once in its life).
      evicted(evictionOf(file));
      fs.rm(file, { force: true }, () => undefined);
    }
  };
  const turn = new TurnWrites({
    open: () => fs.openSync(path.join(dir, requestLogFileName(index)), "a"),
    tell: (message) => process.stderr.write(`multienv-site-proxy: request log in ${dir}: ${message}\n`),
    noun: ["request log entry", "request log entries"],
    // Lines a failed write lost take no room in the file: a disk full for long does not rotate empty files in and
    // the kept ones out.
    dropped: (bytes) => (written -= bytes),
  });
  removeOld();
  return {
    append(line) {
      const bytes = Buffer.byteLength(line) + 1;
      if (written > 0 && written + bytes > fileBytes) {
        // The file is full: its lines go in it, and this one begins the next.
        turn.close();
        index++;
        written = 0;
        removeOld();
      }
      turn.add(line + "\n");
      written += bytes;
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
