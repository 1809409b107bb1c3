// The gateway's HTTP servers: the published listener routes each request (see routes.ts) to a
// site, a computer, or one of the gateway's own operations; the browse listener (the computers'
// site proxies) reaches synthetic sites' /website/<site>/ and nothing else. Every request the
// gateway answers itself with an error leaves a `request-refused` line.
import http, { STATUS_CODES, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import type { Duplex } from "node:stream";
import {
  bearer,
  computerControlToken,
  replayServerToken,
  secretTokens,
  WWW_AUTHENTICATE_CHALLENGE,
} from "../protocol/auth";
import { GATEWAY_IDLE_CONNECTION_MS } from "../protocol/gateway-config";
import { REPLAY_CONTROL_PATHS } from "../protocol/replay-server-config";
import { Access } from "./access";
import { AgentConnections } from "./agent-cdp";
import type { Binding, Listener } from "./bind";
import { CaptureSources } from "./capture-sources";
import { CredentialReader } from "./credentials";
import { serveCapture, serveListing } from "../service-kit/captures";
import { gatewayCard } from "./card";
import { Computers } from "./computers";
import type { GatewayConfig } from "./config";
import { requestRefusal } from "../service-kit/framing";
import { RequestLogs } from "./requests";
import { HealthCheck } from "./health";
import { logJsonLine, type Logger } from "../service-kit/log";
import { Forwarder, STREAM_BUFFER_BYTES, type DispatcherFor, type Upstream } from "./proxy";
import { replyJson, replyJsonOnSocket, type Refuse } from "../service-kit/reply";
import { route, type Route } from "./routes";
import { serveTakeover, Takeovers } from "./takeovers";

export interface RunningGateway {
  servers: http.Server[];
  /** The published listener's (first) bound port. */
  port: number;
  /** Every socket listened on, with its bound port. */
  bound: Binding[];
  close(): Promise<void>;
}

type SiteRoute = Extract<Route, { kind: "site" }>;

const CHALLENGE = { "WWW-Authenticate": WWW_AUTHENTICATE_CHALLENGE };
const BROWSE_ONLY = "the browse listener serves /website/<site>/ only";
const CONNECT_REFUSED = "the gateway is no forward proxy: CONNECT is served on no listener";
const UNMET_EXPECTATION = "the gateway meets no Expect but 100-continue";
/** A logged request-target is cut here: enough to tell what was tried, bounded in size. */
const LOGGED_TARGET_CHARS = 512;

function clip(target: string | undefined): string | undefined {
  return target !== undefined && target.length > LOGGED_TARGET_CHARS
    ? `${target.slice(0, LOGGED_TARGET_CHARS)}...`
    : target;
}

/** Method and target of the request line at the start of a refused packet, as far as they can be read. */
function requestLine(packet: Buffer | undefined): { method?: string; target?: string } {
  if (!packet) return {};
  const line = packet.toString("latin1", 0, Math.min(packet.length, 2048)).split(/\r?\n/)[0];
  const [method, target] = line.split(" ");
  return { method: method || undefined, target: clip(target) };
}

export interface GatewayOptions {
  log?: Logger;
  /** Where forwarded requests go (see Forwarder); by default undici Pools. */
  dispatcherFor?: DispatcherFor;
}

export class Gateway {
  readonly forwarder: Forwarder;
  /** For the gateway's own small requests (cards, /ready, DevTools JSON). */
  private readonly ownAgent = new http.Agent({ keepAlive: true, maxSockets: 16 });
  private readonly health: HealthCheck;
  private readonly computers: Computers;
  private readonly access: Access;
  /** Replayed sites' replay servers' control listeners, each with its own token: `/replay/v1/<site>/...`. */
  private readonly replays: ReadonlyMap<string, Upstream>;
  /** With `captureSources`: where traffic/v1 is read from. */
  private readonly captureSources: CaptureSources | undefined;
  /** What each request's Authorization and own header carry, read once per request. */
  private readonly credentials: CredentialReader;
  /** requests/v1: each computer's request log, read from its site proxy. */
  private readonly requestLogs: RequestLogs;
  /** Which computers a person holds, and which agents asked for one. */
  readonly takeovers: Takeovers;
  private readonly log: Logger;
  /** Client connections whose framing was refused: answered, then closed, and nothing after on them is served. */
  private readonly distrusted = new WeakSet<Duplex>();

  constructor(
    private readonly config: GatewayConfig,
    controlToken: string,
    options: GatewayOptions = {},
  ) {
    this.log = options.log ?? logJsonLine;
    this.access = new Access(controlToken, Object.keys(config.computers ?? {}));
    // A computer's token opens that computer's DevTools and log, a capture server's token that container's captures,
    // an agent token that computer's DevTools: no site may see them any more than the control token, and no request
    // log may hold them.
    const secrets = secretTokens([
      controlToken,
      ...this.access.tokens(),
      ...Object.keys(config.computers ?? {}).map((name) => computerControlToken(controlToken, name)),
      ...CaptureSources.tokens(config.captureSources, controlToken),
      ...Object.keys(config.replays ?? {}).map((site) => replayServerToken(controlToken, site)),
    ]);
    // Each request's credentials are read once, for access and for what of them is forwarded.
    this.credentials = new CredentialReader(secrets, this.access.tokens());
    this.forwarder = new Forwarder({
      credentials: this.credentials,
      connectTimeoutMs: config.connectTimeoutMs,
      idleTimeoutMs: config.idleTimeoutMs,
      log: this.log,
      dispatcherFor: options.dispatcherFor,
    });
    this.replays = new Map(
      Object.entries(config.replays ?? {}).map(([site, url]) => [
        site,
        { url, label: { replay: site }, authorization: bearer(replayServerToken(controlToken, site)) },
      ]),
    );
    this.captureSources =
      config.captureSources === undefined
        ? undefined
        : new CaptureSources(config.captureSources, controlToken, this.forwarder, this.ownAgent);
    this.health = new HealthCheck(config, this.ownAgent, this.captureSources);
    this.takeovers = new Takeovers(Object.keys(config.computers ?? {}));
    // A holder that stopped renewing (a watch killed): handed back as at a DELETE, by this worker alone.
    this.takeovers.onExpired((computer, held) => {
      const until = new Date().toISOString();
      this.log("handed-back", { computer, operator: held.operator, since: held.since, until, ended: "hold-expired" });
      void this.computers
        .tellPersonHolds(computer, false)
        .catch((error: Error) => this.log("person-mark-stuck", { computer, detail: error.message }));
    });
    this.computers = new Computers(
      config.computers,
      controlToken,
      this.forwarder,
      this.ownAgent,
      this.takeovers,
      new AgentConnections(this.takeovers, this.log),
    );
    this.requestLogs = new RequestLogs(config.computers, controlToken, this.ownAgent, secrets);
  }

  /** Refuses (401, with its line) a request whose credential does not open `target` on `listener`. */
  private admitted(listener: Listener, req: IncomingMessage, target: Route, refuse: Refuse): boolean {
    const refusal = this.access.refusal(listener, req, target, this.credentials);
    if (refusal === undefined) return true;
    refuse(refusal.status, refusal.body, undefined, refusal.status === 401 ? CHALLENGE : undefined);
    return false;
  }

  private refusal(listener: Listener, req: IncomingMessage, status: number, reason: string): void {
    this.log("request-refused", {
      listener,
      status,
      method: req.method,
      target: clip(req.url),
      reason,
      remote: req.socket.remoteAddress,
    });
  }

  private refuser(listener: Listener, req: IncomingMessage, res: ServerResponse): Refuse {
    return (status, body, reason, headers) => {
      this.refusal(listener, req, status, reason ?? String(body.error));
      replyJson(res, status, body, headers);
    };
  }

  private socketRefuser(listener: Listener, req: IncomingMessage, socket: Duplex): Refuse {
    return (status, body, reason, headers) => {
      this.refusal(listener, req, status, reason ?? String(body.error));
      replyJsonOnSocket(socket, status, body, headers);
    };
  }

  /** The upstream of a site route, or the reason there is none. */
  private siteUpstream(target: SiteRoute): Upstream | { status: number; body: Record<string, string> } {
    const site = Object.hasOwn(this.config.sites, target.site) ? this.config.sites[target.site] : undefined;
    if (!site) return { status: 404, body: { error: "unknown site", site: target.site } };
    if (target.via === "svc") return { url: site.server, label: { site: target.site } };
    if (!site.frontend) {
      return {
        status: 404,
        body: { error: site.live ? "a live site has no /website/ route" : "site has no frontend", site: target.site },
      };
    }
    // A replayed site's frontend is its replay server, the one upstream whose replay evidence crosses.
    const replayed = Object.hasOwn(this.config.replays ?? {}, target.site);
    return { url: site.frontend, label: { site: target.site }, ...(replayed ? { replayEvidence: true as const } : {}) };
  }

  /** The request handler for one listener. */
  onRequest(listener: Listener): (req: IncomingMessage, res: ServerResponse) => void {
    return (req, res) => {
      // A request read after a refused one on the same connection (pipelined) is never served.
      if (this.distrusted.has(req.socket)) return;
      const refuse = this.refuser(listener, req, res);
      this.handle(listener, req, res, refuse).catch((error: Error) => {
        this.log("error", { listener, method: req.method, url: clip(req.url), error: error.message });
        replyJson(res, 500, { error: "gateway error", detail: error.message });
      });
    };
  }

  private async handle(listener: Listener, req: IncomingMessage, res: ServerResponse, refuse: Refuse): Promise<void> {
    const refused = requestRefusal(req, false);
    if (refused) {
      // The connection's framing is not to be trusted after this: it is closed once answered.
      this.distrusted.add(req.socket);
      return refuse(refused.status, { error: refused.error, detail: refused.reason }, refused.reason, {
        Connection: "close",
      });
    }
    const target = route(req.url ?? "");
    if (!this.admitted(listener, req, target, refuse)) return;
    if (listener === "browse" && !(target.kind === "site" && target.via === "website")) {
      return refuse(404, { error: "not found" }, BROWSE_ONLY);
    }
    switch (target.kind) {
      case "site": {
        const upstream = this.siteUpstream(target);
        if ("status" in upstream) return refuse(upstream.status, upstream.body);
        return this.forwarder.forward(req, res, upstream, target.rest);
      }
      case "bad":
        return refuse(400, { error: target.error });
      case "not-found":
        return refuse(404, { error: "not found" });
      case "card":
        if (!isRead(req)) return notAllowed(refuse);
        return replyJson(res, 200, await gatewayCard(this.config, this.ownAgent, this.log));
      case "healthz": {
        if (!isRead(req)) return notAllowed(refuse);
        const health = await this.health.check();
        return replyJson(res, health.ok ? 200 : 503, health);
      }
      case "captures":
      case "capture": {
        if (!isRead(req)) return notAllowed(refuse);
        const sources = this.captureSources;
        if (sources)
          return target.kind === "captures"
            ? sources.serveListing(res, refuse)
            : sources.serveCapture(req, res, target.name, refuse);
        const dir = this.config.capturesDir;
        if (dir === undefined) return refuse(404, { error: "this gateway serves no traffic captures" });
        if (target.kind === "captures") return serveListing(dir, res);
        const missing = await serveCapture(dir, target.name, res);
        if (missing) return refuse(missing.status, { error: missing.error, name: target.name }, missing.reason);
        return;
      }
      case "request-logs":
      case "request-log":
        if (!isRead(req)) return notAllowed(refuse);
        return target.kind === "request-logs"
          ? this.requestLogs.serveListing(res)
          : this.requestLogs.serve(res, target.computer, refuse);
      case "computer": {
        const asAgent = this.access.admitsAsAgent(req, target.computer);
        return this.computers.handle(req, res, target.computer, target.op, target.rest, refuse, asAgent);
      }
      case "takeovers":
        if (!isRead(req)) return notAllowed(refuse);
        return replyJson(res, 200, this.takeovers.listing());
      case "takeover":
        return serveTakeover(
          req,
          res,
          target.computer,
          this.takeovers,
          (computer, held) => this.computers.tellPersonHolds(computer, held),
          refuse,
          this.log,
        );
      case "replay": {
        const upstream = this.replays.get(target.site);
        if (upstream === undefined) return refuse(404, { error: "no replayed site of that name", site: target.site });
        if (target.op === "counters" && !isRead(req)) return notAllowed(refuse);
        if (target.op === "reset" && req.method !== "POST")
          return refuse(405, { error: "method not allowed" }, undefined, { Allow: "POST" });
        return this.forwarder.forward(req, res, upstream, REPLAY_CONTROL_PATHS[target.op]);
      }
    }
  }

  /** The upgrade (WebSocket) handler for one listener. */
  onUpgrade(listener: Listener): (req: IncomingMessage, socket: Duplex, head: Buffer) => void {
    return (req, socket, head) => {
      socket.on("error", () => undefined);
      if (this.distrusted.has(socket)) return void socket.destroy();
      const refuse = this.socketRefuser(listener, req, socket);
      const refused = requestRefusal(req, true);
      if (refused) return refuse(refused.status, { error: refused.error, detail: refused.reason }, refused.reason);
      const target = route(req.url ?? "");
      if (!this.admitted(listener, req, target, refuse)) return;
      if (listener === "browse" && !(target.kind === "site" && target.via === "website")) {
        return refuse(404, { error: "not found" }, BROWSE_ONLY);
      }
      switch (target.kind) {
        case "site": {
          const upstream = this.siteUpstream(target);
          if ("status" in upstream) return refuse(upstream.status, upstream.body);
          return this.forwarder.upgrade(req, socket, head, upstream, target.rest);
        }
        case "computer": {
          const asAgent = this.access.admitsAsAgent(req, target.computer);
          return this.computers.upgrade(req, socket, head, target.computer, target.op, target.rest, refuse, asAgent);
        }
        case "bad":
          return refuse(400, { error: target.error });
        default:
          return refuse(404, { error: "not found" });
      }
    };
  }

  /**
   * CONNECT, which node hands over apart from every other method and closes unanswered when nobody takes it: the
   * gateway tunnels nothing, so it is refused like any method a route does not serve, with its line.
   */
  onConnect(listener: Listener): (req: IncomingMessage, socket: Duplex) => void {
    return (req, socket) => {
      socket.on("error", () => undefined);
      this.socketRefuser(listener, req, socket)(405, { error: "method not allowed", detail: CONNECT_REFUSED });
    };
  }

  /** An Expect other than 100-continue, which node would answer 417 itself, silently: answered so, with its line. */
  onUnmetExpectation(listener: Listener): (req: IncomingMessage, res: ServerResponse) => void {
    return (req, res) => {
      this.refuser(listener, req, res)(417, { error: "expectation failed", detail: UNMET_EXPECTATION }, undefined, {
        Connection: "close",
      });
    };
  }

  /** What node's parser refused (bad framing, a head too slow or too large): a bare answer, and a log line. */
  onClientError(
    listener: Listener,
  ): (error: Error & { code?: string; reason?: string; rawPacket?: Buffer }, socket: Duplex) => void {
    return (error, socket) => {
      const code = error.code ?? "";
      const timedOut = code === "ERR_HTTP_REQUEST_TIMEOUT";
      if (!timedOut && !code.startsWith("HPE_")) {
        socket.destroy(); // the client's connection failed (a reset, say): nothing to answer
        return;
      }
      const status = timedOut ? 408 : code === "HPE_HEADER_OVERFLOW" ? 431 : 400;
      const reason = timedOut
        ? `request head not received within ${this.config.headersTimeoutMs} ms`
        : `${code}: ${error.reason ?? error.message}`;
      this.log("request-refused", {
        listener,
        status,
        ...requestLine(error.rawPacket),
        reason,
        remote: (socket as Socket).remoteAddress,
      });
      // An answer already under way on this connection cannot be followed by another: just close it.
      const inFlight = (socket as Socket & { _httpMessage?: ServerResponse })._httpMessage;
      if (socket.writable && !inFlight?.headersSent)
        socket.end(`HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`);
      else socket.destroy();
    };
  }

  close(): void {
    this.takeovers.detach();
    this.forwarder.close();
    this.ownAgent.destroy();
  }
}

function isRead(req: IncomingMessage): boolean {
  return req.method === "GET" || req.method === "HEAD";
}

function notAllowed(refuse: Refuse): void {
  refuse(405, { error: "method not allowed" }, undefined, { Allow: "GET, HEAD" });
}

export interface StartOptions extends GatewayOptions {
  /**
   * Sockets to listen on, names already resolved (bind.ts); by default `listen.host` as given, and no browse listener.
   */
  bindings?: Binding[];
}

/** Starts serving `config` in this process; resolves once every listener is listening. */
export async function start(
  config: GatewayConfig,
  controlToken: string,
  options: StartOptions = {},
): Promise<RunningGateway> {
  const gateway = new Gateway(config, controlToken, options);
  const bindings = options.bindings ?? [
    { listener: "published", host: config.listen.host, address: config.listen.host, port: config.listen.port },
  ];
  const servers: http.Server[] = [];
  const close = () =>
    Promise.all(
      servers.map(
        (server) =>
          new Promise<void>((done) => {
            server.close(() => done());
            server.closeAllConnections();
          }),
      ),
    ).then(() => gateway.close());
  const bound: Binding[] = [];
  try {
    for (const binding of bindings) {
      const server = http.createServer(
        {
          // No flat ceiling on a request (a long upload that keeps moving is fine); stalls are the
          // idle timeout's job. The head alone is bounded, so a slow client cannot hold a connection.
          requestTimeout: 0,
          // Refused in requestRefusal (framing.ts), so the refusal is logged like every other.
          requireHostHeader: false,
          headersTimeout: config.headersTimeoutMs,
          connectionsCheckingInterval: Math.max(100, Math.min(1_000, Math.floor(config.headersTimeoutMs / 4))),
          keepAliveTimeout: GATEWAY_IDLE_CONNECTION_MS,
          highWaterMark: STREAM_BUFFER_BYTES,
        },
        gateway.onRequest(binding.listener),
      );
      server.on("upgrade", gateway.onUpgrade(binding.listener));
      server.on("connect", gateway.onConnect(binding.listener));
      server.on("checkExpectation", gateway.onUnmetExpectation(binding.listener));
      server.on("clientError", gateway.onClientError(binding.listener));
      servers.push(server);
      await new Promise<void>((resolve, reject) => {
        server.once("error", reject);
        server.listen(binding.port, binding.address, () => {
          server.off("error", reject);
          resolve();
        });
      });
      bound.push({ ...binding, port: (server.address() as AddressInfo).port });
    }
  } catch (error) {
    await close();
    throw error;
  }
  return { servers, port: bound.find((b) => b.listener === "published")?.port ?? 0, bound, close };
}
