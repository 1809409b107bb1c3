// Which headers cross the gateway, per RFC 9110 section 7.6.1: hop-by-hop headers (and
// every header the Connection header names) stay on their hop; everything else is
// forwarded as received, repeats and byte values included. Headers are handled as node's
// raw arrays ([name, value, name, value, ...]) so a repeated header is never folded and
// a value's bytes (node reads them as latin1) are written back unchanged.
//
// Framing headers (Content-Length, Transfer-Encoding) are never forwarded as received: the
// caller frames each message again from what the parser read (framing.ts). So a Connection
// header nominating one of them changes nothing, and it cannot nominate Host away either.
import type { IncomingMessage } from "node:http";
import { CONTROL_TOKEN_HEADER } from "../protocol/auth";
import { CONNECTION_SPECIFIC_HEADERS } from "../protocol/hop-by-hop";
import { REPLAY_NEAREST_HEADER } from "../protocol/replay-server-config";
import type { CredentialReader } from "./credentials";

/** Evidence only a replay server may give (see `Upstream.replayEvidence`). */
const REPLAY_EVIDENCE = REPLAY_NEAREST_HEADER.toLowerCase();

/** Written by the gateway itself on each hop, whatever the message said. */
const FRAMING = new Set(["content-length", "transfer-encoding"]);
/** What a Connection header may not remove: the message's target. */
const NEVER_NOMINATED = new Set(["host"]);

/** The gateway's own credential header: read by the gateway (access.ts), never sent on. */
const OWN_CREDENTIAL = CONTROL_TOKEN_HEADER.toLowerCase();

/** What a message without a Connection header nominates. */
const NONE: ReadonlySet<string> = new Set();

/** The names of a raw header array in lower case (`lower[i / 2]` for `raw[i]`), once per message. */
function lowerNames(raw: string[]): string[] {
  const lower = new Array<string>(raw.length / 2);
  for (let i = 0; i < raw.length; i += 2) lower[i / 2] = raw[i].toLowerCase();
  return lower;
}

/** Lowercased names listed by the message's Connection headers. */
function connectionTokens(raw: string[], lower: string[]): ReadonlySet<string> {
  let tokens: Set<string> | undefined;
  for (let i = 0; i < raw.length; i += 2) {
    if (lower[i / 2] !== "connection") continue;
    for (const token of raw[i + 1].split(",")) {
      const name = token.trim().toLowerCase();
      if (name && !NEVER_NOMINATED.has(name)) (tokens ??= new Set()).add(name);
    }
  }
  return tokens ?? NONE;
}

function isHopByHop(lower: string, named: ReadonlySet<string>): boolean {
  return CONNECTION_SPECIFIC_HEADERS.has(lower) || FRAMING.has(lower) || lower.startsWith("proxy-") || named.has(lower);
}

export interface ForwardOptions {
  /** An upgrade (WebSocket) keeps `Connection: Upgrade` and its `Upgrade` header. */
  upgrade: boolean;
  /**
   * The request's credentials as read once (credentials.ts): every credential of an Authorization header that carries
   * the control token or a computer's token, in any form, is removed; any other is kept.
   */
  credentials: CredentialReader;
  /** Sent as Host instead of the client's (Chrome's DevTools endpoint answers only `localhost`). */
  host?: string;
  /** The gateway's own credential for this upstream: sent instead of any Authorization the client sent. */
  authorization?: string;
}

/** The raw headers to send upstream for `req`, X-Forwarded-* included, framing headers left to the caller. */
export function upstreamRequestHeaders(req: IncomingMessage, options: ForwardOptions): string[] {
  const raw = req.rawHeaders;
  const lowers = lowerNames(raw);
  const named = connectionTokens(raw, lowers);
  const out: string[] = [];
  let forwardedFor: string | undefined;
  let forwardedHost: string | undefined;
  let forwardedProto: string | undefined;
  let host: string | undefined;
  let upgrade: string | undefined;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i];
    const value = raw[i + 1];
    const lower = lowers[i / 2];
    switch (lower) {
      case "host":
        host ??= value;
        if (options.host === undefined) out.push(name, value);
        continue;
      case "authorization": {
        if (options.authorization !== undefined) continue;
        const kept = options.credentials.read(req).forwarded(i);
        if (kept !== undefined) out.push(name, kept);
        continue;
      }
      case OWN_CREDENTIAL:
        continue;
      case "expect":
        // node's server already answered `100 Continue` to the client; the body follows regardless.
        continue;
      case "x-forwarded-for":
        forwardedFor = forwardedFor === undefined ? value : `${forwardedFor}, ${value}`;
        continue;
      case "x-forwarded-host":
        forwardedHost ??= value;
        continue;
      case "x-forwarded-proto":
        forwardedProto ??= value;
        continue;
      case "upgrade":
        upgrade ??= value;
        continue;
    }
    if (isHopByHop(lower, named)) continue;
    out.push(name, value);
  }
  if (options.host !== undefined) out.push("Host", options.host);
  if (options.authorization !== undefined) out.push("Authorization", options.authorization);
  const client = req.socket.remoteAddress ?? "unknown";
  out.push("X-Forwarded-For", forwardedFor === undefined ? client : `${forwardedFor}, ${client}`);
  // A site proxy in front of the gateway (which terminated TLS for a synthetic name) says
  // what the browser asked for; keep its word, else say what reached the gateway.
  const clientHost = forwardedHost ?? host;
  if (clientHost !== undefined) out.push("X-Forwarded-Host", clientHost);
  out.push("X-Forwarded-Proto", forwardedProto ?? "http");
  if (options.upgrade && upgrade !== undefined) out.push("Connection", "Upgrade", "Upgrade", upgrade);
  return out;
}

/**
 * The raw headers of an upstream response to send to the client, framing headers left to the caller; the replay
 * evidence header only when `replayEvidence` (the upstream is a replay server).
 */
export function clientResponseHeaders(raw: string[], upgrade = false, replayEvidence = false): string[] {
  const lowers = lowerNames(raw);
  const named = connectionTokens(raw, lowers);
  const out: string[] = [];
  for (let i = 0; i < raw.length; i += 2) {
    const lower = lowers[i / 2];
    if (upgrade && (lower === "connection" || lower === "upgrade")) {
      out.push(raw[i], raw[i + 1]);
      continue;
    }
    if (isHopByHop(lower, named)) continue;
    if (lower === REPLAY_EVIDENCE && !replayEvidence) continue;
    out.push(raw[i], raw[i + 1]);
  }
  return out;
}

/** A raw HTTP/1.1 response head (for sockets taken over by an upgrade). */
export function responseHead(status: number, statusMessage: string, raw: string[]): string {
  let head = `HTTP/1.1 ${status} ${statusMessage}\r\n`;
  for (let i = 0; i < raw.length; i += 2) head += `${raw[i]}: ${raw[i + 1]}\r\n`;
  return head + "\r\n";
}
