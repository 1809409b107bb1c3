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

class UpstreamError extends Error {
  constructor(
    readonly reason: string,
    detail: string,
  ) {
    super(detail);
  }
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
  /** Kept-alive upstream connections, reused across requests (the gateway talks to few upstreams, often). */
  private readonly agent = new http.Agent({ keepAlive: true, maxSockets: 1024, maxFreeSockets: 256, scheduling: "lifo" });

  constructor(private readonly options: ForwarderOptions) {}

  /** Applies the connect timeout to a request's socket while it is still connecting. */
  private guardConnect(upstreamReq: http.ClientRequest): void {
    upstreamReq.once("socket", (socket) => {
      if (!socket.connecting) return;
      const timer = setTimeout(
        () => upstreamReq.destroy(new UpstreamError("upstream connect timeout", `no connection after ${this.options.connectTimeoutMs} ms`)),
        this.options.connectTimeoutMs,
      );
      const clear = () => clearTimeout(timer);
      socket.once("connect", clear);
      socket.once("close", clear);
    });
  }

  /** Forwards `req` to `upstream` at `rest` (path and query, as received) and streams the answer back. */
  forward(req: IncomingMessage, res: ServerResponse, upstream: Upstream, rest: string): void {
    const path = upstreamPath(upstream, rest);
    const upstreamReq = http.request({
      host: upstream.url.hostname,
      port: upstream.url.port || 80,
      method: req.method,
      path,
      headers: upstreamRequestHeaders(req, { upgrade: false, controlToken: this.options.controlToken, host: upstream.host }) as unknown as http.OutgoingHttpHeaders,
      setHost: false,
      agent: this.agent,
    });
    this.guardConnect(upstreamReq);
    let bytesSent = 0;
    let finished = false;

    upstreamReq.setTimeout(this.options.idleTimeoutMs, () => {
      const idle = new UpstreamError("upstream idle timeout", `no bytes for ${this.options.idleTimeoutMs} ms`);
      if (res.headersSent) {
        this.options.log("upstream-idle-timeout", { ...upstream.label, method: req.method, path, bytesSent, idleTimeoutMs: this.options.idleTimeoutMs });
      }
      upstreamReq.destroy(idle);
    });

    upstreamReq.on("response", (upstreamRes) => {
      res.sendDate = false; // the upstream's Date (if any) is forwarded as it is
      res.writeHead(upstreamRes.statusCode ?? 502, upstreamRes.statusMessage, clientResponseHeaders(upstreamRes.rawHeaders) as unknown as http.OutgoingHttpHeaders);
      // HTTP/1.0-style bodies or 204/304: flush the head now rather than with the first chunk.
      upstreamRes.on("data", (chunk: Buffer) => (bytesSent += chunk.length));
      upstreamRes.on("end", () => (finished = true));
      upstreamRes.on("error", () => undefined); // reported through upstreamReq
      upstreamRes.pipe(res);
    });

    upstreamReq.on("error", (error) => {
      if (res.headersSent) {
        if (!(error instanceof UpstreamError && error.reason === "upstream idle timeout") && !finished) {
          this.options.log("upstream-error", { ...upstream.label, method: req.method, path, bytesSent, error: error.message });
        }
        res.destroy();
        return;
      }
      if (res.destroyed) return;
      const { error: reason, detail } = describe(error);
      this.options.log("upstream-failed", { ...upstream.label, method: req.method, path, error: reason, detail });
      replyJson(res, 502, { error: reason, ...upstream.label, detail });
    });

    // A client that goes away takes its upstream exchange with it.
    res.on("close", () => {
      if (!res.writableFinished) upstreamReq.destroy();
    });
    req.on("error", () => upstreamReq.destroy());
    req.pipe(upstreamReq);
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
    this.agent.destroy();
  }
}
