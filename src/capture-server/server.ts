// The capture server: one website container's captures folder (its pod's, which tcpdump writes) over HTTP, to the
// gateway alone. Every request needs `Authorization: Bearer <token>` (captureServerToken(control token, container));
// only GET and HEAD are served:
//   /captures          the traffic/v1 listing of the container's own capture files
//   /captures/<name>   one of them, streamed with its length
//   /healthz           200 while the container's capture is writing, else 503 with the reason (health.ts)
// Files of another container in the folder are neither listed nor served; what is not a regular file never is
// (src/gateway/captures.ts). Every refused request leaves a `request-refused` line.
import http, { type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { carriesControlToken, WWW_AUTHENTICATE_CHALLENGE } from "../protocol/auth";
import type { CaptureServerConfig } from "../protocol/gateway-config";
import { parseCaptureName, type TrafficCaptureListing } from "../protocol/traffic";
import { listCaptures, serveCapture } from "../service-kit/captures";
import { requestRefusal } from "../service-kit/framing";
import { logJsonLine, type Logger } from "../service-kit/log";
import { replyJson } from "../service-kit/reply";
import { CaptureHealth } from "./health";
import { route } from "./routes";

export interface RunningCaptureServer {
  server: http.Server;
  port: number;
  close(): Promise<void>;
}

const UNAUTHORIZED = { error: "capture server token required", detail: "send Authorization: Bearer <token>" };

export class CaptureServer {
  private readonly health: CaptureHealth;

  constructor(
    private readonly config: CaptureServerConfig,
    private readonly token: string,
    private readonly log: Logger = logJsonLine,
  ) {
    this.health = new CaptureHealth(config.capturesDir, config.container, config.captureFreshMs);
  }

  private refuse(
    req: IncomingMessage,
    res: ServerResponse,
    status: number,
    body: Record<string, unknown>,
    reason = String(body.error),
    headers: Record<string, string> = {},
  ): void {
    this.refused.add(res);
    this.log("request-refused", {
      status,
      method: req.method,
      target: req.url?.slice(0, 512),
      reason,
      remote: req.socket.remoteAddress,
    });
    replyJson(res, status, body, headers);
  }

  /** Answers refusal already logged, so a request gets one line either way. */
  private readonly refused = new WeakSet<ServerResponse>();

  readonly onRequest = (req: IncomingMessage, res: ServerResponse): void => {
    const started = Date.now();
    res.on("close", () => {
      if (this.refused.has(res)) return;
      this.log("request", {
        status: res.statusCode,
        method: req.method,
        target: req.url?.slice(0, 512),
        remote: req.socket.remoteAddress,
        completed: res.writableFinished,
        ms: Date.now() - started,
      });
    });
    this.handle(req, res).catch((error: Error) => {
      this.log("error", { method: req.method, url: req.url?.slice(0, 512), error: error.message });
      replyJson(res, 500, { error: "capture server error", detail: error.message });
    });
  };

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const refused = requestRefusal(req, false);
    if (refused)
      return this.refuse(req, res, refused.status, { error: refused.error, detail: refused.reason }, refused.reason, {
        Connection: "close",
      });
    if (!carriesControlToken(req.headers.authorization, this.token))
      return this.refuse(req, res, 401, UNAUTHORIZED, undefined, { "WWW-Authenticate": WWW_AUTHENTICATE_CHALLENGE });
    if (req.method !== "GET" && req.method !== "HEAD")
      return this.refuse(req, res, 405, { error: "method not allowed" }, undefined, { Allow: "GET, HEAD" });
    const target = route(req.url ?? "");
    const { capturesDir, container } = this.config;
    switch (target.kind) {
      case "bad":
        return this.refuse(req, res, 400, { error: target.error });
      case "not-found":
        return this.refuse(req, res, 404, { error: "not found" });
      case "health": {
        const health = await this.health.check();
        return replyJson(res, health.ok ? 200 : 503, health);
      }
      case "list": {
        const captures = (await listCaptures(capturesDir)).filter((capture) => capture.container === container);
        return replyJson(res, 200, { captures } satisfies TrafficCaptureListing);
      }
      case "file": {
        const parsed = parseCaptureName(target.name);
        if (parsed && `${parsed.site}-${parsed.role}` !== container)
          return this.refuse(
            req,
            res,
            404,
            { error: "no such capture", name: target.name },
            `not ${container}'s capture`,
          );
        const missing = await serveCapture(capturesDir, target.name, res);
        if (missing)
          return this.refuse(req, res, missing.status, { error: missing.error, name: target.name }, missing.reason);
        return;
      }
    }
  }
}

/** Starts serving `config` in this process; resolves once listening. */
export async function start(
  config: CaptureServerConfig,
  token: string,
  options: { log?: Logger } = {},
): Promise<RunningCaptureServer> {
  const captureServer = new CaptureServer(config, token, options.log);
  const server = http.createServer(
    {
      requestTimeout: 0,
      requireHostHeader: false, // refused in requestRefusal, with its line
      headersTimeout: config.headersTimeoutMs,
      // Longer than the gateway keeps an idle connection, so the gateway is the side that closes it.
      keepAliveTimeout: 65_000,
    },
    captureServer.onRequest,
  );
  server.on("clientError", (error: Error & { code?: string }, socket) => {
    const code = error.code ?? "";
    if (socket.writable && (code.startsWith("HPE_") || code === "ERR_HTTP_REQUEST_TIMEOUT"))
      socket.end("HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n");
    else socket.destroy();
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(config.listen.port, config.listen.host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  return {
    server,
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((done) => {
        server.close(() => done());
        server.closeAllConnections();
      }),
  };
}
