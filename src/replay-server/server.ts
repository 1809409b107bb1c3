// The replay server: a recorded site served offline. Two listeners:
//   the site's (`listen`)   every request answered from the recording (matcher.ts), never from the network: an
//                           exchange matched exact or fuzzy is sent as recorded (answer.ts), a WebSocket handshake
//                           played back (websocket.ts); no match is a 404 marked `X-Agentenv-Replay: miss` and a
//                           `replay-miss` line (method, URL, the nearest recorded URL). A service worker's script is
//                           refused (404, `X-Agentenv-Replay: refused`), as its registration is in the page.
//   the control one         Bearer token: GET /healthz, GET /replay/v1/counters (this episode's exact, fuzzy and
//                           missed exchanges), POST /replay/v1/reset (the next episode starts: repeats from the
//                           first recorded answer again, counters from 0; answers the ended episode's counters).
// With a `stateDir`, the episode is kept on disk (episode-state.ts) and a restarted server goes on with it.
// The host a request is for is the browser's: X-Forwarded-Host (the site proxy's word, kept by the gateway), else
// Host; its scheme X-Forwarded-Proto, else http.
import http, { type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { Duplex } from "node:stream";
import { WebSocketServer, type WebSocket } from "ws";
import { carriesControlToken, WWW_AUTHENTICATE_CHALLENGE } from "../protocol/auth";
import {
  REPLAY_CONTROL_PATHS,
  REPLAY_HEADER,
  REPLAY_NEAREST_HEADER,
  type ReplayServerConfig,
} from "../protocol/replay-server-config";
import { logJsonLine, type Logger } from "../service-kit/log";
import { replyJson, replyJsonOnSocket } from "../service-kit/reply";
import { answerOf } from "./answer";
import { Episode } from "./episode";
import { EpisodeStateWriter, readEpisodeState, recordingIdentity } from "./episode-state";
import { ReplayIndex, type IncomingRequest, type MatchResult } from "./matcher";
import { normalizeHost, type Recording } from "./recording";
import { playWebSocket } from "./websocket";

export interface RunningReplayServer {
  port: number;
  controlPort: number;
  close(): Promise<void>;
}

class BodyTooLarge extends Error {}

function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let length = 0;
    req.on("data", (chunk: Buffer) => {
      length += chunk.length;
      if (length > limit) {
        req.removeAllListeners("data");
        req.resume();
        reject(new BodyTooLarge());
      } else chunks.push(chunk);
    });
    req.on("end", () => resolve(Buffer.concat(chunks)));
    req.on("error", reject);
  });
}

function pairs(raw: string[]): { name: string; value: string }[] {
  const out: { name: string; value: string }[] = [];
  for (let i = 0; i < raw.length; i += 2) out.push({ name: raw[i], value: raw[i + 1] });
  return out;
}

function firstHeader(req: IncomingMessage, name: string): string | undefined {
  const value = req.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/** The request as the matcher sees it, its host and scheme the browser's. */
function incomingOf(req: IncomingMessage, body: Buffer, upgrade: boolean): IncomingRequest {
  const proto = firstHeader(req, "x-forwarded-proto")?.split(",")[0].trim().toLowerCase();
  const scheme = proto === "https" ? "https" : "http";
  const authority = firstHeader(req, "x-forwarded-host")?.split(",")[0].trim() ?? req.headers.host ?? "";
  return {
    method: (req.method ?? "GET").toUpperCase(),
    scheme,
    host: normalizeHost(authority, scheme),
    target: req.url ?? "/",
    headers: pairs(req.rawHeaders),
    body: { mimeType: firstHeader(req, "content-type") ?? "", bytes: body },
    upgrade,
  };
}

/** A miss's marker, and the nearest recorded URL for the site proxy's `replay-miss` line (a header value's bytes). */
function missHeaders(nearest: string | undefined): Record<string, string> {
  const value = nearest === undefined ? undefined : nearestHeaderValue(nearest);
  return { [REPLAY_HEADER]: "miss", ...(value === undefined ? {} : { [REPLAY_NEAREST_HEADER]: value }) };
}

/** A recorded URL as a header value: within 2 KiB, and only what a header may carry (else none). */
function nearestHeaderValue(url: string): string | undefined {
  const clipped = url.slice(0, 2048);
  return /^[\x21-\x7e]+$/.test(clipped) ? clipped : undefined;
}

export class ReplayServer {
  private stateWriter: EpisodeStateWriter | undefined;

  constructor(
    private readonly config: ReplayServerConfig,
    private readonly index: ReplayIndex,
    private readonly token: string,
    private readonly log: Logger = logJsonLine,
    readonly episode = new Episode(),
  ) {}

  /** Keeps the episode in `writer`'s file from now on. */
  keepEpisodeIn(writer: EpisodeStateWriter): void {
    this.stateWriter = writer;
  }

  /** Writes the episode now (at a stop, before a turn's end that would have). */
  saveEpisode(): void {
    this.stateWriter?.write();
  }

  private async match(incoming: IncomingRequest): Promise<MatchResult> {
    const prepared = await this.index.prepare(incoming);
    // From the choice to its record, nothing waits: no other request can be given the same repeat.
    const result = this.index.choose(prepared, this.episode.served);
    if (result.kind === "miss") {
      this.episode.record("miss");
      this.log("replay-miss", { method: incoming.method, url: result.url.slice(0, 2048), nearest: result.nearest });
    } else this.episode.record(result.kind, result.exchange.index);
    this.stateWriter?.changed();
    return result;
  }

  readonly onRequest = (req: IncomingMessage, res: ServerResponse): void => {
    this.serve(req, res).catch((error: Error) => {
      this.log("error", { method: req.method, url: req.url?.slice(0, 512), error: error.message });
      if (!res.headersSent) replyJson(res, 500, { error: "replay server error", detail: error.message });
      else res.destroy();
    });
  };

  private async serve(req: IncomingMessage, res: ServerResponse): Promise<void> {
    res.sendDate = false; // the recorded Date header, if any, is the one sent
    if (firstHeader(req, "service-worker") === "script") {
      req.resume();
      return replyJson(res, 404, { error: "service workers are off in a replay" }, { [REPLAY_HEADER]: "refused" });
    }
    let body: Buffer;
    try {
      body = await readBody(req, this.config.maxBodyBytes);
    } catch (error) {
      if (!(error instanceof BodyTooLarge)) throw error;
      return replyJson(
        res,
        413,
        { error: "request body too large to compare", limit: this.config.maxBodyBytes },
        { Connection: "close" },
      );
    }
    const result = await this.match(incomingOf(req, body, false));
    if (result.kind === "miss")
      return replyJson(
        res,
        404,
        { error: "not in the recording", url: result.url, nearest: result.nearest ?? null },
        missHeaders(result.nearest),
      );
    const answer = answerOf(result.exchange);
    const head = req.method === "HEAD";
    const bodiless = answer.status === 204 || answer.status === 304 || answer.status < 200;
    const headers = [...answer.headers, REPLAY_HEADER, result.kind];
    if (!bodiless) headers.push("Content-Length", String(answer.body.length));
    res.writeHead(answer.status, answer.statusText || undefined, headers);
    res.end(head || bodiless ? undefined : answer.body);
  }

  /** Replayed WebSockets still open: an upgraded socket is no longer the HTTP server's to close. */
  readonly webSockets = new Set<WebSocket>();

  readonly onUpgrade = (req: IncomingMessage, socket: Duplex, head: Buffer): void => {
    socket.on("error", () => socket.destroy());
    this.upgrade(req, socket, head).catch((error: Error) => {
      this.log("error", { method: req.method, url: req.url?.slice(0, 512), error: error.message });
      socket.destroy();
    });
  };

  private async upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): Promise<void> {
    if ((firstHeader(req, "upgrade") ?? "").toLowerCase() !== "websocket")
      return replyJsonOnSocket(socket, 400, { error: "only WebSocket upgrades are replayed" });
    const result = await this.match(incomingOf(req, Buffer.alloc(0), true));
    if (result.kind === "miss")
      return replyJsonOnSocket(
        socket,
        404,
        { error: "not in the recording", url: result.url, nearest: result.nearest ?? null },
        missHeaders(result.nearest),
      );
    const exchange = result.exchange;
    const recordedProtocol = exchange.responseHeaders.find(
      (h) => h.name.toLowerCase() === "sec-websocket-protocol",
    )?.value;
    const offered = (firstHeader(req, "sec-websocket-protocol") ?? "").split(",").map((p) => p.trim());
    // One handshake each: the subprotocol and the marker header are this exchange's.
    const handshake = new WebSocketServer({
      noServer: true,
      perMessageDeflate: false,
      // A client's message is held whole before it counts, so it is held to a body's limit (ws's own is 100 MiB).
      maxPayload: this.config.maxBodyBytes,
      handleProtocols: () => (recordedProtocol && offered.includes(recordedProtocol) ? recordedProtocol : false),
    });
    handshake.on("headers", (headers) => headers.push(`${REPLAY_HEADER}: ${result.kind}`));
    handshake.handleUpgrade(req, socket, head, (ws) => {
      this.webSockets.add(ws);
      ws.once("close", () => this.webSockets.delete(ws));
      playWebSocket(ws, exchange.webSocketMessages ?? [], (error) => {
        const url = `${exchange.scheme}://${exchange.host}${exchange.target}`.slice(0, 2048);
        if (error.code === "WS_ERR_UNSUPPORTED_MESSAGE_LENGTH")
          this.log("replay-websocket-refused", {
            url,
            limit: this.config.maxBodyBytes,
            detail: "a message larger than maxBodyBytes; the connection is closed with 1009 (message too big)",
          });
        else this.log("error", { url, error: error.message });
      });
    });
  }

  readonly onControl = (req: IncomingMessage, res: ServerResponse): void => {
    req.resume();
    if (!carriesControlToken(req.headers.authorization, this.token))
      return replyJson(
        res,
        401,
        { error: "replay server token required", detail: "send Authorization: Bearer <token>" },
        { "WWW-Authenticate": WWW_AUTHENTICATE_CHALLENGE },
      );
    const path = (req.url ?? "").split("?", 1)[0];
    const method = req.method ?? "GET";
    if (path === REPLAY_CONTROL_PATHS.health && (method === "GET" || method === "HEAD"))
      return replyJson(res, 200, { ok: true, hosts: this.index.hostNames });
    if (path === REPLAY_CONTROL_PATHS.counters && (method === "GET" || method === "HEAD"))
      return replyJson(res, 200, this.episode.counters);
    if (path === REPLAY_CONTROL_PATHS.reset) {
      if (method !== "POST") return replyJson(res, 405, { error: "method not allowed" }, { Allow: "POST" });
      const ended = this.episode.reset();
      this.stateWriter?.changed();
      this.log("replay-reset", { ended });
      return replyJson(res, 200, { ended });
    }
    return replyJson(res, 404, { error: "not found" });
  };
}

function listen(server: http.Server, port: number, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
      server.off("error", reject);
      resolve((server.address() as AddressInfo).port);
    });
  });
}

function httpServer(config: ReplayServerConfig, handler: http.RequestListener): http.Server {
  const server = http.createServer(
    { requestTimeout: 0, headersTimeout: config.headersTimeoutMs, keepAliveTimeout: 65_000 },
    handler,
  );
  server.on("clientError", (error: Error & { code?: string }, socket) => {
    const code = error.code ?? "";
    if (socket.writable && (code.startsWith("HPE_") || code === "ERR_HTTP_REQUEST_TIMEOUT"))
      socket.end("HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n");
    else socket.destroy();
  });
  return server;
}

/** The episode a restarted server goes on with (`replay-restored`), else a new one. */
function restoredEpisode(config: ReplayServerConfig, recording: Recording, log: Logger): Episode {
  if (config.stateDir === undefined) return new Episode();
  const identity = recordingIdentity(config.recording, recording.exchanges.length);
  const saved = readEpisodeState(config.stateDir, identity, log);
  if (saved === undefined) return new Episode();
  const served = saved.served.filter((index) => index < recording.exchanges.length);
  log("replay-restored", { counters: saved.counters, served: served.length });
  return Episode.from({ counters: saved.counters, served });
}

/** Indexes `recording` and serves it on both listeners; resolves once both listen. */
export async function start(
  config: ReplayServerConfig,
  recording: Recording,
  token: string,
  options: { log?: Logger } = {},
): Promise<RunningReplayServer & { replay: ReplayServer }> {
  const index = await ReplayIndex.build(recording.exchanges, config);
  const log = options.log ?? logJsonLine;
  const replay = new ReplayServer(config, index, token, log, restoredEpisode(config, recording, log));
  if (config.stateDir !== undefined) {
    const writer = new EpisodeStateWriter(
      config.stateDir,
      recordingIdentity(config.recording, recording.exchanges.length),
      () => replay.episode.snapshot(),
      log,
    );
    replay.keepEpisodeIn(writer);
    writer.write();
  }
  const site = httpServer(config, replay.onRequest);
  site.on("upgrade", replay.onUpgrade);
  const control = httpServer(config, replay.onControl);
  const port = await listen(site, config.listen.port, config.listen.host);
  const controlPort = await listen(control, config.control.port, config.control.host);
  const close = (server: http.Server) =>
    new Promise<void>((done) => {
      server.close(() => done());
      server.closeAllConnections();
    });
  return {
    port,
    controlPort,
    replay,
    close: async () => {
      for (const ws of replay.webSockets) ws.terminate();
      replay.saveEpisode();
      await Promise.all([close(site), close(control)]);
    },
  };
}
