// The gateway's client for forwarded requests: undici (the Node.js project's HTTP/1.1 client,
// answers framed by llhttp), one kept-alive Pool per upstream origin.
//
// llhttp reads answers the lenient ways RFC 9112 allows a user agent: a bare LF ending the
// status line or the head, an obs-fold (read as a space), Transfer-Encoding in an HTTP/1.0
// answer. A gateway in front of hostile sites refuses those instead, so every connection's
// answer heads are checked line by line as undici reads them, before llhttp sees the bytes:
// with one request at a time on a connection (no pipelining), the first bytes read after a
// request's head went out are its answer's head. The check decides nothing about framing
// (llhttp does); it only refuses a head llhttp would have forgiven.
import diagnosticsChannel from "node:diagnostics_channel";
import type { Socket } from "node:net";
import { buildConnector, Pool } from "undici";

/** Thrown for a failure the gateway names in its 502 answer. */
export class UpstreamError extends Error {
  constructor(
    readonly reason: string,
    detail: string,
    /** A refusal of the upstream's answer (its framing or protocol), logged as `upstream-refused`. */
    readonly refused = false,
  ) {
    super(detail);
  }
}

export const IDLE_REASON = "upstream idle timeout";
export const CONNECT_TIMEOUT_REASON = "upstream connect timeout";
export const FAILED_REASON = "upstream failed";

/** A pooled connection unused this long is closed (node servers close theirs after 5 s). */
const POOL_IDLE_MS = 4_000;
const MAX_RESPONSE_HEAD_BYTES = 64 * 1024;
const STATUS_LINE = /^HTTP\/1\.([01]) (\d{3})/;
const TRANSFER_ENCODING_LINE = /^transfer-encoding[ \t]*:/i;

/** The line-by-line check of one connection's answer heads. */
class HeadCheck {
  private inHead = false;
  private line = "";
  private lines = 0;
  private http10 = false;
  private informational = false;

  /** A request's head went out: what comes next is its answer's head. */
  expectHead(): void {
    this.inHead = true;
    this.line = "";
    this.lines = 0;
  }

  /** Checks the head bytes in `chunk`; returns what is wrong, or undefined. Body bytes pass unread. */
  feed(chunk: Buffer): string | undefined {
    let at = 0;
    while (this.inHead && at < chunk.length) {
      const newline = chunk.indexOf(10, at);
      if (
        newline !== -1 &&
        this.line === "" &&
        this.lines > 0 &&
        !this.http10 &&
        newline - at > 1 &&
        chunk[newline - 1] === 13 &&
        chunk[at] !== 32 &&
        chunk[at] !== 9
      ) {
        // An ordinary header line, whole in this read, ending in CRLF and not a continuation: nothing in it to read
        // as text (as every line of every answer was, before this shortcut).
        this.lines++;
        at = newline + 1;
        continue;
      }
      const end = newline === -1 ? chunk.length : newline;
      // undici refuses an oversized head itself
      if (this.line.length + end - at > MAX_RESPONSE_HEAD_BYTES) return undefined;
      this.line += chunk.toString("latin1", at, end);
      if (newline === -1) return undefined;
      at = newline + 1;
      const line = this.line;
      this.line = "";
      if (!line.endsWith("\r")) return "a bare LF line ending";
      const text = line.slice(0, -1);
      if (this.lines++ === 0) {
        const status = STATUS_LINE.exec(text);
        if (!status) return undefined; // not HTTP/1.x at all: llhttp refuses it
        this.http10 = status[1] === "0";
        this.informational = status[2].startsWith("1") && status[2] !== "101";
      } else if (text === "") {
        // The head's end: an informational answer is followed by another head, a final one by its body.
        if (this.informational) this.lines = 0;
        else this.inHead = false;
      } else if (text[0] === " " || text[0] === "\t") {
        return "obs-fold (a header line continued on the next)";
      } else if (this.http10 && TRANSFER_ENCODING_LINE.test(text)) {
        return "Transfer-Encoding in an HTTP/1.0 answer";
      }
    }
    return undefined;
  }
}

const checks = new WeakMap<Socket, HeadCheck>();

// undici announces each request head it writes, with its socket; other undici copies in the
// process announce on the same channel, for sockets this module never checked.
diagnosticsChannel.subscribe("undici:client:sendHeaders", (message) => {
  checks.get((message as { socket: Socket }).socket)?.expectHead();
});

/** Puts `socket`'s reads through a HeadCheck: undici pulls every byte it parses with `read()`. */
function checkHeads(socket: Socket): void {
  const check = new HeadCheck();
  checks.set(socket, check);
  const read = socket.read;
  socket.read = function (this: Socket, size?: number) {
    const chunk = read.call(this, size) as Buffer | null;
    if (chunk === null) return chunk;
    const problem = check.feed(chunk);
    if (problem === undefined) return chunk;
    this.destroy(new UpstreamError(FAILED_REASON, `answer refused: ${problem}`, true));
    return null;
  };
}

/** The kept-alive connections to one origin (`http://host:port`). */
export function upstreamPool(origin: string, connectTimeoutMs: number): Pool {
  const connect = buildConnector({ timeout: connectTimeoutMs });
  return new Pool(origin, {
    // One request at a time per connection: what makes the head check (and the answers) unambiguous.
    pipelining: 1,
    keepAliveTimeout: POOL_IDLE_MS,
    // The idle timeout is the gateway's own (bytes either way); undici's would cut a long upload waiting for its
    // answer.
    headersTimeout: 0,
    bodyTimeout: 0,
    maxHeaderSize: MAX_RESPONSE_HEAD_BYTES,
    strictContentLength: true,
    connect: (options, callback) =>
      connect(options, (error, socket) => {
        if (socket) checkHeads(socket as Socket);
        (callback as (error: Error | null, socket: unknown) => void)(error, socket);
      }),
  });
}
