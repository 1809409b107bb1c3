// HTTP/1.1 message framing at the proxy's hop (RFC 9112 section 6). Node's parser (llhttp, strict) reads every
// message and refuses most broken framing itself: Transfer-Encoding with Content-Length, repeated or malformed
// lengths, obs-fold, bare LF. What it accepts but a proxy must not pass on is refused here. A body that passes is
// never sent on as the bytes it came in: the proxy frames it again from what the parser read (the same length, or
// chunked), so nothing a computer hides in a body can become a message of its own on the next hop.
import type * as http from "node:http";
import { headerValues } from "./messages";

function transferEncodingProblem(message: http.IncomingMessage, side: "request" | "response"): string | undefined {
  const codings = headerValues(message.rawHeaders, "transfer-encoding");
  if (codings.length === 0) return undefined;
  // An HTTP/1.0 peer cannot mean chunked (RFC 9112 6.1): its framing is faulty whatever else it says.
  if (message.httpVersion === "1.0") return `Transfer-Encoding in an HTTP/1.0 ${side}`;
  // Chunked alone: the proxy re-frames bodies as chunked and would otherwise drop a coding the body still carries;
  // chunked applied twice, or a coding after it, leaves the length undecidable.
  if (codings.length > 1 || codings[0].trim().toLowerCase() !== "chunked")
    return `Transfer-Encoding must be chunked alone, got "${codings.join(", ")}"`;
  if (headerValues(message.rawHeaders, "content-length").length > 0) return "both Transfer-Encoding and Content-Length";
  return undefined;
}

function contentLengthProblem(message: http.IncomingMessage): string | undefined {
  const lengths = headerValues(message.rawHeaders, "content-length");
  if (lengths.length > 1) return "more than one Content-Length";
  if (lengths.length === 1 && !/^\d+$/.test(lengths[0].trim())) return `a malformed Content-Length "${lengths[0]}"`;
  return undefined;
}

/** Why a computer's request may not be forwarded as framed (answered 400, the connection closed), or undefined. */
export function requestFramingProblem(req: http.IncomingMessage): string | undefined {
  if (headerValues(req.rawHeaders, "host").length > 1) return "more than one Host header";
  return transferEncodingProblem(req, "request") ?? contentLengthProblem(req);
}

/** Why a host's answer may not be passed on (answered 502, its connection never reused), or undefined. */
export function responseFramingProblem(answer: http.IncomingMessage): string | undefined {
  return transferEncodingProblem(answer, "response") ?? contentLengthProblem(answer);
}

/** True when the request carries a body: a length (even 0) or chunked. */
export function hasBody(req: http.IncomingMessage): boolean {
  return req.headers["content-length"] !== undefined || req.headers["transfer-encoding"] !== undefined;
}

/**
 * The framing header the next hop gets for a request the proxy parsed: its length, chunked when it came chunked
 * (node's client then chunks what the parser decoded), none when it had no body.
 */
export function requestFraming(req: http.IncomingMessage): string[] {
  const length = req.headers["content-length"];
  if (length !== undefined) return ["Content-Length", length.trim()];
  if (req.headers["transfer-encoding"] !== undefined) return ["Transfer-Encoding", "chunked"];
  return [];
}

/**
 * Why an upgrade request may not be forwarded: broken framing, or a body (nothing may follow its head but the new
 * protocol).
 */
export function upgradeFramingProblem(req: http.IncomingMessage): string | undefined {
  return requestFramingProblem(req) ?? (hasBody(req) ? "an upgrade request with a body" : undefined);
}
