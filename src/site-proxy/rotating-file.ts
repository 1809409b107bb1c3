// The request log's files on disk: whole lines appended to `requests.<N>.jsonl`, the next file begun once one holds
// `fileBytes`, and the oldest removed so that at most `files` remain, as a capture's rotating files are. A proxy that
// starts again begins a new file after the last one, never appending to a file whose last line a crash may have torn;
// a write that fails does the same.
//
// The lines of one turn of the event loop are written together at its end (setImmediate), synchronously, in one
// write: a write costs a system call whatever it carries (about 28 us here), and a stream's asynchronous write
// costs more again, a hand-off to libuv's threads and a turn of the loop for its callback, per write. So an entry is
// on disk within the turn its exchange ended in, and a proxy killed after that loses none.
import * as fs from "node:fs";
import * as path from "node:path";
import { REQUEST_LOG_FILE_PATTERN, requestLogFileName } from "../protocol/request-log";

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
  /** The lines of this turn, each with its newline, for the file `index`. */
  let waiting: string[] = [];
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
  const write = () => {
    if (waiting.length === 0) return;
    const lines = waiting;
    waiting = [];
    const bytes = Buffer.from(lines.join(""));
    try {
      fd ??= fs.openSync(path.join(dir, requestLogFileName(index)), "a");
      for (let at = 0; at < bytes.length; ) at += fs.writeSync(fd, bytes, at);
    } catch (err) {
      // Part of the lines may be in the file: nothing more goes after them.
      next();
      const what = lines.length === 1 ? "a request log entry" : `${lines.length} request log entries`;
      process.stderr.write(`multienv-site-proxy: cannot write ${what}: ${(err as Error).message}\n`);
    }
  };
  removeOld();
  return {
    append(line) {
      const bytes = Buffer.byteLength(line) + 1;
      if (written > 0 && written + bytes > fileBytes) {
        write();
        next();
      }
      if (waiting.length === 0) setImmediate(write);
      waiting.push(line + "\n");
      written += bytes;
    },
    flushed() {
      write();
      return Promise.resolve();
    },
    close() {
      write();
      closeFile();
      return Promise.resolve();
    },
  };
}
