// The request log's files on disk: whole lines appended to `requests.<N>.jsonl`, the next file begun once one holds
// `fileBytes`, and the oldest removed so that at most `files` remain, as a capture's rotating files are. A proxy that
// starts again begins a new file after the last one, never appending to a file whose last line a crash may have torn.
//
// Its lines are written as turn-writes.ts writes them: those of one turn of the event loop together, at its end.
import * as fs from "node:fs";
import * as path from "node:path";
import { REQUEST_LOG_FILE_PATTERN, requestLogFileName } from "../protocol/request-log";
import { TurnWrites } from "./turn-writes";

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

export function openRotatingFile(dir: string, fileBytes: number, files: number): RotatingFile {
  fs.mkdirSync(dir, { recursive: true });
  const existing = requestLogFiles(dir);
  let index = existing.length > 0 ? existing[existing.length - 1] + 1 : 0;
  /** Bytes in the file so far, the lines waiting for the end of the turn included. */
  let written = 0;
  const removeOld = () => {
    for (const old of requestLogFiles(dir).filter((i) => i <= index - files))
      fs.rm(path.join(dir, requestLogFileName(old)), { force: true }, () => undefined);
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
