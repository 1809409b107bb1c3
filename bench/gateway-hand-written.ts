// The hand-written HTTP/1.1 client the gateway forwarded requests with before undici, kept
// here as the baseline bench/gateway.ts measures undici against: run as a script, this is the
// gateway (src/gateway/run.ts) with this client in undici's place, in every worker.
//
// It is the client as it was (kept-alive connections per upstream, the request head written
// from the raw header array in one piece, the response head parsed here and its body framed
// and handed over chunk by chunk), plus `dispatch()`, the one undici method the gateway calls.
// It is a speed baseline only: the gateway's framing rules are undici's and the forwarder's.
import net from "node:net";
import type { Readable } from "node:stream";
import type { Dispatcher } from "undici";
import { runGateway } from "../src/gateway/run";

/** A response head as received: raw header names and values (latin1 strings, repeats kept). */
export interface ResponseHead {
  status: number;
  statusText: string;
  rawHeaders: string[];
}

export interface ExchangeHandlers {
  /** The final (non-1xx) head. */
  onHead(head: ResponseHead): void;
  /** A body chunk; return false to pause the upstream until `exchange.resume()`. */
  onData(chunk: Buffer): boolean;
  onEnd(): void;
  /** The exchange failed; `reused` says whether its connection had served an earlier exchange. */
  onError(error: Error, reused: boolean): void;
}

/** Thrown for a failure the gateway names in its 502 answer. */
export class UpstreamError extends Error {
  constructor(
    readonly reason: string,
    detail: string,
  ) {
    super(detail);
  }
}

export const IDLE_REASON = "upstream idle timeout";
export const CONNECT_TIMEOUT_REASON = "upstream connect timeout";

const MAX_HEAD_BYTES = 64 * 1024;
/** A pooled connection unused this long is closed (node servers close theirs after 5 s). */
const POOL_IDLE_MS = 4_000;
const MAX_IDLE_CONNECTIONS = 256;
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
const STATUS_LINE = /^HTTP\/1\.([01]) (\d{3})(?: (.*))?$/;

type BodyMode = { kind: "none" } | { kind: "length"; remaining: number } | { kind: "chunked" } | { kind: "close" };

/** Incremental chunked-coding decoder: feeds decoded data to `onData`, says when the message ended. */
class ChunkedDecoder {
  private state: "size" | "data" | "data-crlf" | "trailer" = "size";
  private remaining = 0;
  private line = "";

  /**
   * Decodes `chunk`; returns the bytes after the message's end, or undefined while it goes on. Throws on bad framing.
   */
  feed(chunk: Buffer, onData: (data: Buffer) => void): Buffer | undefined {
    let at = 0;
    while (at < chunk.length) {
      if (this.state === "data") {
        const take = Math.min(this.remaining, chunk.length - at);
        onData(chunk.subarray(at, at + take));
        at += take;
        this.remaining -= take;
        if (this.remaining === 0) this.state = "data-crlf";
        continue;
      }
      // size, data-crlf and trailer are lines
      const newline = chunk.indexOf(10, at);
      const end = newline === -1 ? chunk.length : newline + 1;
      this.line += chunk.toString("latin1", at, end);
      at = end;
      if (this.line.length > 8192) throw new UpstreamError("upstream failed", "malformed chunked body (line too long)");
      if (newline === -1) break;
      const line = this.line.replace(/\r?\n$/, "");
      this.line = "";
      if (this.state === "data-crlf") {
        if (line !== "") throw new UpstreamError("upstream failed", "malformed chunked body (no CRLF after data)");
        this.state = "size";
      } else if (this.state === "size") {
        const size = /^([0-9a-fA-F]{1,12})[ \t]*(;.*)?$/.exec(line);
        if (!size) throw new UpstreamError("upstream failed", "malformed chunked body (bad chunk size)");
        this.remaining = parseInt(size[1], 16);
        this.state = this.remaining === 0 ? "trailer" : "data";
      } else if (line === "") {
        return chunk.subarray(at); // end of trailers: the message is complete
      }
    }
    return undefined;
  }
}

function parseHead(text: string): {
  version: 0 | 1;
  head: ResponseHead;
  connectionClose: boolean;
  keepAliveToken: boolean;
  transferEncoding?: string;
  contentLength?: number;
} {
  const lines = text.split("\r\n");
  const status = STATUS_LINE.exec(lines[0]);
  if (!status)
    throw new UpstreamError("upstream failed", `malformed status line ${JSON.stringify(lines[0].slice(0, 100))}`);
  const rawHeaders: string[] = [];
  let connectionClose = false;
  let keepAliveToken = false;
  let transferEncoding: string | undefined;
  let contentLength: number | undefined;
  for (let i = 1; i < lines.length; i++) {
    const line = lines[i];
    const colon = line.indexOf(":");
    const name = colon > 0 ? line.slice(0, colon) : "";
    if (!TOKEN.test(name))
      throw new UpstreamError("upstream failed", `malformed header line ${JSON.stringify(line.slice(0, 100))}`);
    const value = line.slice(colon + 1).replace(/^[ \t]+|[ \t]+$/g, "");
    if (/[\0\r\n]/.test(value)) throw new UpstreamError("upstream failed", `malformed header value of ${name}`);
    rawHeaders.push(name, value);
    switch (name.toLowerCase()) {
      case "connection":
        for (const token of value.toLowerCase().split(",")) {
          if (token.trim() === "close") connectionClose = true;
          if (token.trim() === "keep-alive") keepAliveToken = true;
        }
        break;
      case "transfer-encoding":
        transferEncoding = transferEncoding === undefined ? value : `${transferEncoding}, ${value}`;
        break;
      case "content-length": {
        if (!/^\d{1,15}$/.test(value))
          throw new UpstreamError("upstream failed", `malformed Content-Length ${JSON.stringify(value)}`);
        const length = Number(value);
        if (contentLength !== undefined && contentLength !== length)
          throw new UpstreamError("upstream failed", "conflicting Content-Length headers");
        contentLength = length;
        break;
      }
    }
  }
  return {
    version: status[1] === "1" ? 1 : 0,
    head: { status: Number(status[2]), statusText: status[3] ?? "", rawHeaders },
    connectionClose,
    keepAliveToken,
    transferEncoding,
    contentLength,
  };
}

/** One exchange on one connection. */
export class Exchange {
  private buffered: Buffer | undefined;
  private headDone = false;
  private body: BodyMode = { kind: "none" };
  private chunked: ChunkedDecoder | undefined;
  private reusable = false;
  private done = false;
  private gotBytes = false;
  private requestEnded = false;

  constructor(
    private readonly connection: Connection,
    private readonly isHead: boolean,
    private readonly handlers: ExchangeHandlers,
  ) {}

  /** Resumes reading after onData returned false. */
  resume(): void {
    if (!this.done) this.connection.socket.resume();
  }

  /** Ends the exchange from the client's side (it went away): the connection is closed. */
  abort(): void {
    if (this.done) return;
    this.done = true;
    this.connection.socket.destroy();
  }

  /** Writes request body bytes as they are (the head said Content-Length). */
  write(data: Buffer): boolean {
    return this.done ? true : this.connection.socket.write(data);
  }

  /** Writes request body bytes as one chunk of a chunked body (the head said Transfer-Encoding: chunked). */
  writeChunk(data: Buffer): boolean {
    if (this.done || data.length === 0) return true; // an empty chunk would end the body
    const socket = this.connection.socket;
    socket.cork();
    socket.write(`${data.length.toString(16)}\r\n`, "latin1");
    socket.write(data);
    const ok = socket.write("\r\n", "latin1");
    socket.uncork();
    return ok;
  }

  /** The request is complete (its body, if any, written); `lastChunk` ends a chunked body. */
  endRequest(lastChunk: boolean): void {
    if (lastChunk && !this.done) this.connection.socket.write("0\r\n\r\n", "latin1");
    this.requestEnded = true;
  }

  onDrain(listener: () => void): void {
    this.connection.socket.on("drain", listener);
  }

  offDrain(listener: () => void): void {
    this.connection.socket.off("drain", listener);
  }

  fail(error: Error): void {
    if (this.done) return;
    this.done = true;
    this.connection.socket.destroy();
    this.handlers.onError(error, this.connection.served > 0 && !this.gotBytes);
  }

  /** The connection closed: for a close-delimited body that is its end, else a failure. */
  closed(): void {
    if (this.done) return;
    if (this.headDone && this.body.kind === "close") {
      this.done = true;
      this.handlers.onEnd();
      return;
    }
    this.fail(Object.assign(new Error("socket hang up"), { code: "ECONNRESET" }));
  }

  data(chunk: Buffer): void {
    if (this.done) return;
    this.gotBytes = true;
    try {
      let rest: Buffer | undefined = chunk;
      while (rest && rest.length > 0 && !this.done) {
        rest = this.headDone ? this.bodyData(rest) : this.headData(rest);
      }
    } catch (error) {
      this.fail(error as Error);
    }
  }

  /** Consumes head bytes; returns what follows the head (body bytes), if any. */
  private headData(chunk: Buffer): Buffer | undefined {
    const all: Buffer = this.buffered ? Buffer.concat([this.buffered, chunk]) : chunk;
    const end = all.indexOf("\r\n\r\n");
    if (end === -1) {
      if (all.length > MAX_HEAD_BYTES)
        throw new UpstreamError("upstream failed", `response head larger than ${MAX_HEAD_BYTES} bytes`);
      this.buffered = all;
      return undefined;
    }
    this.buffered = undefined;
    const parsed = parseHead(all.toString("latin1", 0, end));
    const after = all.subarray(end + 4);
    const status = parsed.head.status;
    if (status >= 100 && status < 200) {
      if (status === 101)
        throw new UpstreamError("upstream failed", "101 Switching Protocols to a request that asked for no upgrade");
      return after; // informational (100 Continue, 103 Early Hints): the final head follows
    }
    this.headDone = true;
    this.reusable = parsed.version === 1 ? !parsed.connectionClose : parsed.keepAliveToken && !parsed.connectionClose;
    if (this.isHead || status === 204 || status === 304) this.body = { kind: "none" };
    else if (parsed.transferEncoding !== undefined) {
      const codings = parsed.transferEncoding
        .toLowerCase()
        .split(",")
        .map((c) => c.trim());
      if (codings[codings.length - 1] === "chunked") {
        this.body = { kind: "chunked" };
        this.chunked = new ChunkedDecoder();
      } else {
        this.body = { kind: "close" };
        this.reusable = false;
      }
    } else if (parsed.contentLength !== undefined) this.body = { kind: "length", remaining: parsed.contentLength };
    else {
      this.body = { kind: "close" };
      this.reusable = false;
    }
    this.handlers.onHead(parsed.head);
    if (this.done) return undefined;
    if (this.body.kind === "none" || (this.body.kind === "length" && this.body.remaining === 0)) {
      this.complete(after);
      return undefined;
    }
    return after;
  }

  /** Consumes body bytes; returns what follows the message, if it ended. */
  private bodyData(chunk: Buffer): Buffer | undefined {
    const body = this.body;
    let paused = false;
    const deliver = (data: Buffer) => {
      if (data.length > 0 && !this.handlers.onData(data)) paused = true;
    };
    let after: Buffer | undefined;
    if (body.kind === "length") {
      const take = Math.min(body.remaining, chunk.length);
      deliver(take === chunk.length ? chunk : chunk.subarray(0, take));
      body.remaining -= take;
      if (body.remaining === 0) after = chunk.subarray(take);
    } else if (body.kind === "chunked") {
      after = this.chunked!.feed(chunk, deliver);
    } else {
      deliver(chunk);
    }
    if (paused && !this.done) this.connection.socket.pause();
    if (after !== undefined) this.complete(after);
    return undefined;
  }

  private complete(extra: Buffer): void {
    if (this.done) return;
    this.done = true;
    // Bytes past the message's end mean the upstream does not frame as we think, and an answer
    // that came before the request's body was all sent leaves that body on the wire: never reuse.
    this.connection.finish(this.reusable && extra.length === 0 && this.requestEnded);
    this.handlers.onEnd();
  }
}

/** A connection to one upstream, serving one exchange at a time. */
class Connection {
  exchange: Exchange | undefined;
  served = 0;
  private connectTimer: NodeJS.Timeout | undefined;

  constructor(
    readonly socket: net.Socket,
    private readonly pool: UpstreamPool,
  ) {
    socket.setNoDelay(true);
    socket.on("data", (chunk: Buffer) => {
      if (this.exchange) this.exchange.data(chunk);
      else socket.destroy(); // an idle connection must not speak
    });
    socket.on("timeout", () => {
      if (this.exchange) this.exchange.fail(new UpstreamError(IDLE_REASON, `no bytes for ${pool.idleTimeoutMs} ms`));
      else socket.destroy(); // pooled too long
    });
    socket.on("error", (error) => this.exchange?.fail(error));
    socket.on("close", () => {
      clearTimeout(this.connectTimer);
      this.pool.forget(this);
      this.exchange?.closed();
    });
    if (socket.connecting) {
      this.connectTimer = setTimeout(
        () =>
          this.exchange?.fail(
            new UpstreamError(CONNECT_TIMEOUT_REASON, `no connection after ${pool.connectTimeoutMs} ms`),
          ),
        pool.connectTimeoutMs,
      );
      socket.once("connect", () => {
        clearTimeout(this.connectTimer);
        if (this.exchange) socket.setTimeout(pool.idleTimeoutMs);
      });
    }
  }

  start(exchange: Exchange): void {
    this.exchange = exchange;
    if (!this.socket.connecting) this.socket.setTimeout(this.pool.idleTimeoutMs);
  }

  finish(reusable: boolean): void {
    this.exchange = undefined;
    this.served++;
    this.socket.resume();
    if (reusable && !this.socket.destroyed) this.pool.release(this);
    else this.socket.destroy();
  }
}

/** Kept-alive connections to one upstream (host and port). */
export class UpstreamPool {
  private readonly idle: Connection[] = [];

  constructor(
    private readonly host: string,
    private readonly port: number,
    readonly connectTimeoutMs: number,
    readonly idleTimeoutMs: number,
  ) {}

  /**
   * Starts an exchange: writes the request head (and the caller writes any body with
   * `exchange.write`, framed as the head says).
   */
  request(method: string, path: string, rawHeaders: string[], handlers: ExchangeHandlers): Exchange {
    const connection = this.idle.pop() ?? new Connection(net.connect({ host: this.host, port: this.port }), this);
    const exchange = new Exchange(connection, method === "HEAD", handlers);
    connection.start(exchange);
    let head = `${method} ${path} HTTP/1.1\r\n`;
    for (let i = 0; i < rawHeaders.length; i += 2) head += `${rawHeaders[i]}: ${rawHeaders[i + 1]}\r\n`;
    connection.socket.write(head + "\r\n", "latin1");
    return exchange;
  }

  release(connection: Connection): void {
    if (this.idle.length >= MAX_IDLE_CONNECTIONS) {
      connection.socket.destroy();
      return;
    }
    connection.socket.setTimeout(POOL_IDLE_MS);
    this.idle.push(connection);
  }

  forget(connection: Connection): void {
    const at = this.idle.indexOf(connection);
    if (at !== -1) this.idle.splice(at, 1);
  }

  close(): void {
    for (const connection of this.idle.splice(0)) connection.socket.destroy();
  }
}

/** Carries the gateway's `dispatch(options, handler)` calls to an UpstreamPool, as undici's Pool would. */
class HandWrittenDispatcher {
  constructor(private readonly pool: UpstreamPool) {}

  dispatch(options: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandlers): boolean {
    const headers = [...(options.headers as string[])];
    const body = options.body as Readable | null | undefined;
    const chunked = body != null && !headers.some((name, i) => i % 2 === 0 && name.toLowerCase() === "content-length");
    if (chunked) headers.push("Transfer-Encoding", "chunked");
    const exchange: Exchange = this.pool.request(options.method, options.path, headers, {
      // (The gateway reads each raw header with toString("latin1"), which a string answers as itself.)
      onHead: (head) =>
        void handler.onHeaders?.(
          head.status,
          head.rawHeaders as unknown as Buffer[],
          () => exchange.resume(),
          head.statusText,
        ),
      onData: (chunk) => handler.onData?.(chunk) ?? true,
      onEnd: () => handler.onComplete?.(null),
      onError: (error) => handler.onError?.(error),
    });
    handler.onConnect?.((error) => exchange.fail(error ?? new Error("aborted")));
    if (body == null) {
      exchange.endRequest(false);
      return true;
    }
    const resume = () => body.resume();
    exchange.onDrain(resume);
    body.on("data", (chunk: Buffer) => {
      if (!(chunked ? exchange.writeChunk(chunk) : exchange.write(chunk))) body.pause();
      handler.onBodySent?.(chunk.length, 0);
    });
    body.on("end", () => {
      exchange.offDrain(resume);
      exchange.endRequest(chunked);
    });
    body.on("error", () => exchange.abort());
    return true;
  }

  async destroy(): Promise<void> {
    this.pool.close();
  }
}

void runGateway({
  dispatcherFor: (origin) => {
    const url = new URL(origin);
    return new HandWrittenDispatcher(
      new UpstreamPool(url.hostname, Number(url.port || 80), 10_000, 60_000),
    ) as unknown as Dispatcher;
  },
});
