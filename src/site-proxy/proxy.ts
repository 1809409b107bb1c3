// The forward proxy itself: CONNECT and absolute-form HTTP, routed by the computer's site table and reaching.
// Synthetic names go to the gateway's /website/<site>/ (TLS terminated with a leaf from the env CA); other hosts
// are tunnelled or forwarded when the computer reaches them and the address dialled passes the address check;
// every answer the proxy gives itself carries X-Agentenv-Site-Proxy.
//
// A request passes through small modules, each with one reason to change: the listener here (node's HTTP server,
// and what its parser refuses), the route decided once (request-route.ts), the transports that carry it
// (http1-transport.ts, h2-transport.ts, websocket-transport.ts, tunnel-transport.ts) to its upstream (upstreams.ts),
// and the exchange it is (exchange.ts), whose ending the observers hear: the proxy log (proxy-log.ts) and the
// request log (request-log-observer.ts).
import * as http from "node:http";
import type * as net from "node:net";
import type { AddressCheck } from "../protocol/address-check";
import type { SecretTokens } from "../protocol/auth";
import { SiteProxyVerdict } from "../protocol/site-proxy";
import type { CertificateAuthority } from "./ca";
import type { Connector } from "./connect";
import { OpenConnections } from "./connections";
import { Conversations, type ProxyContext } from "./context";
import { type ExchangeObserver, Exchanges } from "./exchange";
import { H2Conversations } from "./h2-transport";
import { http1Requests } from "./http1-transport";
import type { EventLog } from "./log";
import { answerSocket, MAX_HEADER_BYTES, serverOptions } from "./messages";
import { ProxyLogObserver } from "./proxy-log";
import type { RequestRecorder } from "./recorder";
import { RequestLogObserver } from "./request-log-observer";
import { Routes } from "./request-route";
import type { Router } from "./routing";
import { connects } from "./tunnel-transport";
import { Upstreams } from "./upstreams";
import { http1Upgrades } from "./websocket-transport";

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

/** Creates the proxy's HTTP server (not yet listening). */
export function createProxyServer(options: ProxyOptions): http.Server {
  const { log, secrets, recorder, idleTimeoutMs, headTimeoutMs } = options;
  const connections = options.connections ?? new OpenConnections();
  const routes = new Routes(options.router, options.gateway, secrets);
  const observers: ExchangeObserver[] = [new ProxyLogObserver(log, options.replayed ?? [], secrets)];
  if (recorder) observers.push(new RequestLogObserver(recorder, options.record?.keepCredentials ?? []));
  const upstreams = new Upstreams({
    connector: options.connector,
    check: options.check,
    log,
    gateway: { host: routes.gatewayHost, port: routes.gatewayPort },
    idleTimeoutMs,
    connections,
    trust: options.record?.trust,
    trustFor: options.record?.trustFor ?? [],
  });
  const ctx: ProxyContext = {
    log,
    ca: options.ca,
    idleTimeoutMs,
    headTimeoutMs,
    connections,
    routes,
    upstreams,
    exchanges: new Exchanges(observers),
    conversations: new Conversations(),
  };
  const server = http.createServer(serverOptions(headTimeoutMs, idleTimeoutMs));
  const h2 = new H2Conversations(ctx);
  server.on("connection", (socket: net.Socket) => connections.track(socket));
  server.on("request", http1Requests(ctx));
  server.on("upgrade", http1Upgrades(ctx));
  server.on("connect", connects(ctx, { http1: (c) => server.emit("connection", c), h2: (c, t) => h2.serve(c, t) }));
  server.on("clientError", (err: NodeJS.ErrnoException, socket: net.Socket) => refusedByParser(ctx, err, socket));
  server.on("close", () => upstreams.destroy());
  return server;
}

/** A request node's parser refused (malformed, headers over 64 KiB, a head that never completes): a log line. */
function refusedByParser(ctx: ProxyContext, err: NodeJS.ErrnoException, socket: net.Socket): void {
  const { log, headTimeoutMs } = ctx;
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
    const tunnel = ctx.conversations.tunnelOf(socket);
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
