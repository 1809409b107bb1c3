// The request log's files on disk: whole lines appended to `requests.<N>.jsonl`, the next file begun once one holds
// `fileBytes`, and the oldest removed so that at most `files` remain, as a capture's rotating files are. A proxy that
// starts again begins a new file after the last one, never appending to a file whose last line a crash may have torn;
// a write that fails does the same.
//
// Its lines are written as turn-writes.ts writes them: those of one turn of the event loop together, at its end.
import * as fs from "node:fs";
import * as path from "node:path";
import { REQUEST_LOG_FILE_PATTERN, requestLogFileName } from "../protocol/request-log";
import { TurnWrites, writeWhole } from "./turn-writes";

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
  /** The open file; opened with the first write, so a directory that cannot take one is told of as writes fail. */
  let fd: number | undefined;
  const removeOld = () => {
    for (const old of requestLogFiles(dir).filter((i) => i <= index - files))
      fs.rm(path.join(dir, requestLogFileName(old)), { force: true }, () => undefined);
  };
  const closeFile = () => {
    if (fd === undefined) return;
    const closing = fd;
    fd = undefined;
    fs.close(closing, () => undefined);
  };
  /** Ends the file: the next line begins the one after it. */
  const next = () => {
    closeFile();
    index++;
    written = 0;
    removeOld();
  };
  const turn = new TurnWrites((text, lines) => {
    try {
      fd ??= fs.openSync(path.join(dir, requestLogFileName(index)), "a");
      writeWhole(fd, text);
    } catch (err) {
      // Part of the lines may be in the file: nothing more goes after them.
      next();
      const what = lines === 1 ? "a request log entry" : `${lines} request log entries`;
      process.stderr.write(`multienv-site-proxy: cannot write ${what}: ${(err as Error).message}\n`);
    }
  });
  removeOld();
  return {
    append(line) {
      const bytes = Buffer.byteLength(line) + 1;
      if (written > 0 && written + bytes > fileBytes) {
        turn.flush();
        next();
      }
      turn.add(line + "\n");
      written += bytes;
    },
    flushed() {
      turn.flush();
      return Promise.resolve();
    },
    close() {
      turn.flush();
      closeFile();
      return Promise.resolve();
    },
  };
}
