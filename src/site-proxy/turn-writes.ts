// The proxy's files take lines made during one turn of the event loop together, at the end of that turn
// (setImmediate), in one synchronous write. A write costs a system call whatever it carries (about 28 us for a request
// log entry here), and a stream's asynchronous write costs more again, per write: a hand-off to libuv's threads and a
// turn of the loop for its callback. Written synchronously, a turn's lines are in the page cache before the next
// turn begins, so a proxy killed after that loses none of them.
//
// A write that fails (a full disk) loses that turn's lines and nothing else: what part of them went in is cut off
// the file again, so no line in it is torn (when even that fails, the next write begins with a newline), and the
// file is opened again for the next turn. The failure is told once, and how many lines it cost once writes work
// again or the file is closed.
import * as fs from "node:fs";

export interface TurnFile {
  /** The file's descriptor, opened when a turn's lines are first written and after a failed write. */
  open(): number;
  /** Tells of a failure: its first write that failed, or the lines lost once writes work again. */
  tell(message: string): void;
  /** What a line is called in `tell`'s messages, one and many: `["request log entry", "request log entries"]`. */
  noun: [string, string];
  /** Told of the bytes of a turn's lines that are not in the file, the write having failed. */
  dropped?(bytes: number): void;
}

/** Lines waiting for the end of the turn they were made in, and the file they go to. */
export class TurnWrites {
  private waiting: string[] = [];
  private fd: number | undefined;
  /** Part of a failed write is in the file, not cut off again: the next write begins with a newline. */
  private torn = false;
  /** Lines lost since writes began to fail; undefined while they work. */
  private lost: number | undefined;

  constructor(private readonly file: TurnFile) {}

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
    const newline = this.torn ? "\n" : "";
    const bytes = Buffer.from(newline + lines.join(""));
    let at = 0;
    try {
      this.fd ??= this.file.open();
      while (at < bytes.length) at += fs.writeSync(this.fd, bytes, at);
    } catch (err) {
      if (at > 0) this.cutOff(at);
      this.closeFile();
      this.file.dropped?.(bytes.length - newline.length);
      if (this.lost === undefined)
        this.file.tell(`cannot write ${this.count(lines.length)}: ${(err as Error).message}`);
      this.lost = (this.lost ?? 0) + lines.length;
      return;
    }
    this.torn = false;
    if (this.lost !== undefined) this.file.tell(`writes work again; ${this.count(this.lost)} lost while they failed`);
    this.lost = undefined;
  };

  /** Takes the last `bytes` written off the file: the part of a failed write that went in. */
  private cutOff(bytes: number): void {
    try {
      fs.ftruncateSync(this.fd!, fs.fstatSync(this.fd!).size - bytes);
    } catch {
      this.torn = true;
    }
  }

  /** Writes the waiting lines and closes the file (a later line opens it again). */
  close(): void {
    if (this.waiting.length > 0) this.flush();
    if (this.lost !== undefined) this.file.tell(`closed with ${this.count(this.lost)} lost while writes failed`);
    this.lost = undefined;
    this.closeFile();
  }

  private closeFile(): void {
    if (this.fd === undefined) return;
    const closing = this.fd;
    this.fd = undefined;
    fs.close(closing, () => undefined);
  }

  private count(n: number): string {
    return n === 1 ? `a ${this.file.noun[0]}` : `${n} ${this.file.noun[1]}`;
  }
}
