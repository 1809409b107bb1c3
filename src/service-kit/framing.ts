// How a message crossing the gateway is framed (RFC 9112 section 6), in one place for both
// directions. Bytes are parsed by llhttp (node's server parser for requests, undici's for
// answers), which already refuses what it cannot frame exactly: both Transfer-Encoding and
// Content-Length, a repeated or malformed Content-Length, a request Transfer-Encoding whose
// last coding is not chunked, obs-fold in a request, bare LF or CR line endings. The rules
// here refuse what llhttp lets through but the gateway must not forward, and say how a body
// is framed again on the next hop: the gateway never forwards a framing header as received,
// it writes its own from what the parser read.
import type { IncomingMessage } from "node:http";

/** How a body is delimited on the wire. */
export type BodyFraming = { kind: "none" } | { kind: "length"; length: number } | { kind: "chunked" };

/** Why a request is answered by the gateway itself instead of being forwarded. */
export interface Refusal {
  status: number;
  /** The answer's `error` field. */
  error: string;
  /** The log line's `reason`: which rule refused it. */
  reason: string;
}

/** uri-host [ ":" port ] (RFC 9110 section 7.2): a reg-name, IPv4 or bracketed IP literal. */
const HOST_VALUE = /^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9\-._~!$&'()*+,;=%]*)(?::\d*)?$/;

function values(raw: string[], lower: string): string[] {
  const out: string[] = [];
  for (let i = 0; i < raw.length; i += 2)
    if (raw[i].length === lower.length && raw[i].toLowerCase() === lower) out.push(raw[i + 1]);
  return out;
}

const refusal = (status: number, reason: string): Refusal => ({
  status,
  error: status === 501 ? "not implemented" : "bad request",
  reason,
});

/** The body of a request as llhttp framed it (it has already refused every ambiguous form). */
export function requestBody(req: IncomingMessage): BodyFraming {
  if (req.headers["transfer-encoding"] !== undefined) return { kind: "chunked" };
  const length = req.headers["content-length"];
  return length === undefined || length === "0" ? { kind: "none" } : { kind: "length", length: Number(length) };
}

/** Why the gateway refuses `req` before routing it, or undefined. */
export function requestRefusal(req: IncomingMessage, upgrade: boolean): Refusal | undefined {
  const raw = req.rawHeaders;
  // RFC 9112 section 3.2: one Host, of valid syntax. A site routes on it, so two must never reach one.
  const hosts = values(raw, "host");
  if (hosts.length === 0 && req.httpVersion === "1.1") return refusal(400, "no Host header");
  if (hosts.length > 1) return refusal(400, "more than one Host header");
  if (hosts.length === 1 && !HOST_VALUE.test(hosts[0])) return refusal(400, "malformed Host header");
  const codings = values(raw, "transfer-encoding");
  if (codings.length > 0) {
    // RFC 9112 section 6.1: Transfer-Encoding in HTTP/1.0 means the framing is faulty.
    if (req.httpVersion !== "1.1") return refusal(400, `Transfer-Encoding in an HTTP/${req.httpVersion} request`);
    const list = codings
      .join(",")
      .toLowerCase()
      .split(",")
      .map((coding) => coding.trim());
    // RFC 9112 section 6.3: the body's length cannot be known.
    if (list.at(-1) !== "chunked") return refusal(400, "a last transfer coding other than chunked");
    // RFC 9112 section 6.1: a coding the gateway does not apply (it would be dropped, and the site read coded bytes as
    // the body).
    if (list.length > 1) return refusal(501, "a transfer coding other than chunked");
  }
  // An upgraded connection is a byte pipe from its first byte after the head: a body would go
  // there unframed, so an upgrade request carries none.
  if (upgrade && requestBody(req).kind !== "none") return refusal(400, "a body on an upgrade request");
  return undefined;
}

/**
 * Why an upstream's final answer head cannot be forwarded, or undefined. llhttp refuses most
 * of these itself; the rules are checked again here so they hold whatever the parser lets by.
 */
export function responseFramingProblem(raw: string[]): string | undefined {
  const lengths = values(raw, "content-length");
  const codings = values(raw, "transfer-encoding");
  if (lengths.length > 1) return "repeated Content-Length";
  if (lengths.length === 1 && !/^\d{1,15}$/.test(lengths[0])) return "malformed Content-Length";
  if (codings.length > 0 && lengths.length > 0) return "both Transfer-Encoding and Content-Length";
  // Anything but plain chunked would reach the client decoded of its chunks yet still coded, without saying so.
  if (codings.length > 0 && codings.join(",").trim().toLowerCase() !== "chunked")
    return "a transfer coding other than chunked";
  return undefined;
}

/** The one Content-Length of an answer head that passed `responseFramingProblem`. */
export function responseContentLength(raw: string[]): string | undefined {
  return values(raw, "content-length")[0];
}

/** Whether an answer to `method` with `status` has a body at all (RFC 9112 section 6.3, rules 1 and 2). */
export function responseHasBody(method: string, status: number): boolean {
  return method !== "HEAD" && status >= 200 && status !== 204 && status !== 304;
}

/**
 * Whether a request may be sent again after its connection failed: only a safe method (RFC 9110
 * section 9.2.1), a subset of the idempotent ones. A PUT or DELETE is idempotent in theory, but
 * a site's effects are what an env records, so it is never sent twice.
 */
export function mayRetry(method: string): boolean {
  return method === "GET" || method === "HEAD" || method === "OPTIONS" || method === "TRACE";
}
