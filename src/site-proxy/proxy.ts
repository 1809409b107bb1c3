// The forward proxy itself (DESIGN "Site proxy"): CONNECT and absolute-form HTTP, routed by the computer's site
// table and reaching. Synthetic names go to the gateway's /website/<site>/ (TLS terminated with a leaf from the
// env CA); other hosts are tunnelled or forwarded when the computer reaches them; every answer the proxy gives
// itself carries X-Agentenv-Site-Proxy.
import * as http from "node:http";
import type * as net from "node:net";
import * as tls from "node:tls";
import { type FailedReason, SiteProxyVerdict } from "../protocol/site-proxy";
import type { CertificateAuthority } from "./ca";
import { ConnectFailure, type Connector, normalizeHost, type Opened } from "./connect";
import { answerResponse, answerSocket, endToEndHeaders, parseAbsoluteForm, parseAuthority, withoutHeader } from "./messages";
import type { EventLog } from "./log";
import { endedByRelay, relay } from "./relay";
import type { Router } from "./routing";

export interface ProxyOptions {
  router: Router;
  connector: Connector;
  ca: CertificateAuthority;
  log: EventLog;
  gateway: URL;
  idleTimeoutMs: number;
}

/** Requests whose headers are larger than this are answered 400 (node's default limit is 16 KiB). */
export const MAX_HEADER_BYTES = 64 * 1024;

/**
 * An agent whose sockets come from the connector: one deadline for the lookup and the attempts, the idle timeout,
 * a log line each. Node's Agent accepts a callback from createConnection, so the socket may come after an
 * asynchronous lookup and connect.
 */
function connectorAgent(open: (host: string, port: number) => Promise<net.Socket>, idleTimeoutMs: number): http.Agent {
  const agent = new http.Agent({ keepAlive: true, timeout: idleTimeoutMs, scheduling: "lifo" });
  (agent as unknown as { createConnection: unknown }).createConnection = (
    options: { host?: string | null; port?: number | string | null },
    callback: (err: Error | null, socket?: net.Socket) => void,
  ): undefined => {
    open(String(options.host), Number(options.port)).then(
      (socket) => callback(null, socket),
      (err: Error) => callback(err),
    );
    return undefined;
  };
  return agent;
}

export interface SyntheticTunnel {
  site: string;
  host: string;
  port: number;
  /** What the computer speaks inside the tunnel: TLS (terminated here) or plain HTTP. */
  proto: "http" | "https";
}

/** Creates the proxy's HTTP server (not yet listening). */
export function createProxyServer(options: ProxyOptions): http.Server {
  const { router, connector, ca, log, gateway, idleTimeoutMs } = options;
  const gatewayHost = normalizeHost(gateway.hostname);
  const gatewayPort = Number(gateway.port || 80);
  const gatewayPrefix = gateway.pathname.replace(/\/$/, "");
  const serverOptions: http.ServerOptions = {
    maxHeaderSize: MAX_HEADER_BYTES,
    requireHostHeader: false,
    requestTimeout: 0,
    keepAliveTimeout: idleTimeoutMs,
  };

  /** Opens a connection to a host the computer reaches and writes its `connection` line when it closes. */
  async function openLogged(method: "CONNECT" | "HTTP", host: string, port: number): Promise<Opened> {
    const start = new Date();
    const opened = await connector.open(host, port, { bulkReads: method === "CONNECT" });
    const { socket, address } = opened;
    socket.setTimeout(idleTimeoutMs);
    // A tunnel's relay ends its own idle sockets; a socket that carries requests ends here, answered or not.
    if (method === "HTTP") socket.once("timeout", () => socket.destroy(new Error(`no traffic for ${idleTimeoutMs} ms`)));
    socket.once("close", () =>
      log.write({
        event: "connection",
        method,
        host,
        port,
        address,
        bytesToHost: socket.bytesWritten,
        bytesFromHost: socket.bytesRead,
        start: start.toISOString(),
        durationMs: Date.now() - start.getTime(),
        ...(endedByRelay.has(socket) ? { endedBy: endedByRelay.get(socket) } : {}),
      }),
    );
    return opened;
  }

  async function openGateway(): Promise<net.Socket> {
    const { socket } = await connector.open(gatewayHost, gatewayPort);
    socket.setTimeout(idleTimeoutMs);
    socket.once("timeout", () => socket.destroy(new Error(`no traffic for ${idleTimeoutMs} ms`)));
    return socket;
  }

  const hostAgent = connectorAgent(async (host, port) => (await openLogged("HTTP", host, port)).socket, idleTimeoutMs);
  const gatewayAgent = connectorAgent(openGateway, idleTimeoutMs);

  function failed(method: string, host: string, port: number, reason: FailedReason, error: string): string {
    log.write({ event: "failed", method, host, port, reason, error });
    return `${host}:${port} ${reason === "no answer" ? "does not answer" : "does not resolve"}: ${error}`;
  }

  function refused(method: string, host: string, port: number, why: string): string {
    log.write({ event: "refused", method, host, port, why });
    return `${host}:${port} is refused: ${why}`;
  }

  /**
   * Sends a request on to `agent`'s host and streams the answer back; failures before the answer are 502. A request
   * without a body that meets a kept-alive connection the host had just closed is sent once more on a new one, as
   * a browser would do itself (node's agent does not).
   */
  function pass(
    req: http.IncomingMessage,
    res: http.ServerResponse,
    agent: http.Agent,
    target: { host: string; port: number; path: string; headers: string[] },
    report: { method: string; host: string; port: number },
  ): void {
    const bodyless = req.headers["content-length"] === undefined && req.headers["transfer-encoding"] === undefined;
    const send = (retry: boolean) => {
      const upstream = http.request({ agent, host: target.host, port: target.port, method: req.method, path: target.path, headers: target.headers, setHost: false });
      upstream.on("response", (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.statusMessage, endToEndHeaders(answer.rawHeaders));
        answer.pipe(res);
        answer.on("error", () => res.destroy());
      });
      upstream.on("error", (err: NodeJS.ErrnoException) => {
        if (retry && bodyless && upstream.reusedSocket && !res.headersSent && (err.code === "ECONNRESET" || err.code === "EPIPE")) return send(false);
        if (err instanceof ConnectFailure) {
          answerResponse(res, 502, SiteProxyVerdict.failed, failed(report.method, report.host, report.port, err.reason, err.message));
        } else {
          log.write({ event: "error", error: err.message, method: report.method, host: report.host, port: report.port, ...(res.headersSent ? {} : { status: 502 }) });
          answerResponse(res, 502, SiteProxyVerdict.failed, `${report.host}:${report.port}: ${err.message}`);
        }
      });
      res.once("close", () => {
        if (!res.writableFinished) upstream.destroy();
      });
      if (bodyless) {
        req.resume();
        upstream.end();
      } else req.pipe(upstream);
    };
    send(true);
  }

  /** A synthetic site's request as the gateway gets it: its own Host, and the browser's in X-Forwarded-Host/-Proto. */
  function gatewayHeaders(req: http.IncomingMessage, authority: string, proto: "http" | "https"): string[] {
    const headers = withoutHeader(withoutHeader(withoutHeader(endToEndHeaders(req.rawHeaders), "host"), "x-forwarded-host"), "x-forwarded-proto");
    headers.unshift("Host", gateway.host);
    headers.push("X-Forwarded-Host", authority, "X-Forwarded-Proto", proto);
    return headers;
  }

  /** A request for a synthetic site: to the gateway's /website/<site>/<path>. */
  function toGateway(req: http.IncomingMessage, res: http.ServerResponse, site: string, authority: string, proto: "http" | "https", path: string, host: string, port: number): void {
    const headers = gatewayHeaders(req, authority, proto);
    pass(req, res, gatewayAgent, { host: gatewayHost, port: gatewayPort, path: `${gatewayPrefix}/website/${site}${path}`, headers }, { method: req.method ?? "GET", host, port });
  }

  function onRequest(req: http.IncomingMessage, res: http.ServerResponse): void {
    const target = parseAbsoluteForm(req.url ?? "");
    if (!target) {
      const message = `not a proxy request: "${req.method} ${req.url}"; send an absolute http:// URL or CONNECT host:port`;
      log.write({ event: "error", error: message, client: req.socket.remoteAddress, method: req.method, status: 400 });
      answerResponse(res, 400, SiteProxyVerdict.badRequest, message);
      return;
    }
    const method = req.method ?? "GET";
    const route = router.route(target.host);
    if (route.kind === "synthetic") {
      toGateway(req, res, route.site, target.authority, "http", target.path, target.host, target.port);
    } else if (route.kind === "refused") {
      answerResponse(res, 403, SiteProxyVerdict.refused, refused(method, target.host, target.port, route.why));
    } else {
      const headers = endToEndHeaders(req.rawHeaders);
      if (!headers.some((_, i) => i % 2 === 0 && headers[i].toLowerCase() === "host")) headers.unshift("Host", target.authority);
      pass(req, res, hostAgent, { host: target.host, port: target.port, path: target.path, headers }, { method, host: target.host, port: target.port });
    }
  }

  /** A WebSocket (or other) upgrade: the request head written on a fresh connection, then bytes both ways. */
  async function upgrade(req: http.IncomingMessage, client: net.Socket, head: Buffer, open: () => Promise<net.Socket>, path: string, headers: string[], report: { host: string; port: number }): Promise<void> {
    client.on("error", () => client.destroy());
    let upstream: net.Socket;
    try {
      upstream = await open();
    } catch (err) {
      const reason = err instanceof ConnectFailure ? err.reason : "no answer";
      answerSocket(client, 502, SiteProxyVerdict.failed, failed(req.method ?? "GET", report.host, report.port, reason, (err as Error).message));
      return;
    }
    const kept = withoutHeader(headers, "upgrade");
    const upgradeTo = req.headers.upgrade ?? "websocket";
    let text = `${req.method} ${path} HTTP/1.1\r\n`;
    for (let i = 0; i < kept.length; i += 2) text += `${kept[i]}: ${kept[i + 1]}\r\n`;
    text += `Connection: Upgrade\r\nUpgrade: ${upgradeTo}\r\n\r\n`;
    upstream.write(text);
    if (head.length > 0) upstream.write(head);
    relay(client, upstream, idleTimeoutMs);
  }

  function onUpgradeThroughGateway(req: http.IncomingMessage, client: net.Socket, head: Buffer, site: string, authority: string, proto: "http" | "https", path: string, host: string, port: number): void {
    // Sec-WebSocket-* and the rest are end-to-end; only Connection/Upgrade are rebuilt for the new hop.
    const headers = gatewayHeaders(req, authority, proto);
    void upgrade(req, client, head, openGateway, `${gatewayPrefix}/website/${site}${path}`, headers, { host, port });
  }

  function onUpgrade(req: http.IncomingMessage, client: net.Socket, head: Buffer): void {
    const target = parseAbsoluteForm(req.url ?? "");
    if (!target) {
      answerSocket(client, 400, SiteProxyVerdict.badRequest, `not a proxy request: "${req.method} ${req.url}"`);
      return;
    }
    const route = router.route(target.host);
    if (route.kind === "synthetic") {
      onUpgradeThroughGateway(req, client, head, route.site, target.authority, "http", target.path, target.host, target.port);
    } else if (route.kind === "refused") {
      answerSocket(client, 403, SiteProxyVerdict.refused, refused(req.method ?? "GET", target.host, target.port, route.why));
    } else {
      const headers = endToEndHeaders(req.rawHeaders);
      void upgrade(req, client, head, async () => (await openLogged("HTTP", target.host, target.port)).socket, target.path, headers, target);
    }
  }

  /** The host as the browser's URL had it: the port only when it is not the scheme's default. */
  const tunnelAuthority = (t: SyntheticTunnel) => (t.port === (t.proto === "https" ? 443 : 80) ? t.host : `${t.host}:${t.port}`);

  // Requests from inside a tunnel to a synthetic name: the tunnel's name decides the site.
  const tunnels = new WeakMap<net.Socket, SyntheticTunnel>();
  const inner = http.createServer(serverOptions);
  inner.on("request", (req: http.IncomingMessage, res: http.ServerResponse) => {
    const tunnel = tunnels.get(req.socket);
    if (!tunnel) return answerResponse(res, 400, SiteProxyVerdict.badRequest, "no tunnel");
    const path = (req.url ?? "/").startsWith("/") ? (req.url ?? "/") : (parseAbsoluteForm(req.url ?? "")?.path ?? "/");
    toGateway(req, res, tunnel.site, tunnelAuthority(tunnel), tunnel.proto, path, tunnel.host, tunnel.port);
  });
  inner.on("upgrade", (req: http.IncomingMessage, client: net.Socket, head: Buffer) => {
    const tunnel = tunnels.get(client);
    if (!tunnel) return client.destroy();
    onUpgradeThroughGateway(req, client, head, tunnel.site, tunnelAuthority(tunnel), tunnel.proto, req.url ?? "/", tunnel.host, tunnel.port);
  });
  inner.on("clientError", (err: NodeJS.ErrnoException, socket: net.Socket) => onClientError(err, socket));

  /**
   * CONNECT to a synthetic name: answer 200, then serve the requests inside the tunnel from the gateway. A tunnel
   * that starts with a TLS handshake (https, wss) is answered as that name with a leaf from the env CA; one that
   * starts in the clear (Chromium tunnels ws:// through CONNECT too) is read as plain HTTP.
   */
  async function terminate(client: net.Socket, head: Buffer, site: string, host: string, port: number): Promise<void> {
    let context: tls.SecureContext;
    try {
      context = await ca.contextFor(host);
    } catch (err) {
      log.write({ event: "error", error: `issuing a certificate for ${host}: ${(err as Error).message}`, method: "CONNECT", host, port, status: 502 });
      answerSocket(client, 502, SiteProxyVerdict.failed, `cannot issue a certificate for ${host}`);
      return;
    }
    if (client.destroyed) return;
    const start = new Date();
    const readBefore = client.bytesRead;
    const writtenBefore = client.bytesWritten;
    client.write("HTTP/1.1 200 Connection established\r\n\r\n");

    // A computer that opens the tunnel and says nothing is let go after the idle timeout too.
    const silent = () => client.destroy();
    client.setTimeout(idleTimeoutMs);
    client.once("timeout", silent);

    const serve = (first: Buffer) => {
      client.setTimeout(0); // from here the conversation's own timer counts (TLS reads bypass the raw socket's)
      client.off("timeout", silent);
      client.pause();
      client.unshift(first); // a TLSSocket takes over bytes already read; the HTTP parser gets them on resume
      const tlsHandshake = first[0] === 0x16;
      const conversation: net.Socket = tlsHandshake
        ? new tls.TLSSocket(client, { isServer: true, secureContext: context, ALPNProtocols: ["http/1.1"] })
        : client;
      tunnels.set(conversation, { site, host, port, proto: tlsHandshake ? "https" : "http" });
      conversation.setTimeout(idleTimeoutMs);
      conversation.on("timeout", () => conversation.destroy());
      conversation.on("error", (err: NodeJS.ErrnoException) => {
        if (err.code !== "ECONNRESET" && err.code !== "EPIPE") {
          log.write({ event: "error", error: `${tlsHandshake ? "TLS" : "HTTP"} with the computer for ${host}: ${err.message}`, client: client.remoteAddress, method: "CONNECT", host, port });
        }
        conversation.destroy();
      });
      conversation.once("close", () => {
        client.destroy();
        log.write({
          event: "connection",
          method: "CONNECT",
          host,
          port,
          address: `${gatewayHost}:${gatewayPort}`,
          site,
          bytesToHost: client.bytesRead - readBefore,
          bytesFromHost: client.bytesWritten - writtenBefore,
          start: start.toISOString(),
          durationMs: Date.now() - start.getTime(),
        });
      });
      inner.emit("connection", conversation);
      if (!tlsHandshake) client.resume();
    };
    if (head.length > 0) serve(head);
    else client.once("data", serve);
  }

  /** CONNECT to a host the computer reaches: a byte tunnel, never decrypted. */
  async function tunnel(client: net.Socket, head: Buffer, host: string, port: number): Promise<void> {
    let upstream: Opened;
    try {
      upstream = await openLogged("CONNECT", host, port);
    } catch (err) {
      const reason = err instanceof ConnectFailure ? err.reason : "no answer";
      answerSocket(client, 502, SiteProxyVerdict.failed, failed("CONNECT", host, port, reason, (err as Error).message));
      return;
    }
    if (client.destroyed) {
      upstream.socket.destroy();
      return;
    }
    client.write("HTTP/1.1 200 Connection established\r\n\r\n");
    if (head.length > 0) upstream.socket.write(head);
    relay(client, upstream.socket, idleTimeoutMs, upstream.bulk);
  }

  function onConnect(req: http.IncomingMessage, client: net.Socket, head: Buffer): void {
    client.setNoDelay(true);
    client.on("error", () => client.destroy());
    const target = parseAuthority(req.url ?? "");
    if (!target) {
      const message = `CONNECT needs host:port, got "${req.url}"`;
      log.write({ event: "error", error: message, client: client.remoteAddress, method: "CONNECT", status: 400 });
      answerSocket(client, 400, SiteProxyVerdict.badRequest, message);
      return;
    }
    const route = router.route(target.host);
    if (route.kind === "synthetic") void terminate(client, head, route.site, target.host, target.port);
    else if (route.kind === "refused") answerSocket(client, 403, SiteProxyVerdict.refused, refused("CONNECT", target.host, target.port, route.why));
    else void tunnel(client, head, target.host, target.port);
  }

  /** A request node's parser refused (malformed request line, headers over 64 KiB, ...): 400 and a log line. */
  function onClientError(err: NodeJS.ErrnoException, socket: net.Socket): void {
    const code = err.code ?? "";
    if (code.startsWith("HPE_") && code !== "HPE_INVALID_EOF_STATE") {
      const message = code === "HPE_HEADER_OVERFLOW" ? `request headers larger than ${MAX_HEADER_BYTES} bytes` : `malformed request (${code}: ${err.message})`;
      log.write({ event: "error", error: message, client: socket.remoteAddress, status: 400 });
      answerSocket(socket, 400, SiteProxyVerdict.badRequest, message);
      return;
    }
    if (code !== "ECONNRESET" && code !== "EPIPE" && code !== "ERR_HTTP_REQUEST_TIMEOUT") log.write({ event: "error", error: err.message, client: socket.remoteAddress });
    socket.destroy();
  }

  const server = http.createServer(serverOptions);
  server.on("request", onRequest);
  server.on("connect", onConnect);
  server.on("upgrade", onUpgrade);
  server.on("clientError", onClientError);
  server.on("close", () => {
    hostAgent.destroy();
    gatewayAgent.destroy();
    inner.close();
  });
  return server;
}
