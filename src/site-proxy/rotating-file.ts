// The request log's files on disk: whole lines appended to `requests.<N>.jsonl`, the next file begun once one holds
// `fileBytes`, and the oldest removed so that at most `files` remain, as a capture's rotating files are. A proxy that
// starts again begins a new file after the last one, never appending to a file whose last line a crash may have torn;
// a write that fails does the same.
//
// A line is written at once, synchronously: the page cache takes a few kilobytes in microseconds, while a stream's
// asynchronous write costs a hand-off to libuv's threads and a turn of the event loop for its callback, per entry,
// several times the write itself (about 65 us against 15 us of CPU for a 2.4 kB line here). And an entry is then
// on disk as soon as its exchange ends: a proxy killed at once loses none.
import * as fs from "node:fs";
import * as path from "node:path";
import { REQUEST_LOG_FILE_PATTERN, requestLogFileName } from "../protocol/request-log";

export interface RotatingFile {
  /** Appends one line (without its newline), written before this returns; throws when it cannot be. */
  append(line: string): void;
  /** Resolves once every line appended so far is in its file (each already is). */
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
  let written = 0;
  /** The open file; opened with the first line, so a directory that cannot take one is told of as lines fail. */
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
  removeOld();
  return {
    append(line) {
      // Encoded once: its length decides the rotation, and these bytes are the ones written.
      const bytes = Buffer.from(line + "\n");
      if (written > 0 && written + bytes.length > fileBytes) next();
      fd ??= fs.openSync(path.join(dir, requestLogFileName(index)), "a");
      try {
        for (let at = 0; at < bytes.length; ) at += fs.writeSync(fd, bytes, at);
      } catch (err) {
        // Part of the line may be in the file: nothing more goes after it.
        next();
        throw err;
      }
      written += bytes.length;
    },
    flushed() {
      return Promise.resolve();
    },
    close() {
      closeFile();
      return Promise.resolve();
    },
  };
}
