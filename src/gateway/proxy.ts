// The reverse proxy: one request (or WebSocket upgrade) to one upstream, streamed both
// ways with backpressure, never buffered whole.
//
// Failures: before the upstream's response head, the client gets 502 JSON naming the
// error (connect refused, connect timeout, reset, stalled). After it, the exchange is cut
// (the client sees a short body) and a JSON line says how many body bytes were sent.
// A stall is an idle timeout (no bytes either way on the upstream connection), not a
// ceiling on the whole exchange, so a long download that keeps moving is never cut.
import http, { type IncomingMessage, type ServerResponse } from "node:http";
import type { Duplex } from "node:stream";
import { clientResponseHeaders, responseHead, upstreamRequestHeaders } from "./headers";
import type { Logger } from "./log";
import { replyJson, replyJsonOnSocket } from "./reply";
import { CONNECT_TIMEOUT_REASON, IDLE_REASON, UpstreamError, UpstreamPool, type Exchange } from "./upstream";

export interface Upstream {
  /** The upstream's base URL; its path (if any) prefixes the forwarded path. */
  url: URL;
  /** Names the upstream in errors and logs, e.g. `{site: "shop"}` or `{computer: "agent"}`. */
  label: Record<string, string>;
  /** Host header to send instead of the client's. */
  host?: string;
}

export interface ForwarderOptions {
  controlToken: string;
  connectTimeoutMs: number;
  idleTimeoutMs: number;
  log: Logger;
}

/**
 * How far a client's streamed request body and the answer to it may be buffered before
 * backpressure pauses the other side (node's default is 16 KiB). Larger buffers mean fewer
 * pause/resume rounds per GiB, which is what limits streaming on a busy machine; the cost
 * is bounded per active stream.
 */
export const STREAM_BUFFER_BYTES = 512 * 1024;

/** Whether a request has a body to stream. */
function hasBody(req: IncomingMessage): boolean {
  const length = req.headers["content-length"];
  if (length !== undefined) return length !== "0";
  return req.headers["transfer-encoding"] !== undefined;
}

/** What a request on a kept-alive connection that the upstream already closed fails with. */
function isStaleConnection(error: Error): boolean {
  const code = (error as NodeJS.ErrnoException).code;
  return code === "ECONNRESET" || code === "EPIPE" || error.message === "socket hang up";
}

function upstreamPath(upstream: Upstream, rest: string): string {
  const base = upstream.url.pathname.replace(/\/+$/, "");
  return base + rest || "/";
}

function describe(error: Error): { error: string; detail: string } {
  if (error instanceof UpstreamError) return { error: error.reason, detail: error.message };
  const code = (error as NodeJS.ErrnoException).code;
  const reason = code === "ECONNREFUSED" || code === "ENOTFOUND" || code === "EAI_AGAIN" || code === "EHOSTUNREACH" ? "upstream connect failed" : "upstream failed";
  return { error: reason, detail: error.message };
}

export class Forwarder {
  /** Kept-alive upstream connections per host and port (the gateway talks to few upstreams, often). */
  private readonly pools = new Map<string, UpstreamPool>();

  constructor(private readonly options: ForwarderOptions) {}

  /** The connect timeout for an upgrade's own connection (an upgraded connection has no idle timeout). */
  private guardConnect(upstreamReq: http.ClientRequest): void {
    upstreamReq.once("socket", (socket) => {
      if (!socket.connecting) return;
      const timer = setTimeout(
        () => upstreamReq.destroy(new UpstreamError(CONNECT_TIMEOUT_REASON, `no connection after ${this.options.connectTimeoutMs} ms`)),
        this.options.connectTimeoutMs,
      );
      socket.once("connect", () => clearTimeout(timer));
      socket.once("close", () => clearTimeout(timer));
    });
  }

  /** The kept-alive connections to `url`'s host and port. */
  private pool(url: URL): UpstreamPool {
    const key = `${url.hostname}:${url.port || 80}`;
    let pool = this.pools.get(key);
    if (!pool) {
      pool = new UpstreamPool(url.hostname, Number(url.port || 80), this.options.connectTimeoutMs, this.options.idleTimeoutMs);
      this.pools.set(key, pool);
    }
    return pool;
  }

  /**
   * Forwards `req` to `upstream` at `rest` (path and query, as received) and streams the answer back.
   * A bodiless request whose reused keep-alive connection turns out closed by the upstream
   * (it timed the connection out just as the request went) is sent once more on a new one.
   */
  forward(req: IncomingMessage, res: ServerResponse, upstream: Upstream, rest: string, retry = true): void {
    const path = upstreamPath(upstream, rest);
    const headers = upstreamRequestHeaders(req, { upgrade: false, controlToken: this.options.controlToken, host: upstream.host });
    const bodiless = !hasBody(req);
    let bytesSent = 0;
    let headWritten = false;
    let finished = false;
    const onDrain = () => exchange.resume();

    const exchange: Exchange = this.pool(upstream.url).request(req.method ?? "GET", path, headers, {
      onHead: (head) => {
        res.sendDate = false; // the upstream's Date (if any) is forwarded as it is
        try {
          res.writeHead(head.status, head.statusText, clientResponseHeaders(head.rawHeaders) as unknown as http.OutgoingHttpHeaders);
        } catch (error) {
          // A head node will not write back (e.g. a status outside 100-999): a failure, not a crash.
          exchange.fail(new UpstreamError("upstream failed", `unforwardable response head: ${(error as Error).message}`));
          return;
        }
        headWritten = true;
        // node sends a head with the first body chunk (one packet for a small answer). When the
        // body is not already here, send the head now: a client of a slow stream sees it at once.
        setImmediate(() => {
          if (bytesSent === 0 && !res.writableEnded && !res.destroyed) res.flushHeaders();
        });
      },
      onData: (chunk) => {
        bytesSent += chunk.length;
        if (res.write(chunk)) return true;
        res.once("drain", onDrain);
        return false;
      },
      onEnd: () => {
        finished = true;
        res.end();
      },
      onError: (error, reused) => {
        if (retry && reused && bodiless && !headWritten && isStaleConnection(error)) {
          this.forward(req, res, upstream, rest, false);
          return;
        }
        if (headWritten) {
          if (error instanceof UpstreamError && error.reason === IDLE_REASON) {
            this.options.log("upstream-idle-timeout", { ...upstream.label, method: req.method, path, bytesSent, idleTimeoutMs: this.options.idleTimeoutMs });
          } else if (!finished) {
            this.options.log("upstream-error", { ...upstream.label, method: req.method, path, bytesSent, error: error.message });
          }
          res.destroy();
          return;
        }
        if (res.destroyed) return;
        const { error: reason, detail } = describe(error);
        this.options.log("upstream-failed", { ...upstream.label, method: req.method, path, error: reason, detail });
        replyJson(res, 502, { error: reason, ...upstream.label, detail });
      },
    });

    // A client that goes away takes its upstream exchange with it.
    res.on("close", () => {
      if (!res.writableFinished) exchange.abort();
    });
    if (bodiless) {
      exchange.endRequest(false);
      req.resume();
      return;
    }
    // The body streams as it arrives, paused while the upstream connection is full.
    const chunked = req.headers["content-length"] === undefined;
    const resumeReq = () => req.resume();
    exchange.onDrain(resumeReq);
    req.on("data", (chunk: Buffer) => {
      if (!(chunked ? exchange.writeChunk(chunk) : exchange.write(chunk))) req.pause();
    });
    req.on("end", () => {
      exchange.offDrain(resumeReq);
      exchange.endRequest(chunked);
    });
    req.on("error", () => exchange.abort());
  }

  /** Forwards an upgrade request (WebSocket) and, once the upstream switches protocols, pipes the two sockets. */
  upgrade(req: IncomingMessage, socket: Duplex, head: Buffer, upstream: Upstream, rest: string): void {
    const path = upstreamPath(upstream, rest);
    const upstreamReq = http.request({
      host: upstream.url.hostname,
      port: upstream.url.port || 80,
      method: req.method,
      path,
      headers: upstreamRequestHeaders(req, { upgrade: true, controlToken: this.options.controlToken, host: upstream.host }) as unknown as http.OutgoingHttpHeaders,
      setHost: false,
      agent: false,
    });
    // No idle timeout once upgraded: a DevTools or app WebSocket may rightly be quiet for long.
    this.guardConnect(upstreamReq);
    const onClientGone = () => upstreamReq.destroy();
    socket.once("close", onClientGone);
    socket.on("error", () => undefined);

    upstreamReq.on("upgrade", (upstreamRes, upstreamSocket, upstreamHead) => {
      socket.off("close", onClientGone);
      socket.write(responseHead(101, upstreamRes.statusMessage ?? "Switching Protocols", clientResponseHeaders(upstreamRes.rawHeaders, true)), "latin1");
      if (upstreamHead.length > 0) socket.write(upstreamHead);
      if (head.length > 0) upstreamSocket.write(head);
      upstreamSocket.setNoDelay(true);
      if ("setNoDelay" in socket) (socket as import("node:net").Socket).setNoDelay(true);
      upstreamSocket.on("error", () => socket.destroy());
      socket.on("error", () => upstreamSocket.destroy());
      upstreamSocket.on("close", () => socket.destroy());
      socket.on("close", () => upstreamSocket.destroy());
      upstreamSocket.pipe(socket);
      socket.pipe(upstreamSocket);
    });

    // The upstream answered without switching: relay that answer, then close.
    upstreamReq.on("response", (upstreamRes) => {
      socket.write(responseHead(upstreamRes.statusCode ?? 502, upstreamRes.statusMessage ?? "", [...clientResponseHeaders(upstreamRes.rawHeaders), "Connection", "close"]), "latin1");
      upstreamRes.pipe(socket);
    });

    upstreamReq.on("error", (error) => {
      const { error: reason, detail } = describe(error);
      this.options.log("upstream-failed", { ...upstream.label, method: req.method, path, upgrade: true, error: reason, detail });
      replyJsonOnSocket(socket, 502, { error: reason, ...upstream.label, detail });
    });
    upstreamReq.end();
  }

  close(): void {
    for (const pool of this.pools.values()) pool.close();
  }
}
