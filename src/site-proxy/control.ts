// The control listener, on the proxy's address on the link network (only the gateway is there): the log as JSON
// lines, the CA certificate, and the browser's DevTools under /cdp/ (HTTP and WebSocket upgrades), the one way to
// DevTools. Every request needs `Authorization: Bearer <the proxy's token>`, compared in constant time; anything
// else is a 401 and an error line.
import * as fs from "node:fs";
import * as http from "node:http";
import type * as net from "node:net";
import * as path from "node:path";
import { REQUEST_LOG_MEDIA_TYPE, requestLogFileName } from "../protocol/request-log";
import { SITE_PROXY_CONTROL_PATHS, type LogMark } from "../protocol/site-proxy";
import { carriesControlToken, WWW_AUTHENTICATE_CHALLENGE } from "../protocol/auth";
import type { Connector } from "./connect";
import { connectorAgent, type Destination, forward, forwardUpgrade } from "./forward";
import { requestFramingProblem, upgradeFramingProblem } from "./framing";
import type { OpenConnections } from "./connections";
import type { EventLog } from "./log";
import type { RequestRecorder } from "./recorder";
import { requestLogFiles } from "./rotating-file";
import { answerResponse, answerSocket, endToEndHeaders, serverOptions } from "./messages";

export interface ControlOptions {
  logPath: string;
  caCertPath: string;
  /** The token every request must carry. */
  token: string;
  /** The browser's DevTools relay. */
  cdp: { host: string; port: number };
  connector: Connector;
  log: EventLog;
  idleTimeoutMs: number;
  headTimeoutMs: number;
  /** The proxy's sockets, which POST /connections/end ends. */
  connections?: OpenConnections;
  /** The request log, when the proxy keeps one: its folder, and its recorder (flushed before a read). */
  requestLog?: { dir: string; recorder: RequestRecorder };
}

const {
  log: LOG_PATH,
  caCert: CA_PATH,
  cdp: CDP_PREFIX,
  endConnections: CONNECTIONS_END_PATH,
  requests: REQUESTS_PATH,
  person: PERSON_PATH,
} = SITE_PROXY_CONTROL_PATHS;
const UNAUTHORIZED = "this listener needs Authorization: Bearer <the computer's control token>";

/**
 * DevTools answers its HTTP endpoints only for a Host that is an address or `localhost` (its guard against DNS
 * rebinding), and builds the WebSocket URLs in its JSON from that Host: it is always sent `localhost`, whatever the
 * gateway's client named, and the gateway rewrites those URLs to its own.
 */
const DEVTOOLS_HOST = "localhost";
/** Headers the control port writes itself (or never passes on) on a request to DevTools. */
const WRITTEN_BY_THE_CONTROL_PORT: ReadonlySet<string> = new Set(["host", "authorization", "content-length"]);

/**
 * The bytes of a log of `size` bytes a Range header asks for (RFC 9110 14): `bytes=<from>-`, what was appended since a
 * reader's last look, or `bytes=-<n>`, its last n bytes. Undefined for no Range or any other form, which is answered
 * with the whole log (a server may ignore a Range); "unsatisfiable" when no byte of the log is in it (416).
 */
export function logRange(
  header: string | undefined,
  size: number,
): { start: number; end: number } | "unsatisfiable" | undefined {
  const match = /^bytes=(?:(\d{1,15})-|-(\d{1,15}))$/.exec(header?.trim() ?? "");
  if (match === null) return undefined;
  const start = match[1] !== undefined ? Number(match[1]) : size - Number(match[2]);
  if (match[2] !== undefined && Number(match[2]) === 0) return "unsatisfiable";
  if (start >= size) return "unsatisfiable";
  return { start: Math.max(0, start), end: size - 1 };
}

/** The mark `?episode=<n>` or `?selfTest=start|end` asks for: undefined without one, null for anything else. */
function logMarkParam(url: string): LogMark | undefined | null {
  const query = url.indexOf("?");
  const params = new URLSearchParams(query === -1 ? "" : url.slice(query + 1));
  const keys = [...new Set(params.keys())];
  if (keys.length === 0) return undefined;
  if (keys.length > 1 || params.getAll(keys[0]).length > 1) return null;
  const value = params.get(keys[0])!;
  if (keys[0] === "episode") return /^[1-9][0-9]{0,8}$/.test(value) ? { episode: Number(value) } : null;
  if (keys[0] === "selfTest") return value === "start" || value === "end" ? { selfTest: value } : null;
  return null;
}

/** The path under /cdp as DevTools knows it (`/cdp/json/version` -> `/json/version`), or undefined outside /cdp. */
function devtoolsPath(url: string): string | undefined {
  if (url !== CDP_PREFIX && !url.startsWith(`${CDP_PREFIX}/`) && !url.startsWith(`${CDP_PREFIX}?`)) return undefined;
  const rest = url.slice(CDP_PREFIX.length);
  return rest.startsWith("/") ? rest : `/${rest}`;
}

/** The proxy's log, whole or the byte range asked for (a reader following it, watch, asks for what was appended). */
function serveLog(req: http.IncomingMessage, res: http.ServerResponse, logPath: string): void {
  let size = 0;
  try {
    size = fs.statSync(logPath).size;
  } catch {
    // Not written yet: an empty log.
  }
  const range = logRange(req.headers.range, size);
  if (range === "unsatisfiable") return void res.writeHead(416, { "Content-Range": `bytes */${size}` }).end();
  const type = { "Content-Type": "application/x-ndjson", "Accept-Ranges": "bytes" };
  if (range === undefined) res.writeHead(200, type);
  else
    res.writeHead(206, {
      ...type,
      "Content-Range": `bytes ${range.start}-${range.end}/${size}`,
      "Content-Length": String(range.end - range.start + 1),
    });
  if (req.method === "HEAD") return void res.end();
  fs.createReadStream(logPath, range ?? {})
    .on("error", () => res.end())
    .pipe(res);
}

/** The request log's files one after the other, oldest first: every entry whole, one a line. */
async function serveRequests(
  req: http.IncomingMessage,
  res: http.ServerResponse,
  requestLog: NonNullable<ControlOptions["requestLog"]>,
): Promise<void> {
  await requestLog.recorder.flushed();
  res.writeHead(200, { "Content-Type": REQUEST_LOG_MEDIA_TYPE });
  if (req.method === "HEAD") return void res.end();
  for (const index of requestLogFiles(requestLog.dir)) {
    // A file rotated away meanwhile is left out; the rest still come.
    const file = fs.createReadStream(path.join(requestLog.dir, requestLogFileName(index)));
    const done = new Promise<void>((resolve) => {
      file.once("error", () => resolve());
      file.once("end", () => resolve());
    });
    file.pipe(res, { end: false });
    await done;
    if (res.destroyed) return;
  }
  res.end();
}

export function createControlServer(options: ControlOptions): http.Server {
  const { logPath, caCertPath, token, cdp, connector, log, idleTimeoutMs, headTimeoutMs } = options;

  async function openDevtools(): Promise<net.Socket> {
    const { socket } = await connector.open(cdp.host, cdp.port);
    socket.setTimeout(idleTimeoutMs);
    socket.once("timeout", () => socket.destroy(new Error(`no traffic for ${idleTimeoutMs} ms`)));
    return socket;
  }
  const devtoolsAgent = connectorAgent(openDevtools, idleTimeoutMs);

  /** The request's headers for DevTools: its Host, and never the token (DevTools is on the computer's network). */
  function devtoolsDestination(req: http.IncomingMessage, path: string): Destination {
    const headers = endToEndHeaders(req.rawHeaders, WRITTEN_BY_THE_CONTROL_PORT);
    return { host: cdp.host, port: cdp.port, path, headers: ["Host", DEVTOOLS_HOST, ...headers] };
  }

  function authorized(req: http.IncomingMessage): boolean {
    if (carriesControlToken(req.headers.authorization, token)) return true;
    const path = (req.url ?? "/").split("?")[0];
    log.write({
      event: "error",
      error: `control: ${req.method} ${path} ${req.headers.authorization === undefined ? "without" : "with a wrong"} bearer token`,
      client: req.socket.remoteAddress,
      method: req.method,
      status: 401,
    });
    return false;
  }

  function devtoolsFailed(err: Error): string {
    log.write({ event: "error", error: `control: DevTools at ${cdp.host}:${cdp.port}: ${err.message}`, status: 502 });
    return `DevTools at ${cdp.host}:${cdp.port}: ${err.message}`;
  }

  /**
   * Ends the computer's connections and resolves once their lines are in the log, so a reader of /log sees them
   * all; a mark after them says where an episode's lines begin, or a self-test's begin or end.
   */
  async function endConnections(connections: OpenConnections, mark: LogMark | undefined): Promise<number> {
    const ended = await connections.endAll();
    if (mark !== undefined && "episode" in mark) log.write({ event: "episode", episode: mark.episode, ended });
    else if (mark !== undefined) log.write({ event: "self-test", phase: mark.selfTest, ended });
    await Promise.all([log.flushed(), options.requestLog?.recorder.flushed()]);
    return ended;
  }

  const server = http.createServer(serverOptions(headTimeoutMs, idleTimeoutMs), (req, res) => {
    if (!authorized(req)) {
      res.writeHead(401, { "WWW-Authenticate": WWW_AUTHENTICATE_CHALLENGE, "Content-Type": "application/json" });
      return void res.end(JSON.stringify({ error: UNAUTHORIZED }) + "\n");
    }
    const problem = requestFramingProblem(req);
    if (problem) return answerResponse(res, 400, null, `malformed request: ${problem}`, true);
    const url = req.url ?? "/";
    const path = devtoolsPath(url);
    if (path !== undefined) {
      return forward(req, res, devtoolsAgent, devtoolsDestination(req, path), {
        answered: () => undefined,
        abandoned: () => undefined,
        failed: (err, settled) => (settled ? res.destroy() : answerResponse(res, 502, null, devtoolsFailed(err))),
      });
    }
    const route = url.split("?")[0];
    if (route === CONNECTIONS_END_PATH && options.connections) {
      if (req.method !== "POST") return void res.writeHead(405, { Allow: "POST" }).end();
      const mark = logMarkParam(url);
      if (mark === null)
        return answerResponse(
          res,
          400,
          null,
          "the one mark may be ?episode=<a whole number from 1> or ?selfTest=start|end",
          true,
        );
      return void endConnections(options.connections, mark).then((ended) => {
        res.writeHead(200, { "Content-Type": "application/json" });
        res.end(JSON.stringify({ ended }) + "\n");
      });
    }
    if (route === PERSON_PATH && options.requestLog) {
      if (req.method !== "PUT" && req.method !== "DELETE")
        return void res.writeHead(405, { Allow: "PUT, DELETE" }).end();
      req.resume();
      const held = req.method === "PUT";
      options.requestLog.recorder.personHolds(held);
      log.write({ event: held ? "person-holds" : "person-handed-back" });
      return void res.writeHead(204).end();
    }
    if (route === REQUESTS_PATH && options.requestLog) {
      if (req.method !== "GET" && req.method !== "HEAD") return void res.writeHead(405, { Allow: "GET, HEAD" }).end();
      return void serveRequests(req, res, options.requestLog);
    }
    if (route !== LOG_PATH && route !== CA_PATH) {
      res.writeHead(404, { "Content-Type": "application/json" });
      return void res.end(
        JSON.stringify({
          error: `no ${route} here; try GET ${LOG_PATH}, GET ${CA_PATH}, POST ${CONNECTIONS_END_PATH} or ${CDP_PREFIX}/...`,
        }) + "\n",
      );
    }
    if (req.method !== "GET" && req.method !== "HEAD") return void res.writeHead(405, { Allow: "GET, HEAD" }).end();
    if (route === LOG_PATH) serveLog(req, res, logPath);
    else {
      res.writeHead(200, { "Content-Type": "application/x-pem-file" });
      res.end(req.method === "HEAD" ? undefined : fs.readFileSync(caCertPath));
    }
  });

  server.on("upgrade", (req: http.IncomingMessage, client: net.Socket, early: Buffer) => {
    client.on("error", () => client.destroy());
    if (!authorized(req))
      return answerSocket(client, 401, null, UNAUTHORIZED, { "WWW-Authenticate": WWW_AUTHENTICATE_CHALLENGE });
    const problem = upgradeFramingProblem(req);
    if (problem) return answerSocket(client, 400, null, `malformed request: ${problem}`);
    const path = devtoolsPath(req.url ?? "/");
    if (path === undefined) return answerSocket(client, 404, null, "only /cdp/... takes an upgrade");
    forwardUpgrade(req, client, early, devtoolsDestination(req, path), idleTimeoutMs, {
      open: openDevtools,
      answered: () => undefined,
      abandoned: () => undefined,
      failed: (err) => answerSocket(client, 502, null, devtoolsFailed(err)),
    });
  });

  server.on("clientError", (err: NodeJS.ErrnoException, socket: net.Socket) => {
    if (err.code?.startsWith("HPE_")) {
      log.write({
        event: "error",
        error: `control: malformed request (${err.code})`,
        client: socket.remoteAddress,
        status: 400,
      });
      return answerSocket(socket, 400, null, `malformed request (${err.code})`);
    }
    socket.destroy();
  });
  server.on("close", () => devtoolsAgent.destroy());
  return server;
}
