// The forward proxy itself: CONNECT and absolute-form HTTP, routed by the computer's site table and reaching.
// Synthetic names go to the gateway's /website/<site>/ (TLS terminated with a leaf from the env CA); other hosts
// are tunnelled or forwarded when the computer reaches them and the address dialled passes the address check;
// every answer the proxy gives itself carries X-Agentenv-Site-Proxy.
import { randomBytes } from "node:crypto";
import * as http from "node:http";
import * as http2 from "node:http2";
import { isIP } from "node:net";
import type * as net from "node:net";
import * as tls from "node:tls";
import type { SecretTokens } from "../protocol/auth";
import { SiteProxyVerdict } from "../protocol/site-proxy";
import type { AddressCheck } from "../protocol/address-check";
import type { CertificateAuthority } from "./ca";
import { SITE_PROXY_CA_PATH, SITE_PROXY_HEADER } from "../protocol/site-proxy";
import { AddressRefused, addressOf, ConnectFailure, type Connector, normalizeHost, type Opened } from "./connect";
import {
  BrokenAnswer,
  connectorAgent,
  type Destination,
  forward,
  type ExchangeTap,
  type ForwardHooks,
  forwardUpgrade,
  RequestSlots,
  type UpgradeHooks,
} from "./forward";
import { requestFramingProblem, upgradeFramingProblem } from "./framing";
import { OpenConnections } from "./connections";
import { answerStream, forwardStream, forwardWebSocket, H2_SERVER_OPTIONS, type H2Request, readH2Request } from "./h2";
import type { EventLog } from "./log";
import {
  answerResponse,
  answerSocket,
  endToEndHeaders,
  formatAuthority,
  headerValues,
  MAX_HEADER_BYTES,
  parseAbsoluteForm,
  parseAuthority,
  serverOptions,
} from "./messages";
import { covers } from "../protocol/host-names";
import { REPLAY_HEADER, REPLAY_NEAREST_HEADER } from "../protocol/replay-server-config";
import { Scrubber } from "../protocol/scrub";
import type { RequestRecorder } from "./recorder";
import { endedByRelay, relay } from "./relay";
import type { Router } from "./routing";

export interface ProxyOptions {
  router: Router;
  connector: Connector;
  /** Decides which addresses a host the computer names may be dialled at (never applied to the gateway). */
  check: AddressCheck;
  ca: CertificateAuthority;
  log: EventLog;
  gateway: URL;
  idleTimeoutMs: number;
  /** A connection whose request head is not complete this long after it began is dropped. */
  headTimeoutMs: number;
  /** Where the proxy's sockets, to the computer and to hosts, are held so they can be ended together. */
  connections?: OpenConnections;
  /** The computer's own control token, when it has one: no request the proxy sends on carries it, in any form. */
  secrets?: SecretTokens;
  /** The request log, when the proxy keeps one: every exchange it forwards is recorded there. */
  recorder?: RequestRecorder;
  /**
   * Recording live hosts (the router marks them): the certificates their TLS is verified against, and the host
   * patterns whose cookies' values the log keeps (every other recorded host's are redacted); `trustFor`: further
   * certificates, each trusted for the host patterns it names alone.
   */
  record?: { trust: string[]; keepCredentials: string[]; trustFor?: { hosts: string[]; pem: string }[] };
  /**
   * The sites served from a recording (the gateway's frontend for them is a replay server): an answer of theirs
   * marked a miss gets a `replay-miss` line. Only these: any other site's marker is its own words, not evidence.
   */
  replayed?: readonly string[];
}

export interface SyntheticTunnel {
  /** The synthetic site; undefined for a live host the proxy opens to record, whose requests go to the host itself. */
  site: string | undefined;
  host: string;
  port: number;
  /** What the computer speaks inside the tunnel: TLS (terminated here) or plain HTTP. */
  proto: "http" | "https";
}

/** One request as its log lines name it. */
interface Exchange {
  /** Unique in the log: the `request` line's id, which the request log's entry names. */
  id?: string;
  /** The exchange's recording in the request log. */
  tap?: ExchangeTap;
  method: string;
  host: string;
  port: number;
  site?: string;
  /** The Host header the computer sent, when it sent one. */
  hostHeader?: string;
  /** The URL asked for, as the request log names it. */
  url?: string;
}

interface Failure {
  status: number;
  verdict: SiteProxyVerdict;
  message: string;
}

/** Headers the proxy writes itself on a request to the gateway (the browser's Host goes in X-Forwarded-Host). */
const WRITTEN_FOR_THE_GATEWAY: ReadonlySet<string> = new Set([
  "host",
  "content-length",
  "x-forwarded-host",
  "x-forwarded-proto",
]);
/** Headers the proxy writes itself on a request to a host. */
const WRITTEN_FOR_A_HOST: ReadonlySet<string> = new Set(["host", "content-length"]);

/** Connections to the gateway a proxy holds at most (requests beyond them wait for one to be free). */
export const GATEWAY_CONNECTIONS = 32;

/** Creates the proxy's HTTP server (not yet listening). */
export function createProxyServer(options: ProxyOptions): http.Server {
  const { router, connector, check, ca, log, gateway, idleTimeoutMs, headTimeoutMs, secrets } = options;
  const connections = options.connections ?? new OpenConnections();
  const gatewayHost = normalizeHost(gateway.hostname);
  const gatewayPort = Number(gateway.port || 80);
  const gatewayPrefix = gateway.pathname.replace(/\/$/, "");
  const { recorder } = options;
  // Exchange ids: this process's own prefix (a proxy started again counts from 1 anew) and a count.
  const idPrefix = randomBytes(4).toString("hex");
  let exchanges = 0;
  const connectionIds = new WeakMap<object, string>();
  let connectionCount = 0;
  /** The request log's name for a connection of the computer's (a socket, or an HTTP/2 session's socket). */
  const connectionId = (socket: object): string => {
    let id = connectionIds.get(socket);
    if (id === undefined) connectionIds.set(socket, (id = `${idPrefix}-c${++connectionCount}`));
    return id;
  };

  /** The exchange `x` with its id and, with a request log, its recording begun. */
  function recorded(x: Exchange, url: string, httpVersion: string, rawHeaders: string[], connection: object): Exchange {
    const id = `${idPrefix}-${++exchanges}`;
    if (recorder === undefined) return { ...x, id, url };
    // A live host's credentials (its session) stay out of the log unless the config keeps that host's.
    const live = x.site === undefined;
    const tap = recorder.begin({
      logId: id,
      method: x.method,
      url,
      httpVersion,
      rawHeaders,
      connection: connectionId(connection),
      ...(live && !keepCredentials.some((pattern) => covers(pattern, x.host)) ? { redactCredentials: true } : {}),
    });
    return { ...x, id, url, tap };
  }

  /** The proxy's own answer to an exchange, in its recording. */
  function recordProxyAnswer(x: Exchange, f: Failure): void {
    if (x.tap === undefined) return;
    x.tap.response({
      status: f.status,
      statusText: http.STATUS_CODES[f.status] ?? "",
      httpVersion: "HTTP/1.1",
      rawHeaders: ["Content-Type", "text/plain; charset=utf-8", SITE_PROXY_HEADER, f.verdict],
    });
    x.tap.responseChunk(Buffer.from(f.message + "\n"));
    x.tap.finish("proxy answer");
  }

  /** Opens a connection to a host the computer reaches and writes its `connection` line when it closes. */
  async function openLogged(method: "CONNECT" | "HTTP", host: string, port: number): Promise<Opened> {
    const start = new Date();
    const opened = await connector.open(host, port, { bulkReads: method === "CONNECT", check });
    const { socket, address } = opened;
    connections.track(socket);
    socket.setTimeout(idleTimeoutMs);
    // A tunnel's relay ends its own idle sockets; a socket that carries requests ends here, answered or not.
    if (method === "HTTP")
      socket.once("timeout", () => socket.destroy(new Error(`no traffic for ${idleTimeoutMs} ms`)));
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

  /** A connection to a recorded live host: TLS over a logged connection, the host's certificate verified. */
  async function openRecorded(host: string, port: number): Promise<net.Socket> {
    const { socket } = await openLogged("HTTP", host, port);
    const secure = tls.connect({
      socket,
      ...(isIP(host) === 0 ? { servername: host } : {}),
      ca: trustFor(host),
      ALPNProtocols: ["http/1.1"],
    });
    await new Promise<void>((resolve, reject) => {
      secure.once("secureConnect", resolve);
      secure.once("error", (err) => {
        socket.destroy();
        reject(new Error(`TLS with ${host}: ${err.message}`));
      });
    });
    return secure;
  }
  /** The certificates a recorded host's TLS is verified against: the trust store, and what is trusted for it alone. */
  function trustFor(host: string): string[] {
    const trust = options.record?.trust ?? [...tls.rootCertificates];
    const own = (options.record?.trustFor ?? []).filter((t) => t.hosts.some((pattern) => covers(pattern, host)));
    return own.length === 0 ? trust : [...trust, ...own.map((t) => t.pem)];
  }
  const recordedAgent = connectorAgent(openRecorded, idleTimeoutMs);
  const keepCredentials = (options.record?.keepCredentials ?? []).map(normalizeHost);
  // HTTP/2 lets one connection carry 128 requests at once, where a browser held itself to 32 connections to a proxy:
  // the gateway, shared by every computer, gets at most this many of this computer's requests at a time, the rest
  // waiting their turn here, on connections kept alive and reused.
  const gatewayAgent = connectorAgent(openGateway, idleTimeoutMs);
  const gatewaySlots = new RequestSlots(GATEWAY_CONNECTIONS);

  /** What the computer is told when its request could not be sent on, and the log line that says why. */
  function failure(err: Error, x: Exchange): Failure {
    const authority = formatAuthority(x.host, x.port, -1);
    if (err instanceof AddressRefused) {
      log.write({ event: "refused", method: x.method, host: x.host, port: x.port, address: err.address, why: err.why });
      return {
        status: 403,
        verdict: SiteProxyVerdict.refused,
        message: `${authority} is refused: ${err.address} is ${err.why}`,
      };
    }
    if (err instanceof ConnectFailure) {
      log.write({
        event: "failed",
        method: x.method,
        host: x.host,
        port: x.port,
        reason: err.reason,
        error: err.message,
      });
      return {
        status: 502,
        verdict: SiteProxyVerdict.failed,
        message: `${authority} ${err.reason === "no answer" ? "does not answer" : "does not resolve"}: ${err.message}`,
      };
    }
    log.write({ event: "error", error: err.message, method: x.method, host: x.host, port: x.port, status: 502 });
    return { status: 502, verdict: SiteProxyVerdict.failed, message: `${authority}: ${err.message}` };
  }

  function refusedByRoute(x: Exchange, why: string): Failure {
    const address = addressOf(x.host);
    log.write({
      event: "refused",
      method: x.method,
      host: x.host,
      port: x.port,
      ...(address !== undefined ? { address } : {}),
      why,
    });
    return {
      status: 403,
      verdict: SiteProxyVerdict.refused,
      message: `${formatAuthority(x.host, x.port, -1)} is refused: ${why}`,
    };
  }

  /** The exchange's one `request` line: the status the computer got, or how it went away before an answer. */
  function logRequest(x: Exchange, status: number | undefined, endedBy?: string): void {
    log.write({
      event: "request",
      ...(x.id !== undefined ? { id: x.id } : {}),
      method: x.method,
      host: x.host,
      port: x.port,
      ...(x.site ? { site: x.site } : {}),
      ...(x.hostHeader !== undefined ? { hostHeader: x.hostHeader } : {}),
      ...(status !== undefined ? { status } : {}),
      ...(endedBy !== undefined ? { endedBy } : {}),
    });
  }

  const replayed = new Set(options.replayed ?? []);
  const scrubber = new Scrubber(secrets, []);
  /**
   * The exchange's `replay-miss` line, when a replayed site's replay server answered it as a miss: the method, the
   * URL, and the nearest recorded URL the server named (the gateway passes that header from replay servers alone).
   */
  function logReplayMiss(x: Exchange, status: number, headers: http.IncomingHttpHeaders | undefined): void {
    if (x.site === undefined || !replayed.has(x.site) || status !== 404 || headers === undefined) return;
    if (headers[REPLAY_HEADER.toLowerCase()] !== "miss") return;
    const nearest = headers[REPLAY_NEAREST_HEADER.toLowerCase()];
    log.write({
      event: "replay-miss",
      ...(x.id !== undefined ? { id: x.id } : {}),
      site: x.site,
      method: x.method,
      url: scrubber.url((x.url ?? "").slice(0, 2048)),
      ...(typeof nearest === "string" ? { nearest: scrubber.url(nearest.slice(0, 2048)) } : {}),
    });
  }
  /** The exchange's lines once the computer has its answer. */
  function logAnswer(x: Exchange, status: number, headers?: http.IncomingHttpHeaders): void {
    logRequest(x, status);
    logReplayMiss(x, status, headers);
  }

  function badRequest(client: net.Socket, message: string, method?: string): Failure {
    log.write({
      event: "error",
      error: message,
      client: client.remoteAddress,
      ...(method ? { method } : {}),
      status: 400,
    });
    return { status: 400, verdict: SiteProxyVerdict.badRequest, message };
  }

  function forwardHooks(res: http.ServerResponse, x: Exchange): ForwardHooks {
    return {
      ...(x.tap ? { tap: x.tap } : {}),
      answered: (status, headers) => logAnswer(x, status, headers),
      abandoned: (endedBy) => logRequest(x, undefined, endedBy),
      failed: (err, settled) => {
        if (settled) {
          res.destroy();
          return;
        }
        const f = failure(err, x);
        // A broken answer leaves nothing to trust about the exchange: the computer's connection ends too.
        answerResponse(res, f.status, f.verdict, f.message, err instanceof BrokenAnswer);
        logRequest(x, f.status);
        recordProxyAnswer(x, f);
      },
    };
  }

  function upgradeHooks(client: net.Socket, x: Exchange, open: () => Promise<net.Socket>): UpgradeHooks {
    return {
      open,
      ...(x.tap ? { tap: x.tap } : {}),
      answered: (status, headers) => logAnswer(x, status, headers),
      abandoned: (endedBy) => logRequest(x, undefined, endedBy),
      failed: (err) => {
        const f = failure(err, x);
        answerSocket(client, f.status, f.verdict, f.message);
        logRequest(x, f.status);
        recordProxyAnswer(x, f);
      },
    };
  }

  /** The request's own headers for the gateway: the gateway's Host, and the browser's in X-Forwarded-Host/-Proto. */
  function gatewayDestination(
    rawHeaders: string[],
    site: string,
    authority: string,
    proto: "http" | "https",
    path: string,
  ): Destination {
    const headers = endToEndHeaders(rawHeaders, WRITTEN_FOR_THE_GATEWAY, secrets);
    return {
      host: gatewayHost,
      port: gatewayPort,
      path: `${gatewayPrefix}/website/${site}${path}`,
      headers: ["Host", gateway.host, ...headers, "X-Forwarded-Host", authority, "X-Forwarded-Proto", proto],
    };
  }

  /**
   * A host's request with the Host that was checked: a proxy replaces whatever Host header came with an
   * absolute-form request by the target's own (RFC 9112 3.2.2), so a conflicting one cannot pick another virtual
   * host at the same address.
   */
  function hostDestination(req: http.IncomingMessage, host: string, port: number, path: string): Destination {
    const headers = endToEndHeaders(req.rawHeaders, WRITTEN_FOR_A_HOST, secrets);
    return { host, port, path, headers: ["Host", formatAuthority(host, port), ...headers] };
  }

  function exchange(req: http.IncomingMessage, host: string, port: number, site?: string): Exchange {
    const hostHeader = headerValues(req.rawHeaders, "host")[0];
    return {
      method: req.method ?? "GET",
      host,
      port,
      ...(site ? { site } : {}),
      ...(hostHeader !== undefined ? { hostHeader } : {}),
    };
  }

  /** The host as the browser's URL had it: the port only when it is not the scheme's default. */
  const tunnelAuthority = (t: SyntheticTunnel) => formatAuthority(t.host, t.port, t.proto === "https" ? 443 : 80);

  /** The path of a request inside a synthetic tunnel (origin form, or the path of an absolute-form target). */
  const tunnelPath = (url: string) => (url.startsWith("/") ? url : (parseAbsoluteForm(url)?.path ?? "/"));

  // Conversations inside a tunnel to a synthetic name, served by this same server: the tunnel's name decides the site.
  const tunnels = new WeakMap<net.Socket, SyntheticTunnel>();

  // Connections whose framing broke: whatever the parser read after the broken request is never acted on.
  const condemned = new WeakSet<net.Socket>();

  /**
   * Where one request (or upgrade) goes, decided once from its tunnel or its absolute-form target: to the
   * gateway as a synthetic site's page, to a host the computer reaches, or answered by the proxy itself.
   */
  type RequestRoute =
    | { to: "gateway"; x: Exchange; destination: Destination }
    | { to: "host"; x: Exchange; destination: Destination }
    | { to: "recorded"; x: Exchange; destination: Destination }
    | { to: "answer"; failure: Failure };

  function routeRequest(req: http.IncomingMessage, socket: net.Socket, notProxyHint: string): RequestRoute {
    const tunnel = tunnels.get(socket);
    const version = `HTTP/${req.httpVersion}`;
    if (tunnel) {
      const path = tunnelPath(req.url ?? "/");
      const url = `${tunnel.proto}://${tunnelAuthority(tunnel)}${path}`;
      const x = recorded(exchange(req, tunnel.host, tunnel.port, tunnel.site), url, version, req.rawHeaders, socket);
      if (tunnel.site === undefined) {
        const headers = endToEndHeaders(req.rawHeaders, WRITTEN_FOR_A_HOST, secrets);
        const destination = {
          host: tunnel.host,
          port: tunnel.port,
          path,
          headers: ["Host", tunnelAuthority(tunnel), ...headers],
        };
        return { to: tunnel.proto === "https" ? "recorded" : "host", x, destination };
      }
      return {
        to: "gateway",
        x,
        destination: gatewayDestination(req.rawHeaders, tunnel.site, tunnelAuthority(tunnel), tunnel.proto, path),
      };
    }
    const target = parseAbsoluteForm(req.url ?? "");
    if (!target)
      return {
        to: "answer",
        failure: badRequest(socket, `not a proxy request: "${req.method} ${req.url}"${notProxyHint}`, req.method),
      };
    const route = router.route(target.host);
    const url = `http://${target.authority}${target.path}`;
    if (route.kind === "synthetic") {
      const x = recorded(exchange(req, target.host, target.port, route.site), url, version, req.rawHeaders, socket);
      return {
        to: "gateway",
        x,
        destination: gatewayDestination(req.rawHeaders, route.site, target.authority, "http", target.path),
      };
    }
    if (route.kind === "refused")
      return { to: "answer", failure: refusedByRoute(exchange(req, target.host, target.port), route.why) };
    return {
      to: "host",
      x: recorded(exchange(req, target.host, target.port), url, version, req.rawHeaders, socket),
      destination: hostDestination(req, target.host, target.port, target.path),
    };
  }

  /**
   * The env CA's certificate, asked of the proxy itself (origin form, outside any tunnel): a browser in a pod of its
   * own fetches it to trust the proxy's leaves (kubernetes target). It is public; the key never leaves the proxy.
   */
  function asksForCa(req: http.IncomingMessage): boolean {
    return (
      !tunnels.has(req.socket) && req.url === SITE_PROXY_CA_PATH && (req.method === "GET" || req.method === "HEAD")
    );
  }

  function answerCa(res: http.ServerResponse): void {
    res.writeHead(200, { "Content-Type": "application/x-pem-file", "Content-Length": Buffer.byteLength(ca.certPem) });
    res.end(res.req.method === "HEAD" ? undefined : ca.certPem);
  }

  function onRequest(req: http.IncomingMessage, res: http.ServerResponse): void {
    if (condemned.has(req.socket)) return void res.destroy();
    const problem = requestFramingProblem(req);
    if (problem) {
      condemned.add(req.socket);
      const f = badRequest(req.socket, `malformed request: ${problem}`, req.method);
      return answerResponse(res, f.status, f.verdict, f.message, true);
    }
    if (asksForCa(req)) return answerCa(res);
    const route = routeRequest(req, req.socket, "; send an absolute http:// URL or CONNECT host:port");
    if (route.to === "answer")
      return answerResponse(res, route.failure.status, route.failure.verdict, route.failure.message);
    if (route.to === "gateway")
      return forward(req, res, gatewayAgent, route.destination, forwardHooks(res, route.x), gatewaySlots);
    const agent = route.to === "recorded" ? recordedAgent : hostAgent;
    forward(req, res, agent, route.destination, forwardHooks(res, route.x));
  }

  function onUpgrade(req: http.IncomingMessage, client: net.Socket, early: Buffer): void {
    client.on("error", () => client.destroy());
    if (condemned.has(client)) return void client.destroy();
    const problem = upgradeFramingProblem(req);
    if (problem) {
      const f = badRequest(client, `malformed request: ${problem}`, req.method);
      return answerSocket(client, f.status, f.verdict, f.message);
    }
    const route = routeRequest(req, client, "");
    if (route.to === "answer")
      return answerSocket(client, route.failure.status, route.failure.verdict, route.failure.message);
    const { host, port } = route.destination;
    const open =
      route.to === "gateway"
        ? openGateway
        : route.to === "recorded"
          ? () => openRecorded(host, port)
          : async () => (await openLogged("HTTP", host, port)).socket;
    forwardUpgrade(req, client, early, route.destination, idleTimeoutMs, upgradeHooks(client, route.x, open));
  }

  /**
   * CONNECT to a synthetic name: answer 200, then serve the requests inside the tunnel from the gateway. A tunnel
   * that starts with a TLS handshake (https, wss) is answered as that name with a leaf from the env CA; one that
   * starts in the clear (Chromium tunnels ws:// through CONNECT too) is read as plain HTTP.
   */
  async function terminate(client: net.Socket, head: Buffer, target: Omit<SyntheticTunnel, "proto">): Promise<void> {
    const { site, host, port } = target;
    let context: tls.SecureContext;
    try {
      context = await ca.contextFor(host);
    } catch (err) {
      log.write({
        event: "error",
        error: `issuing a certificate for ${host}: ${(err as Error).message}`,
        method: "CONNECT",
        host,
        port,
        status: 502,
      });
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
      // HTTP/2 first: one connection for a whole page. The context is the name's own, cached with its leaf, so a
      // browser coming back resumes its TLS session with a ticket only that name's context can read.
      const conversation: net.Socket = tlsHandshake
        ? new tls.TLSSocket(client, { isServer: true, secureContext: context, ALPNProtocols: ["h2", "http/1.1"] })
        : client;
      const tunnel: SyntheticTunnel = { site, host, port, proto: tlsHandshake ? "https" : "http" };
      tunnels.set(conversation, tunnel);
      conversation.setTimeout(idleTimeoutMs);
      conversation.on("timeout", () => conversation.destroy());
      conversation.on("error", (err: NodeJS.ErrnoException) => {
        if (err.code !== "ECONNRESET" && err.code !== "EPIPE") {
          log.write({
            event: "error",
            error: `${tlsHandshake ? "TLS" : "HTTP"} with the computer for ${host}: ${err.message}`,
            client: client.remoteAddress,
            method: "CONNECT",
            host,
            port,
          });
        }
        conversation.destroy();
      });
      conversation.once("close", () => {
        client.destroy();
        const protocol = tlsHandshake ? (conversation as tls.TLSSocket).alpnProtocol || "http/1.1" : undefined;
        log.write({
          event: "connection",
          method: "CONNECT",
          host,
          port,
          // A recorded live host's line names the host: its requests went there on connections of their own.
          address: site === undefined ? formatAuthority(host, port) : `${gatewayHost}:${gatewayPort}`,
          ...(site !== undefined ? { site } : { recorded: true as const }),
          ...(protocol === "h2" || protocol === "http/1.1" ? { protocol } : {}),
          bytesToHost: client.bytesRead - readBefore,
          bytesFromHost: client.bytesWritten - writtenBefore,
          start: start.toISOString(),
          durationMs: Date.now() - start.getTime(),
        });
      });
      if (!tlsHandshake) {
        // This server parses the conversation like any connection of its own, head timeout included.
        server.emit("connection", conversation);
        client.resume();
        return;
      }
      // The handshake counts against the head timeout, as the head it comes before does.
      const handshake = setTimeout(() => {
        log.write({
          event: "error",
          error: `no TLS handshake within ${headTimeoutMs} ms; connection dropped`,
          client: client.remoteAddress,
          host,
          port,
        });
        conversation.destroy();
      }, headTimeoutMs);
      conversation.once("close", () => clearTimeout(handshake));
      conversation.once("secure", () => {
        clearTimeout(handshake);
        if ((conversation as tls.TLSSocket).alpnProtocol === "h2") serveH2(conversation as tls.TLSSocket, tunnel);
        else server.emit("connection", conversation);
      });
    };
    if (head.length > 0) serve(head);
    else client.once("data", serve);
  }

  // HTTP/2 conversations inside tunnels to synthetic names. The server only makes the sessions (it never listens);
  // each session is bound to its tunnel as it is made, so a stream is only ever routed by its own tunnel's name.
  const h2server = http2.createServer(H2_SERVER_OPTIONS);
  const COMPUTER_ENDED = "computer's side ended";
  let arriving: { tunnel: SyntheticTunnel; conversation: tls.TLSSocket } | undefined;
  h2server.on("session", (session: http2.ServerHttp2Session) => {
    const bound = arriving;
    if (!bound) return void session.destroy();
    session.on("error", () => session.destroy());
    // The session's own timer: with HTTP/2 reading the socket itself, the socket's timer would not see traffic.
    session.setTimeout(idleTimeoutMs, () => session.destroy());
    // The computer is done sending (its side of the connection ended): the streams under way finish, then it closes.
    // The proxy's sockets are half-open ones, so nothing else would close it. A WebSocket's stream never finishes
    // then: it ends with a close the computer can no longer send, so the session, and the tunnel's connection line,
    // would wait for the idle timeout. Those streams are cut instead.
    const webSockets = new Set<http2.ServerHttp2Stream>();
    bound.conversation.once("end", () => {
      session.close();
      // An error, so the relay ends the destination's side too (its line says why).
      for (const stream of webSockets)
        stream.destroy(Object.assign(new Error(COMPUTER_ENDED), { code: COMPUTER_ENDED }));
    });
    const client = bound.conversation.remoteAddress;
    // As for an HTTP/1.1 connection, the first request must come within the head timeout.
    const firstRequest = setTimeout(() => {
      log.write({
        event: "error",
        error: `no complete request head within ${headTimeoutMs} ms; connection dropped`,
        client,
        host: bound.tunnel.host,
        port: bound.tunnel.port,
      });
      session.destroy();
    }, headTimeoutMs);
    session.once("stream", () => clearTimeout(firstRequest));
    session.once("close", () => clearTimeout(firstRequest));
    session.on(
      "stream",
      (stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders, flags: number, rawHeaders: string[]) => {
        const request = readH2Request(headers, rawHeaders, flags);
        if (request.protocol === "websocket") {
          webSockets.add(stream);
          stream.once("close", () => webSockets.delete(stream));
        }
        onStream(stream, request, bound.tunnel, client);
      },
    );
  });

  function serveH2(conversation: tls.TLSSocket, tunnel: SyntheticTunnel): void {
    connections.track(conversation);
    conversation.setTimeout(0);
    // A TLS server marks its sockets connected once secure (node's tls.Server does it as it emits
    // secureConnection); a session waits for a socket still marked connecting, so this one is marked by hand.
    (conversation as tls.TLSSocket & { secureConnecting: boolean }).secureConnecting = false;
    arriving = { tunnel, conversation };
    try {
      h2server.emit("connection", conversation);
    } finally {
      arriving = undefined;
    }
  }

  /** Why a stream's request is not sent on (answered 400), or undefined. */
  function streamProblem(r: H2Request): string | undefined {
    // Node's client writes a method upper-cased: `connect` would reach the gateway as CONNECT, past a check that
    // read it as something else, and the log would name a method the wire never carried. So CONNECT is known in
    // any case, and a method not already in upper case (methods are case-sensitive, RFC 9110 9.1) is not sent on.
    const upperCased = r.method.toUpperCase();
    if (upperCased === "CONNECT" && r.protocol === undefined) return "CONNECT inside a tunnel";
    if (r.method !== upperCased)
      return `a method "${r.method}" not in upper case (the next hop would get "${upperCased}", another method)`;
    if (r.protocol !== undefined && r.protocol !== "websocket")
      return `extended CONNECT for "${r.protocol}"; only websocket is relayed`;
    if (r.scheme !== "https") return `:scheme must be https inside TLS, got "${r.scheme}"`;
    if (r.path === undefined || !r.path.startsWith("/")) return `:path must be an absolute path, got "${r.path}"`;
    if (r.authority === undefined) return "a request needs :authority (or Host)";
    if (r.hostHeader !== undefined && r.hostHeader !== r.authority)
      return `a Host header "${r.hostHeader}" that differs from :authority "${r.authority}"`;
    return undefined;
  }

  /** One HTTP/2 stream inside a synthetic tunnel: its own name's site, or refused. */
  function onStream(
    stream: http2.ServerHttp2Stream,
    r: H2Request,
    tunnel: SyntheticTunnel,
    client: string | undefined,
  ): void {
    stream.on("error", () => stream.destroy());
    const problem = streamProblem(r);
    if (problem) {
      log.write({
        event: "error",
        error: `malformed request: ${problem}`,
        client,
        method: r.method,
        host: tunnel.host,
        port: tunnel.port,
        status: 400,
      });
      return answerStream(stream, 400, SiteProxyVerdict.badRequest, `malformed request: ${problem}`);
    }
    // A connection is for its tunnel's name alone (no coalescing, RFC 9113 9.1.1): another authority is misdirected.
    const target = parseAuthority(r.authority!, 443);
    if (!target || target.host !== tunnel.host || target.port !== tunnel.port) {
      const why = `this connection is for ${formatAuthority(tunnel.host, tunnel.port, 443)} only`;
      const address = target ? addressOf(target.host) : undefined;
      log.write({
        event: "refused",
        method: r.method,
        host: target?.host ?? r.authority!,
        port: target?.port ?? 443,
        ...(address !== undefined ? { address } : {}),
        why,
      });
      return answerStream(stream, 421, SiteProxyVerdict.refused, `${r.authority} is misdirected: ${why}`);
    }
    const x = recorded(
      { method: r.method, host: tunnel.host, port: tunnel.port, site: tunnel.site, hostHeader: r.authority },
      `https://${r.authority}${r.path}`,
      "HTTP/2.0",
      r.received,
      stream.session?.socket ?? stream,
    );
    const live = tunnel.site === undefined;
    const destination: Destination = live
      ? {
          host: tunnel.host,
          port: tunnel.port,
          path: r.path!,
          headers: ["Host", tunnelAuthority(tunnel), ...r.headers],
        }
      : gatewayDestination(r.headers, tunnel.site!, tunnelAuthority(tunnel), "https", r.path!);
    if (r.protocol === "websocket") {
      return forwardWebSocket(stream, destination, idleTimeoutMs, {
        open: live ? () => openRecorded(tunnel.host, tunnel.port) : openGateway,
        ...(x.tap ? { tap: x.tap } : {}),
        answered: (status, headers) => logAnswer(x, status, headers),
        abandoned: (endedBy) => logRequest(x, undefined, endedBy),
        failed: (err) => {
          const f = failure(err, x);
          answerStream(stream, f.status, f.verdict, f.message);
          logRequest(x, f.status);
          recordProxyAnswer(x, f);
        },
      });
    }
    forwardStream(
      stream,
      r,
      live ? recordedAgent : gatewayAgent,
      destination,
      {
        ...(x.tap ? { tap: x.tap } : {}),
        answered: (status, headers) => logAnswer(x, status, headers),
        abandoned: (endedBy) => logRequest(x, undefined, endedBy),
        failed: (err, settled) => {
          if (settled) return void stream.close(http2.constants.NGHTTP2_INTERNAL_ERROR);
          const f = failure(err, x);
          answerStream(stream, f.status, f.verdict, f.message);
          logRequest(x, f.status);
          recordProxyAnswer(x, f);
        },
      },
      live ? undefined : gatewaySlots,
    );
  }

  /** CONNECT to a host the computer reaches: a byte tunnel, never decrypted. */
  async function tunnel(client: net.Socket, head: Buffer, target: { host: string; port: number }): Promise<void> {
    const { host, port } = target;
    let upstream: Opened;
    try {
      upstream = await openLogged("CONNECT", host, port);
    } catch (err) {
      const f = failure(err as Error, { method: "CONNECT", host, port });
      answerSocket(client, f.status, f.verdict, f.message);
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
    if (condemned.has(client)) return void client.destroy();
    if (tunnels.has(client)) {
      const f = badRequest(client, "CONNECT inside a tunnel", "CONNECT");
      return answerSocket(client, f.status, f.verdict, f.message);
    }
    const target = parseAuthority(req.url ?? "");
    if (!target) {
      const f = badRequest(client, `CONNECT needs host:port, got "${req.url}"`, "CONNECT");
      return answerSocket(client, f.status, f.verdict, f.message);
    }
    const route = router.route(target.host);
    if (route.kind === "synthetic")
      void terminate(client, head, { site: route.site, host: target.host, port: target.port });
    else if (route.kind === "forward" && route.record)
      void terminate(client, head, { site: undefined, host: target.host, port: target.port });
    else if (route.kind === "refused") {
      const f = refusedByRoute({ method: "CONNECT", host: target.host, port: target.port }, route.why);
      answerSocket(client, f.status, f.verdict, f.message);
    } else void tunnel(client, head, target);
  }

  /** A request node's parser refused (malformed, headers over 64 KiB, a head that never completes): a log line. */
  function onClientError(err: NodeJS.ErrnoException, socket: net.Socket): void {
    const code = err.code ?? "";
    if (code.startsWith("HPE_") && code !== "HPE_INVALID_EOF_STATE") {
      const message =
        code === "HPE_HEADER_OVERFLOW"
          ? `request headers larger than ${MAX_HEADER_BYTES} bytes`
          : `malformed request (${code}: ${err.message})`;
      log.write({ event: "error", error: message, client: socket.remoteAddress, status: 400 });
      answerSocket(socket, 400, SiteProxyVerdict.badRequest, message);
      return;
    }
    if (code === "ERR_HTTP_REQUEST_TIMEOUT") {
      const tunnel = tunnels.get(socket);
      log.write({
        event: "error",
        error: `no complete request head within ${headTimeoutMs} ms; connection dropped`,
        client: socket.remoteAddress,
        ...(tunnel ? { host: tunnel.host, port: tunnel.port } : {}),
      });
    } else if (code !== "ECONNRESET" && code !== "EPIPE")
      log.write({ event: "error", error: err.message, client: socket.remoteAddress });
    socket.destroy();
  }

  const server = http.createServer(serverOptions(headTimeoutMs, idleTimeoutMs));
  server.on("connection", (socket: net.Socket) => connections.track(socket));
  server.on("request", onRequest);
  server.on("connect", onConnect);
  server.on("upgrade", onUpgrade);
  server.on("clientError", onClientError);
  server.on("close", () => {
    hostAgent.destroy();
    gatewayAgent.destroy();
    recordedAgent.destroy();
  });
  return server;
}
