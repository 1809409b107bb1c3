// The proxy's files take lines made during one turn of the event loop together, at the end of that turn
// (setImmediate), in one synchronous write. A write costs a system call whatever it carries (about 28 us for a request
// log entry here), and a stream's asynchronous write costs more again, per write: a hand-off to libuv's threads and a
// turn of the loop for its callback. Written synchronously, a turn's lines are in the page cache before the next
// turn begins, so a proxy killed after that loses none of them.
import * as fs from "node:fs";

/** Writes all of `text` to `fd` (one write may take only part of it). */
export function writeWhole(fd: number, text: string): void {
  const bytes = Buffer.from(text);
  for (let at = 0; at < bytes.length;) at += fs.writeSync(fd, bytes, at);
}

/** Lines waiting for the end of the turn they were made in. */
export class TurnWrites {
  private waiting: string[] = [];

  /** `write` is handed the waiting lines joined, and how many they are. */
  constructor(private readonly write: (text: string, lines: number) => void) {}

  /** Adds a line (with its newline), written at the end of this turn. */
  add(line: string): void {
    if (this.waiting.length === 0) setImmediate(this.flush);
    this.waiting.push(line);
  }

  /** Writes the waiting lines now. */
  readonly flush = (): void => {
    if (this.waiting.length === 0) return;
    const lines = this.waiting;
    this.waiting = [];
    this.write(lines.join(""), lines.length);
  };
}
