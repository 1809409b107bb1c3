// The request log's files on disk: whole lines appended to `requests.<N>.jsonl`, the next file begun once one holds
// `fileBytes`, and the oldest removed so that at most `files` remain, as a capture's rotating files are. A proxy that
// starts again begins a new file after the last one, never appending to a file whose last line a crash may have torn.
import * as fs from "node:fs";
import * as path from "node:path";
import { REQUEST_LOG_FILE_PATTERN, requestLogFileName } from "../protocol/request-log";

export interface RotatingFile {
  /** Appends one line (without its newline); written asynchronously, in order. */
  append(line: string): void;
  /** Resolves once every line appended so far is in its file. */
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
  const open = () => {
    const stream = fs.createWriteStream(path.join(dir, requestLogFileName(index)), { flags: "a" });
    stream.on("error", (err) =>
      process.stderr.write(`multienv-site-proxy: cannot write the request log in ${dir}: ${err.message}\n`),
    );
    return stream;
  };
  let stream = open();
  const removeOld = () => {
    for (const old of requestLogFiles(dir).filter((i) => i <= index - files))
      fs.rm(path.join(dir, requestLogFileName(old)), { force: true }, () => undefined);
  };
  removeOld();
  return {
    append(line) {
      // Encoded once: its length decides the rotation, and the stream writes these bytes as they are.
      const bytes = Buffer.from(line + "\n");
      if (written > 0 && written + bytes.length > fileBytes) {
        stream.end();
        index++;
        written = 0;
        stream = open();
        removeOld();
      }
      written += bytes.length;
      stream.write(bytes);
    },
    flushed() {
      return new Promise((resolve) => stream.write("", () => resolve()));
    },
    close() {
      return new Promise((resolve) => stream.end(resolve));
    },
  };
}
