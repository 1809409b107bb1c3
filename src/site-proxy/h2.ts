// HTTP/2 on the TLS the proxy terminates for a synthetic name (ALPN h2): one connection carries a whole page, where
// HTTP/1.1 gives a browser at most six to a host. Each stream is one request, checked here and sent on to the
// gateway over the same kept-alive HTTP/1.1 pool as a tunnel's HTTP/1.1 requests; the answer goes back on the stream.
// nghttp2 refuses what RFC 9113 calls malformed before a stream reaches the proxy (connection-specific headers such
// as Transfer-Encoding or Connection, unknown or repeated pseudo-headers, upper-case names, a Content-Length the
// body does not match): such a stream is reset and never sent on. A WebSocket comes as an extended CONNECT
// (RFC 8441, `:protocol websocket`) and goes to the gateway as the HTTP/1.1 upgrade it stands for (RFC 6455),
// its frames relayed as they are.
import * as crypto from "node:crypto";
import * as http from "node:http";
import * as http2 from "node:http2";
import type * as net from "node:net";
import { SITE_PROXY_HEADER, type SiteProxyVerdict } from "../protocol/site-proxy";
import {
  BrokenAnswer,
  type ComputerSide,
  type Destination,
  type ForwardHooks,
  type RequestSlots,
  headerText,
  sendOn,
  tappedAnswer,
  type UpgradeHooks,
  upgradeRequest,
} from "./forward";
import { responseFramingProblem } from "./framing";
import { endToEndHeaders, MAX_HEADER_BYTES, withoutHeader } from "./messages";
import { relay } from "./relay";

/** What the proxy's HTTP/2 sessions announce and accept. */
export const H2_SERVER_OPTIONS: http2.ServerOptions = {
  settings: {
    enablePush: false,
    // Extended CONNECT (RFC 8441): a browser opens its WebSockets on the page's own connection.
    enableConnectProtocol: true,
    // A page's subresources in flight at once; more streams wait for a slot (RFC 9113 5.1.2).
    maxConcurrentStreams: 128,
    maxHeaderListSize: MAX_HEADER_BYTES,
  },
  // The same bound as an HTTP/1.1 head: its size (above), and as many header lines as 64 KiB allows.
  maxHeaderListPairs: 2_048,
};

/** RFC 9113 7: the error codes of RST_STREAM and GOAWAY, by their value. */
const H2_ERROR_NAMES = [
  "NO_ERROR",
  "PROTOCOL_ERROR",
  "INTERNAL_ERROR",
  "FLOW_CONTROL_ERROR",
  "SETTINGS_TIMEOUT",
  "STREAM_CLOSED",
  "FRAME_SIZE_ERROR",
  "REFUSED_STREAM",
  "CANCEL",
  "COMPRESSION_ERROR",
  "CONNECT_ERROR",
  "ENHANCE_YOUR_CALM",
  "INADEQUATE_SECURITY",
  "HTTP_1_1_REQUIRED",
];

/**
 * How a stream that went away ended, for its log line: reset, with the code (nghttp2 resets with PROTOCOL_ERROR a
 * stream whose body ends short of its Content-Length), or closed with its connection.
 */
function streamEnd(stream: http2.ServerHttp2Stream): string {
  const code = stream.rstCode;
  if (code === undefined || code === http2.constants.NGHTTP2_NO_ERROR) return "connection closed";
  return `stream reset (${H2_ERROR_NAMES[code] ?? code})`;
}

/** One stream's request as the proxy reads it. */
export interface H2Request {
  method: string;
  /** `:protocol` of an extended CONNECT. */
  protocol: string | undefined;
  scheme: string | undefined;
  /** `:authority`, or the Host header when a client sent that instead (RFC 9113 8.3.1). */
  authority: string | undefined;
  /** The Host header, when one came beside `:authority`. */
  hostHeader: string | undefined;
  path: string | undefined;
  /** The request's headers as HTTP/1.1 lines: no pseudo-headers, no Host or Content-Length, cookies as one line. */
  headers: string[];
  contentLength: string | undefined;
  /** The HEADERS frame ended the stream: no body follows. */
  bodyless: boolean;
  /** The request's headers as received (pseudo-headers left out), for the request log. */
  received: string[];
}

/** Reads a stream's request from its header block (`rawHeaders` as received, in order). */
export function readH2Request(headers: http2.IncomingHttpHeaders, rawHeaders: string[], flags: number): H2Request {
  const kept: string[] = [];
  const cookies: string[] = [];
  const received: string[] = [];
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i];
    if (name.startsWith(":")) continue;
    received.push(name, rawHeaders[i + 1]);
    // HTTP/2 may split a Cookie into many fields; an HTTP/1.1 hop gets them as one (RFC 9113 8.2.3).
    if (name === "cookie") cookies.push(rawHeaders[i + 1]);
    else if (name !== "host" && name !== "content-length") kept.push(name, rawHeaders[i + 1]);
  }
  if (cookies.length > 0) kept.push("cookie", cookies.join("; "));
  const first = (value: string | string[] | undefined) => (Array.isArray(value) ? value[0] : value);
  const authority = first(headers[":authority"]);
  const host = first(headers.host);
  return {
    method: String(first(headers[":method"])),
    protocol: first(headers[":protocol"]),
    scheme: first(headers[":scheme"]),
    authority: authority ?? host,
    hostHeader: authority !== undefined ? host : undefined,
    path: first(headers[":path"]),
    headers: endToEndHeaders(kept),
    contentLength: first(headers["content-length"]),
    bodyless: (flags & http2.constants.NGHTTP2_FLAG_END_STREAM) !== 0,
    received,
  };
}

/** An HTTP/1.1 answer's head as HTTP/2 headers: names in lower case, repeated ones as lists. */
function h2ResponseHeaders(answer: http.IncomingMessage): http2.OutgoingHttpHeaders {
  const out: Record<string, string | string[]> = Object.create(null);
  out[":status"] = String(answer.statusCode ?? 502);
  const raw = endToEndHeaders(answer.rawHeaders);
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i].toLowerCase();
    const value = raw[i + 1];
    const seen = out[name];
    if (seen === undefined) out[name] = value;
    else if (Array.isArray(seen)) seen.push(value);
    else out[name] = [seen, value];
  }
  return out;
}

/** The proxy's own answer on a stream, marked with its verdict. */
export function answerStream(
  stream: http2.ServerHttp2Stream,
  status: number,
  verdict: SiteProxyVerdict | null,
  message: string,
): void {
  if (stream.destroyed || stream.closed) return;
  if (stream.headersSent) return void stream.close(http2.constants.NGHTTP2_INTERNAL_ERROR);
  const body = message + "\n";
  stream.respond({
    ":status": status,
    ...(verdict ? { [SITE_PROXY_HEADER.toLowerCase()]: verdict } : {}),
    "content-type": "text/plain; charset=utf-8",
    "content-length": Buffer.byteLength(body),
  });
  stream.end(body);
}

/**
 * Sends the stream's request on (see sendOn) and its answer back on the stream, as `forward` does for an HTTP/1.1
 * request: the body framed again (its length, or chunked).
 */
export function forwardStream(
  stream: http2.ServerHttp2Stream,
  request: H2Request,
  agent: http.Agent,
  destination: Destination,
  hooks: ForwardHooks,
  slots?: RequestSlots,
): void {
  const framing =
    request.contentLength !== undefined
      ? ["Content-Length", request.contentLength]
      : request.bodyless
        ? []
        : ["Transfer-Encoding", "chunked"];
  const computer: ComputerSide = {
    method: request.method,
    framing,
    bodyless: request.bodyless,
    body: stream,
    answer: stream,
    headersSent: () => stream.headersSent,
    gone: () => stream.destroyed || stream.closed,
    endedBy: () => streamEnd(stream),
    respond: (answer) => stream.respond(h2ResponseHeaders(answer)),
    abort: () => stream.close(http2.constants.NGHTTP2_INTERNAL_ERROR),
  };
  sendOn(computer, agent, destination, hooks, slots);
}

/** RFC 6455 4.2.2: what a server's Sec-WebSocket-Accept must be for `key`. */
function websocketAccept(key: string): string {
  return crypto
    .createHash("sha1")
    .update(key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11")
    .digest("base64");
}

/**
 * A WebSocket opened by extended CONNECT: sent to `destination` as an HTTP/1.1 upgrade on a fresh connection, with
 * a key of the proxy's own (an HTTP/2 client sends none). A 101 whose Sec-WebSocket-Accept matches is answered 200,
 * with the subprotocol and extensions the destination chose, and the stream and the connection are relayed; any
 * other answer is passed on, and the stream ends with it.
 */
export function forwardWebSocket(
  stream: http2.ServerHttp2Stream,
  destination: Destination,
  idleTimeoutMs: number,
  hooks: UpgradeHooks,
): void {
  const key = crypto.randomBytes(16).toString("base64");
  const headers = [
    ...withoutHeader(destination.headers, "sec-websocket-key"),
    "Connection",
    "Upgrade",
    "Upgrade",
    "websocket",
    "Sec-WebSocket-Key",
    key,
  ];
  let settled = false;
  const fail = (err: Error) => {
    if (settled) return void stream.close(http2.constants.NGHTTP2_INTERNAL_ERROR);
    settled = true;
    hooks.failed(err);
  };
  const upstream = upgradeRequest(destination, "GET", headers, hooks);
  if (upstream === undefined) return;
  const tap = hooks.tap;
  tap?.requestEnd();
  let answeredUpgrade = false;
  stream.once("close", () => {
    if (!settled) {
      settled = true;
      hooks.abandoned(streamEnd(stream));
    }
    tap?.finish(answeredUpgrade ? "upgrade closed" : streamEnd(stream));
    upstream.destroy();
  });
  upstream.on("upgrade", (answer, socket: net.Socket, head: Buffer) => {
    if (answer.headers["sec-websocket-accept"] !== websocketAccept(key)) {
      socket.destroy();
      return fail(
        new BrokenAnswer("the answer is malformed: a 101 without the Sec-WebSocket-Accept its key calls for"),
      );
    }
    if (stream.destroyed) return void socket.destroy();
    const chosen: http2.OutgoingHttpHeaders = { ":status": 200 };
    for (const name of ["sec-websocket-protocol", "sec-websocket-extensions"])
      if (answer.headers[name] !== undefined) chosen[name] = answer.headers[name];
    try {
      stream.respond(chosen);
    } catch (err) {
      socket.destroy();
      return fail(new BrokenAnswer(`the answer cannot be passed on: ${(err as Error).message}`));
    }
    settled = true;
    answeredUpgrade = true;
    tap?.response(tappedAnswer(answer));
    tap?.webSocket?.(stream, socket, Buffer.alloc(0), head, headerText(chosen["sec-websocket-extensions"] as string));
    hooks.answered(101);
    // The exchange is over once the destination's connection is: a browser may hold its side of the stream open
    // after the closing handshake (the relay keeps half-closes), and the entry would wait for the idle timeout.
    socket.once("close", () => tap?.finish("upgrade closed"));
    if (head.length > 0) stream.write(head);
    relay(stream as never, socket, idleTimeoutMs);
  });
  upstream.on("response", (answer) => {
    const problem = responseFramingProblem(answer);
    if (problem) {
      answer.socket.destroy();
      return fail(new BrokenAnswer(`the answer is malformed: ${problem}`));
    }
    try {
      stream.respond(h2ResponseHeaders(answer));
    } catch (err) {
      answer.socket.destroy();
      return fail(new BrokenAnswer(`the answer cannot be passed on: ${(err as Error).message}`));
    }
    settled = true;
    hooks.answered(answer.statusCode ?? 502, answer.headers);
    if (tap) {
      tap.response(tappedAnswer(answer));
      answer.on("data", (chunk: Buffer) => tap.responseChunk(chunk));
      answer.once("end", () => tap.finish("complete"));
    }
    answer.pipe(stream);
    answer.on("error", () => stream.close(http2.constants.NGHTTP2_INTERNAL_ERROR));
  });
  upstream.on("error", fail);
  upstream.end();
}
