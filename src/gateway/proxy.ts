// The reverse proxy: one request (or WebSocket upgrade) to one upstream, streamed both
// ways with backpressure, never buffered whole.
//
// Forwarded requests go through undici (the Node.js project's HTTP/1.1 client, its answers
// framed by llhttp): one kept-alive pool per upstream host and port. The gateway frames each
// message again on the next hop from what the parser read (framing.ts), so a framing header
// is never passed on as received. Upgrades use node's http.request (a WebSocket is a byte
// pipe once switched; an upgrade request carries no body).
//
// Failures: before the upstream's response head, the client gets 502 JSON naming the
// error (connect refused, connect timeout, reset, stalled, an answer whose framing is
// refused). After it, the exchange is cut (the client sees a short body) and a JSON line
// says how many body bytes were sent. A stall is an idle timeout (no bytes either way on the
// upstream exchange), not a ceiling on the whole exchange, so a long download or upload that
// keeps moving is never cut.
import http, { type IncomingMessage, type ServerResponse } from "node:http";
import { Readable, type Duplex } from "node:stream";
import type { Dispatcher } from "undici";
import type { CredentialReader } from "./credentials";
import {
  mayRetry,
  requestBody,
  responseContentLength,
  responseFramingProblem,
  responseHasBody,
  type BodyFraming,
} from "../service-kit/framing";
import { clientResponseHeaders, responseHead, upstreamRequestHeaders } from "./headers";
import type { Logger } from "../service-kit/log";
import { replyJson, replyJsonOnSocket } from "../service-kit/reply";
import { CONNECT_TIMEOUT_REASON, FAILED_REASON, IDLE_REASON, UpstreamError, upstreamPool } from "./upstream";

export interface Upstream {
  /** The upstream's base URL; its path (if any) prefixes the forwarded path. */
  url: URL;
  /** Names the upstream in errors and logs, e.g. `{site: "shop"}` or `{computer: "agent"}`. */
  label: Record<string, string>;
  /** Host header to send instead of the client's. */
  host?: string;
  /** Authorization to send instead of the client's (the gateway's own credential for this upstream). */
  authorization?: string;
  /** The upstream is a replay server: its answers' replay evidence (the nearest recorded URL of a miss) crosses. */
  replayEvidence?: true;
}

/** The undici dispatcher that carries requests to one origin (`http://host:port`). */
export type DispatcherFor = (origin: string) => Dispatcher;

export interface ForwarderOptions {
  /** The requests' credentials, read once each: what of them no upstream may see (see headers.ts). */
  credentials: CredentialReader;
  connectTimeoutMs: number;
  idleTimeoutMs: number;
  log: Logger;
  /** Where forwarded requests go; by default a kept-alive undici Pool per origin. */
  dispatcherFor?: DispatcherFor;
}

/**
 * How far a client's streamed request body and the answer to it may be buffered before
 * backpressure pauses the other side (node's default is 16 KiB). Larger buffers mean fewer
 * pause/resume rounds per GiB, which is what limits streaming on a busy machine; the cost
 * is bounded per active stream.
 */
export const STREAM_BUFFER_BYTES = 512 * 1024;

/** What was wrong with an answer undici refused for breaking HTTP/1.1, or undefined for any other failure. */
function refusedByParser(error: Error): string | undefined {
  const code = (error as NodeJS.ErrnoException).code ?? "";
  if (code === "UND_ERR_RES_CONTENT_LENGTH_MISMATCH") {
    // llhttp's own reason is hidden behind this one whenever a Content-Length was seen.
    return "Content-Length that does not frame the answer (repeated, malformed, beside Transfer-Encoding, or not what was sent)";
  }
  if (code.startsWith("HPE_") || code === "UND_ERR_HEADERS_OVERFLOW") return error.message;
  if (code === "UND_ERR_SOCKET" && /bad (response|upgrade)/.test(error.message))
    return `${error.message} (an answer nothing asked for)`;
  if (error.name === "AssertionError") return `unparseable answer (${error.message.split("\n")[0]})`;
  return undefined;
}

/** What a request on a kept-alive connection that the upstream already closed fails with. */
function isStaleConnection(error: Error): boolean {
  const code = (error as NodeJS.ErrnoException).code;
  return (
    code === "ECONNRESET" || code === "EPIPE" || (code === "UND_ERR_SOCKET" && error.message === "other side closed")
  );
}

function upstreamPath(upstream: Upstream, rest: string): string {
  const base = upstream.url.pathname.replace(/\/+$/, "");
  return base + rest || "/";
}

function describe(error: Error): { error: string; detail: string; refused: boolean } {
  if (error instanceof UpstreamError) return { error: error.reason, detail: error.message, refused: error.refused };
  const refused = refusedByParser(error);
  if (refused !== undefined) return { error: FAILED_REASON, detail: `answer refused: ${refused}`, refused: true };
  const code = (error as NodeJS.ErrnoException).code;
  if (code === "UND_ERR_CONNECT_TIMEOUT")
    return { error: CONNECT_TIMEOUT_REASON, detail: error.message, refused: false };
  const reason =
    code === "ECONNREFUSED" ||
    code === "ENOTFOUND" ||
    code === "EAI_AGAIN" ||
    code === "EHOSTUNREACH" ||
    code === "ENETUNREACH"
      ? "upstream connect failed"
      : FAILED_REASON;
  return { error: reason, detail: error.message, refused: false };
}

function latin1(raw: Buffer[]): string[] {
  const out = new Array<string>(raw.length);
  for (let i = 0; i < raw.length; i++) out[i] = raw[i].toString("latin1");
  return out;
}

/**
 * A request's body as undici reads it. undici destroys the body stream it was given when the
 * exchange ends early (an upstream that answers before reading it); this one stands between
 * it and the client's request, so the client's connection is left to drain, not destroyed.
 */
class RequestBody extends Readable {
  private readonly onData = (chunk: Buffer) => {
    if (!this.push(chunk)) this.req.pause();
  };
  private readonly onEnd = () => this.push(null);
  private readonly onAborted = () => this.destroy(new Error("the client went away mid-body"));

  constructor(private readonly req: IncomingMessage) {
    super({ highWaterMark: STREAM_BUFFER_BYTES });
    req.on("data", this.onData);
    req.once("end", this.onEnd);
    req.once("error", this.onAborted);
    req.once("aborted", this.onAborted);
  }

  override _read(): void {
    this.req.resume();
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    this.req.off("data", this.onData);
    this.req.off("end", this.onEnd);
    this.req.off("error", this.onAborted);
    this.req.off("aborted", this.onAborted);
    if (!this.req.complete) this.req.resume(); // the rest is read and dropped: the client's connection stays in step
    callback(error);
  }
}

/** An answer head, held until its first body bytes (or its end) so a refusal found there can still be a 502. */
interface PendingHead {
  status: number;
  statusText: string;
  headers: string[];
}

/** One forwarded exchange: undici's handler, writing the answer to the client as it comes. */
class Exchange implements Dispatcher.DispatchHandlers {
  private abort: ((error?: Error) => void) | undefined;
  private resume: (() => void) | undefined;
  /** Started once connected: until then the connect timeout is the bound. */
  private idle: NodeJS.Timeout | undefined;
  private pending: PendingHead | undefined;
  private headWritten = false;
  private bytesSent = 0;
  /** The client has its whole answer; whatever undici says next does not concern it. */
  private answered = false;
  private done = false;

  constructor(
    private readonly forwarder: Forwarder,
    private readonly req: IncomingMessage,
    private readonly res: ServerResponse,
    private readonly upstream: Upstream,
    readonly method: string,
    readonly path: string,
    private readonly body: BodyFraming,
    private readonly attempt: number,
    private readonly idleTimeoutMs: number,
  ) {}

  /** Cuts the exchange from the client's side (it went away). */
  cancel(): void {
    if (!this.done) this.abort?.(new Error("the client went away"));
  }

  onConnect(abort: (error?: Error) => void): void {
    this.abort = abort;
    this.idle = setTimeout(
      () => abort(new UpstreamError(IDLE_REASON, `no bytes for ${this.idleTimeoutMs} ms`)),
      this.idleTimeoutMs,
    );
  }

  onBodySent(): void {
    this.idle?.refresh();
  }

  onHeaders(status: number, rawHeaders: Buffer[], resume: () => void, statusText: string): boolean {
    this.idle?.refresh();
    if (status < 200) return true; // informational (103 Early Hints): the final head follows
    const raw = latin1(rawHeaders);
    const problem = responseFramingProblem(raw);
    if (problem !== undefined) {
      this.abort?.(new UpstreamError(FAILED_REASON, `answer refused: ${problem}`, true));
      return false;
    }
    const headers = clientResponseHeaders(raw, false, this.upstream.replayEvidence === true);
    const length = responseContentLength(raw);
    const hasBody = responseHasBody(this.method, status);
    // The client's framing is the gateway's own: the answer's length when it had one, else node chunks it.
    // HEAD and 304 keep theirs: it describes the representation, and no body follows.
    if (length !== undefined && (hasBody || this.method === "HEAD" || status === 304))
      headers.push("Content-Length", length);
    this.pending = { status, statusText, headers };
    this.resume = resume;
    if (!hasBody && this.method !== "HEAD") {
      // 204 and 304 end at their head. undici would wait for the body a 304's Content-Length
      // seems to announce, so the client is answered now and that connection is not reused.
      if (!this.writeHead()) return false;
      this.answered = true;
      this.res.end();
      if (length !== undefined)
        this.abort?.(new UpstreamError(FAILED_REASON, "a bodiless answer with a Content-Length"));
      return true;
    }
    // Sent with the first body bytes, or on its own if they are not here by the loop's next turn, so
    // a slow stream's client sees the head at once. Not sooner: when llhttp refuses the bytes just
    // after the head (a malformed first chunk), undici fails the exchange as the socket's handle
    // closes, which is after this turn's immediates; the client then gets a 502, not a cut head.
    setImmediate(() =>
      setImmediate(() => {
        if (!this.done && !this.headWritten && this.writeHead()) this.res.flushHeaders();
      }),
    );
    return true;
  }

  /** Writes the pending head to the client; false (the exchange aborted) when node refuses it. */
  private writeHead(): boolean {
    if (this.headWritten) return true;
    const { status, statusText, headers } = this.pending!;
    const res = this.res;
    if (res.destroyed) return false;
    res.sendDate = false; // the upstream's Date (if any) is forwarded as it is
    try {
      res.writeHead(status, statusText, headers as unknown as http.OutgoingHttpHeaders);
    } catch (error) {
      // A head node will not write back: a failure, not a crash.
      this.abort?.(new UpstreamError(FAILED_REASON, `unforwardable response head: ${(error as Error).message}`, true));
      return false;
    }
    res.strictContentLength = true;
    this.headWritten = true;
    return true;
  }

  onData(chunk: Buffer): boolean {
    this.idle?.refresh();
    if (!this.writeHead()) return false;
    this.bytesSent += chunk.length;
    if (this.res.write(chunk)) return true;
    this.res.once("drain", () => this.resume?.());
    return false;
  }

  onComplete(): void {
    this.done = true;
    clearTimeout(this.idle);
    if (this.answered) return;
    if (this.writeHead()) this.res.end();
  }

  onError(error: Error): void {
    this.done = true;
    clearTimeout(this.idle);
    if (this.answered) return;
    const { req, res, upstream } = this;
    if (
      !this.headWritten &&
      this.attempt === 1 &&
      this.body.kind === "none" &&
      mayRetry(this.method) &&
      isStaleConnection(error) &&
      !res.destroyed
    ) {
      // A kept-alive connection the upstream closed just as the request went: once more on a new one.
      this.forwarder.dispatch(req, res, upstream, this.path, this.body, this.attempt + 1);
      return;
    }
    const { error: reason, detail, refused } = describe(error);
    const fields = { ...upstream.label, method: this.method, path: this.path };
    if (this.headWritten) {
      if (reason === IDLE_REASON)
        this.forwarder.log("upstream-idle-timeout", {
          ...fields,
          bytesSent: this.bytesSent,
          idleTimeoutMs: this.idleTimeoutMs,
        });
      else if (refused)
        this.forwarder.log("upstream-refused", { ...fields, bytesSent: this.bytesSent, reason: detail });
      else if (!res.destroyed)
        this.forwarder.log("upstream-error", { ...fields, bytesSent: this.bytesSent, error: error.message });
      res.destroy();
      return;
    }
    if (res.destroyed) return;
    if (refused) this.forwarder.log("upstream-refused", { ...fields, error: reason, reason: detail });
    else this.forwarder.log("upstream-failed", { ...fields, error: reason, detail });
    replyJson(res, 502, { error: reason, ...upstream.label, detail });
  }
}

export class Forwarder {
  /** Kept-alive upstream connections per origin (the gateway talks to few upstreams, often). */
  private readonly pools = new Map<string, Dispatcher>();
  private readonly dispatcherFor: DispatcherFor;
  readonly log: Logger;

  constructor(private readonly options: ForwarderOptions) {
    this.log = options.log;
    this.dispatcherFor = options.dispatcherFor ?? ((origin) => upstreamPool(origin, options.connectTimeoutMs));
  }

  private pool(url: URL): Dispatcher {
    const origin = `http://${url.host}`;
    let pool = this.pools.get(origin);
    if (!pool) {
      pool = this.dispatcherFor(origin);
      this.pools.set(origin, pool);
    }
    return pool;
  }

  /** The connect timeout for an upgrade's own connection (an upgraded connection has no idle timeout). */
  private guardConnect(upstreamReq: http.ClientRequest): void {
    upstreamReq.once("socket", (socket) => {
      if (!socket.connecting) return;
      const timer = setTimeout(
        () =>
          upstreamReq.destroy(
            new UpstreamError(CONNECT_TIMEOUT_REASON, `no connection after ${this.options.connectTimeoutMs} ms`),
          ),
        this.options.connectTimeoutMs,
      );
      socket.once("connect", () => clearTimeout(timer));
      socket.once("close", () => clearTimeout(timer));
    });
  }

  /**
   * Forwards `req` to `upstream` at `rest` (path and query, as received) and streams the answer back.
   * A bodiless request of a safe method whose kept-alive connection turns out closed by the
   * upstream (it timed the connection out just as the request went) is sent once more; no other is.
   */
  forward(req: IncomingMessage, res: ServerResponse, upstream: Upstream, rest: string): void {
    this.dispatch(req, res, upstream, upstreamPath(upstream, rest), requestBody(req), 1);
  }

  /** @internal one attempt of `forward`. */
  dispatch(
    req: IncomingMessage,
    res: ServerResponse,
    upstream: Upstream,
    path: string,
    body: BodyFraming,
    attempt: number,
  ): void {
    const method = req.method ?? "GET";
    const headers = upstreamRequestHeaders(req, {
      upgrade: false,
      credentials: this.options.credentials,
      host: upstream.host,
      authorization: upstream.authorization,
    });
    // The body is framed again: its length as llhttp read it; else undici chunks it (or, when all of it is in already,
    // sends its length).
    if (body.kind === "length") headers.push("Content-Length", String(body.length));
    const exchange = new Exchange(this, req, res, upstream, method, path, body, attempt, this.options.idleTimeoutMs);
    res.once("close", () => res.writableFinished || exchange.cancel());
    if (body.kind === "none") req.resume();
    this.pool(upstream.url).dispatch(
      {
        method: method as Dispatcher.HttpMethod,
        path,
        headers,
        body: body.kind === "none" ? null : new RequestBody(req),
      },
      exchange,
    );
  }

  /** Forwards an upgrade request (WebSocket) and, once the upstream switches protocols, pipes the two sockets. */
  upgrade(req: IncomingMessage, socket: Duplex, head: Buffer, upstream: Upstream, rest: string): void {
    const path = upstreamPath(upstream, rest);
    const upstreamReq = http.request({
      host: upstream.url.hostname,
      port: upstream.url.port || 80,
      method: req.method,
      path,
      headers: upstreamRequestHeaders(req, {
        upgrade: true,
        credentials: this.options.credentials,
        host: upstream.host,
        authorization: upstream.authorization,
      }) as unknown as http.OutgoingHttpHeaders,
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
      socket.write(
        responseHead(
          101,
          upstreamRes.statusMessage ?? "Switching Protocols",
          clientResponseHeaders(upstreamRes.rawHeaders, true, upstream.replayEvidence === true),
        ),
        "latin1",
      );
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

    // The upstream answered without switching: relay that answer, delimited by closing the connection.
    upstreamReq.on("response", (upstreamRes) => {
      const problem = responseFramingProblem(upstreamRes.rawHeaders);
      if (problem !== undefined) {
        upstreamReq.destroy(new UpstreamError(FAILED_REASON, `answer refused: ${problem}`, true));
        return;
      }
      socket.write(
        responseHead(upstreamRes.statusCode ?? 502, upstreamRes.statusMessage ?? "", [
          ...clientResponseHeaders(upstreamRes.rawHeaders, false, upstream.replayEvidence === true),
          "Connection",
          "close",
        ]),
        "latin1",
      );
      upstreamRes.pipe(socket);
    });

    upstreamReq.on("error", (error) => {
      const { error: reason, detail, refused } = describe(error);
      this.options.log(refused ? "upstream-refused" : "upstream-failed", {
        ...upstream.label,
        method: req.method,
        path,
        upgrade: true,
        error: reason,
        detail,
      });
      replyJsonOnSocket(socket, 502, { error: reason, ...upstream.label, detail });
    });
    upstreamReq.end();
  }

  close(): void {
    for (const pool of this.pools.values()) void pool.destroy().catch(() => undefined);
  }
}
