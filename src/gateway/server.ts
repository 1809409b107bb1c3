// The gateway's HTTP server: routes each request (see routes.ts) to a site, a computer,
// or one of the gateway's own operations.
import http, { type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { Duplex } from "node:stream";
import { carriesControlToken, WWW_AUTHENTICATE_CHALLENGE } from "../protocol/auth";
import { serveCapture, serveListing } from "./captures";
import { gatewayCard } from "./card";
import { Computers } from "./computers";
import type { GatewayConfig } from "./config";
import { HealthCheck } from "./health";
import { logJsonLine, type Logger } from "./log";
import { Forwarder, STREAM_BUFFER_BYTES, type Upstream } from "./proxy";
import { replyJson, replyJsonOnSocket } from "./reply";
import { route, type Route } from "./routes";

export interface RunningGateway {
  server: http.Server;
  port: number;
  close(): Promise<void>;
}

type SiteRoute = Extract<Route, { kind: "site" }>;

const UNAUTHORIZED = { error: "control token required", detail: "send Authorization: Bearer <control token>" };

export class Gateway {
  readonly forwarder: Forwarder;
  /** For the gateway's own small requests (cards, /ready, DevTools JSON). */
  private readonly ownAgent = new http.Agent({ keepAlive: true, maxSockets: 16 });
  private readonly health: HealthCheck;
  private readonly computers: Computers;

  constructor(
    private readonly config: GatewayConfig,
    private readonly controlToken: string,
    private readonly log: Logger = logJsonLine,
  ) {
    this.forwarder = new Forwarder({ controlToken, connectTimeoutMs: config.connectTimeoutMs, idleTimeoutMs: config.idleTimeoutMs, log });
    this.health = new HealthCheck(config, this.ownAgent);
    this.computers = new Computers(config.computers, this.forwarder, this.ownAgent);
  }

  private authorized(req: IncomingMessage): boolean {
    return carriesControlToken(req.headers.authorization, this.controlToken);
  }

  /** The upstream of a site route, or the reason there is none. */
  private siteUpstream(target: SiteRoute): Upstream | { status: number; body: Record<string, string> } {
    const site = Object.hasOwn(this.config.sites, target.site) ? this.config.sites[target.site] : undefined;
    if (!site) return { status: 404, body: { error: "unknown site", site: target.site } };
    if (target.via === "svc") return { url: site.server, label: { site: target.site } };
    if (!site.frontend) {
      return { status: 404, body: { error: site.live ? "a live site has no /website/ route" : "site has no frontend", site: target.site } };
    }
    return { url: site.frontend, label: { site: target.site } };
  }

  readonly onRequest = (req: IncomingMessage, res: ServerResponse): void => {
    this.handle(req, res).catch((error: Error) => {
      this.log("error", { method: req.method, url: req.url, error: error.message });
      replyJson(res, 500, { error: "gateway error", detail: error.message });
    });
  };

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const target = route(req.url ?? "");
    switch (target.kind) {
      case "site": {
        const upstream = this.siteUpstream(target);
        if ("status" in upstream) return replyJson(res, upstream.status, upstream.body);
        return this.forwarder.forward(req, res, upstream, target.rest);
      }
      case "bad":
        return replyJson(res, 400, { error: target.error });
      case "not-found":
        return replyJson(res, 404, { error: "not found" });
      case "card":
        if (!isRead(req)) return notAllowed(res);
        return replyJson(res, 200, await gatewayCard(this.config, this.ownAgent, this.log));
      case "healthz": {
        if (!isRead(req)) return notAllowed(res);
        const health = await this.health.check();
        return replyJson(res, health.ok ? 200 : 503, health);
      }
      case "captures":
      case "capture": {
        if (!this.authorized(req)) return replyJson(res, 401, UNAUTHORIZED, { "WWW-Authenticate": WWW_AUTHENTICATE_CHALLENGE });
        if (!isRead(req)) return notAllowed(res);
        const dir = this.config.capturesDir;
        if (dir === undefined) return replyJson(res, 404, { error: "this gateway serves no traffic captures" });
        return target.kind === "captures" ? serveListing(dir, res) : serveCapture(dir, target.name, res);
      }
      case "computer":
        if (!this.authorized(req)) return replyJson(res, 401, UNAUTHORIZED, { "WWW-Authenticate": WWW_AUTHENTICATE_CHALLENGE });
        return this.computers.handle(req, res, target.computer, target.op, target.rest);
    }
  }

  readonly onUpgrade = (req: IncomingMessage, socket: Duplex, head: Buffer): void => {
    socket.on("error", () => undefined);
    const target = route(req.url ?? "");
    switch (target.kind) {
      case "site": {
        const upstream = this.siteUpstream(target);
        if ("status" in upstream) return replyJsonOnSocket(socket, upstream.status, upstream.body);
        return this.forwarder.upgrade(req, socket, head, upstream, target.rest);
      }
      case "computer":
        if (!this.authorized(req)) return replyJsonOnSocket(socket, 401, UNAUTHORIZED, { "WWW-Authenticate": WWW_AUTHENTICATE_CHALLENGE });
        return this.computers.upgrade(req, socket, head, target.computer, target.op, target.rest);
      case "bad":
        return replyJsonOnSocket(socket, 400, { error: target.error });
      default:
        return replyJsonOnSocket(socket, 404, { error: "not found" });
    }
  };

  close(): void {
    this.forwarder.close();
    this.ownAgent.destroy();
  }
}

function isRead(req: IncomingMessage): boolean {
  return req.method === "GET" || req.method === "HEAD";
}

function notAllowed(res: ServerResponse): void {
  replyJson(res, 405, { error: "method not allowed" }, { Allow: "GET, HEAD" });
}

/** Starts serving `config` in this process; resolves once listening. */
export function start(config: GatewayConfig, controlToken: string, log: Logger = logJsonLine): Promise<RunningGateway> {
  const gateway = new Gateway(config, controlToken, log);
  // No flat ceiling on a request (a long upload that keeps moving is fine); stalls are the idle timeout's job.
  const server = http.createServer({ requestTimeout: 0, keepAliveTimeout: 65_000, highWaterMark: STREAM_BUFFER_BYTES }, gateway.onRequest);
  server.on("upgrade", gateway.onUpgrade);
  server.on("clientError", (error, socket) => {
    if (socket.writable) socket.end("HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n");
    else socket.destroy();
  });
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(config.listen.port, config.listen.host, () => {
      server.off("error", reject);
      resolve({
        server,
        port: (server.address() as AddressInfo).port,
        close: () =>
          new Promise<void>((done) => {
            server.close(() => done());
            server.closeAllConnections();
            gateway.close();
          }),
      });
    });
  });
}
