// The HTTP messages the proxy reads and writes itself: request targets, hop-by-hop headers, and the answers it
// gives in its own name (each marked with X-Agentenv-Site-Proxy).
import type * as http from "node:http";
import type * as net from "node:net";
import { type SecretTokens, withoutTokens } from "../protocol/auth";
import { CONNECTION_SPECIFIC_HEADERS } from "../protocol/hop-by-hop";
import { SITE_PROXY_HEADER, type SiteProxyVerdict } from "../protocol/site-proxy";
import { normalizeHost } from "./connect";

/** Requests whose headers are larger than this are answered 400 (node's default limit is 16 KiB). */
export const MAX_HEADER_BYTES = 64 * 1024;

/** Headers that belong to one hop, plus the proxy-only ones; never sent on. */
const HOP_BY_HOP: ReadonlySet<string> = new Set([
  ...CONNECTION_SPECIFIC_HEADERS,
  "proxy-authorization",
  "proxy-authenticate",
]);

/**
 * Headers a `Connection` header may not remove: they frame the message or name its host, and the proxy decides them
 * itself from what it parsed (a nominated Content-Length left out would send a body on unframed).
 */
const NEVER_NOMINATED = new Set(["content-length", "host"]);

const STATUS_TEXT: Record<number, string> = {
  400: "Bad Request",
  401: "Unauthorized",
  403: "Forbidden",
  404: "Not Found",
  405: "Method Not Allowed",
  502: "Bad Gateway",
};

function rawAnswer(
  status: number,
  verdict: SiteProxyVerdict | null,
  message: string,
  headers: Record<string, string>,
): string {
  const body = message + "\n";
  let head = `HTTP/1.1 ${status} ${STATUS_TEXT[status]}\r\n`;
  if (verdict) head += `${SITE_PROXY_HEADER}: ${verdict}\r\n`;
  for (const [name, value] of Object.entries(headers)) head += `${name}: ${value}\r\n`;
  return `${head}Content-Type: text/plain; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`;
}

/**
 * Answers on a raw socket (CONNECT, an upgrade, or a request node could not parse) and closes it. `verdict` marks
 * the forward proxy's own answers; the control listener's carry none.
 */
export function answerSocket(
  socket: net.Socket,
  status: number,
  verdict: SiteProxyVerdict | null,
  message: string,
  headers: Record<string, string> = {},
): void {
  if (socket.writable) socket.end(rawAnswer(status, verdict, message, headers));
  else socket.destroy();
}

/**
 * Options of the proxy's HTTP servers: large heads allowed, a head that does not arrive within `headTimeoutMs`
 * of its start dropped (node checks about every second), a body given all the time it takes, and a kept-alive
 * connection waiting `idleTimeoutMs` for its next request.
 */
export function serverOptions(headTimeoutMs: number, idleTimeoutMs: number): http.ServerOptions {
  return {
    maxHeaderSize: MAX_HEADER_BYTES,
    requireHostHeader: false,
    requestTimeout: 0,
    headersTimeout: headTimeoutMs,
    connectionsCheckingInterval: Math.min(1_000, headTimeoutMs),
    keepAliveTimeout: idleTimeoutMs,
  };
}

/** Answers on a parsed request; `close` ends the connection after the answer (its framing is not to be trusted). */
export function answerResponse(
  res: http.ServerResponse,
  status: number,
  verdict: SiteProxyVerdict | null,
  message: string,
  close = false,
): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const body = message + "\n";
  res.writeHead(status, {
    ...(verdict ? { [SITE_PROXY_HEADER]: verdict } : {}),
    "Content-Type": "text/plain; charset=utf-8",
    "Content-Length": Buffer.byteLength(body),
    ...(close ? { Connection: "close" } : {}),
  });
  res.end(body);
}

/** `host:port` as a Host header or a log names it: IPv6 in brackets, the port left out when it is the default. */
export function formatAuthority(host: string, port: number, defaultPort = 80): string {
  const bracketed = host.includes(":") ? `[${host}]` : host;
  return port === defaultPort ? bracketed : `${bracketed}:${port}`;
}

/** The values of every `name` header line of a message, in order. */
export function headerValues(rawHeaders: string[], name: string): string[] {
  const values: string[] = [];
  for (let i = 0; i < rawHeaders.length; i += 2)
    if (rawHeaders[i].toLowerCase() === name) values.push(rawHeaders[i + 1]);
  return values;
}

/**
 * The end-to-end headers of a message as sent (repeats and order kept), without the hop-by-hop ones and those its
 * `Connection` header nominates (never Content-Length or Host: see NEVER_NOMINATED), and without the names in
 * `without` (lower case), every Authorization credential that carries one of `secrets` removed: one pass over the
 * headers, as this runs for every request and answer.
 */
export function endToEndHeaders(rawHeaders: string[], without?: ReadonlySet<string>, secrets?: SecretTokens): string[] {
  const lower = new Array<string>(rawHeaders.length / 2);
  let named: Set<string> | undefined;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = (lower[i / 2] = rawHeaders[i].toLowerCase());
    if (name !== "connection") continue;
    for (const token of rawHeaders[i + 1].split(",")) {
      const nominated = token.trim().toLowerCase();
      if (!NEVER_NOMINATED.has(nominated)) (named ??= new Set()).add(nominated);
    }
  }
  const kept: string[] = [];
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = lower[i / 2];
    if (HOP_BY_HOP.has(name) || named?.has(name) || without?.has(name)) continue;
    if (secrets !== undefined && name === "authorization") {
      const value = withoutTokens(rawHeaders[i + 1], secrets);
      if (value !== undefined) kept.push(rawHeaders[i], value);
      continue;
    }
    kept.push(rawHeaders[i], rawHeaders[i + 1]);
  }
  return kept;
}

export function withoutHeader(headers: string[], name: string): string[] {
  const kept: string[] = [];
  for (let i = 0; i < headers.length; i += 2)
    if (headers[i].toLowerCase() !== name) kept.push(headers[i], headers[i + 1]);
  return kept;
}

/** `host:port` of a CONNECT request, the host possibly a bracketed IPv6 address; undefined without a valid port. */
export function parseAuthority(authority: string, defaultPort?: number): { host: string; port: number } | undefined {
  const match = /^(\[[^\]]+\]|[^:]*)(?::(\d*))?$/.exec(authority);
  if (!match || match[1] === "") return undefined;
  const host = normalizeHost(match[1]);
  if (match[2] === undefined || match[2] === "")
    return defaultPort === undefined ? undefined : { host, port: defaultPort };
  const port = Number(match[2]);
  if (!Number.isInteger(port) || port < 1 || port > 65535) return undefined;
  return { host, port };
}

/** The parts of an absolute-form `http://` request target; the path kept exactly as sent. */
export function parseAbsoluteForm(
  url: string,
): { authority: string; host: string; port: number; path: string } | undefined {
  const match = /^http:\/\/([^/?#]*)([^#]*)/i.exec(url);
  if (!match) return undefined;
  const authority = match[1].replace(/^.*@/, ""); // userinfo is never sent on
  const target = parseAuthority(authority, 80);
  if (!target) return undefined;
  const rest = match[2];
  const path = rest === "" ? "/" : rest.startsWith("?") ? `/${rest}` : rest;
  return { authority, ...target, path };
}
