// Chromium binds DevTools to 127.0.0.1 only (it ignores --remote-debugging-address in headless mode), so the
// container's DevTools port is this relay to it, listening on the browser's address on its computer's network
// alone: the one peer there is the computer's site proxy, whose control listener requires a token. The relay
// outlives Chromium restarts; a request made while Chromium is down is answered 503, an upgrade closed at once.
//
// It reads each request's head, so that it can answer the launcher's own operations (`operations`, paths that are
// not DevTools', POST only) on the same port, reached the way DevTools is: through the gateway's
// `/computers/<name>/cdp` route. A connection the proxy keeps alive may carry both; every other request goes to
// DevTools unchanged, on a connection of its own, and an upgrade (DevTools' WebSocket) is a byte pipe from there on.
import http from "node:http";
import net from "node:net";
import type { Duplex } from "node:stream";

/** The launcher's operations by path: each answers JSON, or fails with an error whose message is the answer. */
export type RelayOperations = Record<string, () => Promise<unknown>>;

/** Longer than the site proxy's idle timeout on its connections to DevTools (300 s). */
const KEEP_ALIVE_MS = 15 * 60_000;

/** Hop-by-hop headers (RFC 9110 7.6.1): each hop's own, never passed on. */
const HOP_BY_HOP = new Set(["connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "upgrade"]);

/** `rawHeaders` without the hop-by-hop ones, and without those its Connection header names. */
function endToEnd(rawHeaders: string[]): string[] {
  const listed = new Set<string>();
  for (let i = 0; i < rawHeaders.length; i += 2)
    if (rawHeaders[i].toLowerCase() === "connection")
      for (const token of rawHeaders[i + 1].split(",")) listed.add(token.trim().toLowerCase());
  const out: string[] = [];
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i].toLowerCase();
    if (!HOP_BY_HOP.has(name) && !listed.has(name)) out.push(rawHeaders[i], rawHeaders[i + 1]);
  }
  return out;
}

function answerJson(res: http.ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) {
  res.writeHead(status, { "Content-Type": "application/json", ...headers });
  res.end(JSON.stringify(body) + "\n");
}

/** One of the launcher's operations: POST only, never from a page (which would send its Origin). */
function operate(req: http.IncomingMessage, res: http.ServerResponse, operation: () => Promise<unknown>): void {
  req.resume();
  if (req.method !== "POST") return answerJson(res, 405, { error: "method not allowed" }, { Allow: "POST" });
  if (req.headers.origin !== undefined) return answerJson(res, 403, { error: "a request with an Origin is refused" });
  operation().then(
    (result) => answerJson(res, 200, result),
    (error: unknown) => answerJson(res, 500, { error: error instanceof Error ? error.message : String(error) }),
  );
}

function toDevtools(req: http.IncomingMessage, res: http.ServerResponse, port: number): void {
  const upstream = http.request({
    host: "127.0.0.1",
    port,
    method: req.method,
    path: req.url,
    headers: [...endToEnd(req.rawHeaders), "Connection", "close"],
    agent: false,
  });
  upstream.on("response", (answer) => {
    res.writeHead(answer.statusCode ?? 502, answer.statusMessage, endToEnd(answer.rawHeaders));
    answer.pipe(res);
    answer.on("error", () => res.destroy());
  });
  upstream.on("error", () => (res.headersSent ? res.destroy() : res.writeHead(502).end()));
  res.on("close", () => upstream.destroy());
  req.pipe(upstream);
}

/** An upgrade's request head as it came, then the bytes both ways. */
function pipeUpgrade(req: http.IncomingMessage, client: Duplex, head: Buffer, port: number): void {
  const upstream = net.connect({ host: "127.0.0.1", port });
  const end = () => {
    client.destroy();
    upstream.destroy();
  };
  let lines = `${req.method} ${req.url} HTTP/${req.httpVersion}\r\n`;
  for (let i = 0; i < req.rawHeaders.length; i += 2) lines += `${req.rawHeaders[i]}: ${req.rawHeaders[i + 1]}\r\n`;
  upstream.write(lines + "\r\n");
  if (head.length > 0) upstream.write(head);
  client.pipe(upstream).pipe(client);
  for (const side of [client, upstream]) {
    side.on("error", end);
    side.on("close", end);
  }
}

/** `target` gives the running Chromium's DevTools port, or undefined while none runs. */
export function startDevtoolsRelay(
  listen: { host: string; port: number },
  target: () => number | undefined,
  operations: RelayOperations = {},
): Promise<http.Server> {
  const server = http.createServer({ requestTimeout: 0 }, (req, res) => {
    const path = (req.url ?? "/").split("?")[0];
    const operation = Object.hasOwn(operations, path) ? operations[path] : undefined;
    if (operation !== undefined) return operate(req, res, operation);
    const port = target();
    if (port === undefined) {
      req.resume();
      return answerJson(res, 503, { error: "the browser is starting" }, { Connection: "close" });
    }
    toDevtools(req, res, port);
  });
  server.on("upgrade", (req: http.IncomingMessage, socket: Duplex, head: Buffer) => {
    const port = target();
    if (port === undefined) return void socket.destroy();
    pipeUpgrade(req, socket, head, port);
  });
  // The site proxy's pool ends idle kept-alive connections, so the relay never closes one just as a request comes.
  server.keepAliveTimeout = KEEP_ALIVE_MS;
  server.on("clientError", (_error, socket) => socket.destroy());
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(listen.port, listen.host, () => resolve(server));
  });
}
