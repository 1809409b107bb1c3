// Where one request goes, decided once from its tunnel or its absolute-form target (docs/design.md "Site proxy"):
// to the gateway's /website/<site>/ as a synthetic site's page, to a host the computer reaches, to a recorded live
// host, or answered by the proxy itself. With it, the request's own headers for that hop: the gateway gets the
// browser's Host in X-Forwarded-Host, a host gets the Host that was checked, and the computer's control token never
// goes on in any header.
import type * as http from "node:http";
import type * as net from "node:net";
import type { SecretTokens } from "../protocol/auth";
import { SiteProxyVerdict } from "../protocol/site-proxy";
import { addressOf, normalizeHost } from "./connect";
import type { Asked, Exchange, Failure } from "./exchange";
import { badRequest, refusedByRoute } from "./failures";
import type { Destination } from "./forward";
import type { H2Request } from "./h2";
import { endToEndHeaders, formatAuthority, headerValues, parseAbsoluteForm, parseAuthority } from "./messages";
import type { Router } from "./routing";
import type { Upstream } from "./upstreams";

export interface SyntheticTunnel {
  /** The synthetic site; undefined for a live host the proxy opens to record, whose requests go to the host itself. */
  site: string | undefined;
  host: string;
  port: number;
  /** What the computer speaks inside the tunnel: TLS (terminated here) or plain HTTP. */
  proto: "http" | "https";
}

/** One request's route: the exchange it begins and where it goes, or the proxy's own answer. */
export type RequestRoute =
  { to: Upstream; x: Exchange; asked: Asked; destination: Destination } | { to: "answer"; failure: Failure };

/** A CONNECT's route: its conversation served here (a synthetic or recorded name), a byte tunnel, or refused. */
export type ConnectRoute =
  { to: "terminate"; site: string | undefined } | { to: "tunnel" } | { to: "answer"; failure: Failure };

/** Headers the proxy writes itself on a request to the gateway (the browser's Host goes in X-Forwarded-Host). */
const WRITTEN_FOR_THE_GATEWAY: ReadonlySet<string> = new Set([
  "host",
  "content-length",
  "x-forwarded-host",
  "x-forwarded-proto",
]);
/** Headers the proxy writes itself on a request to a host. */
const WRITTEN_FOR_A_HOST: ReadonlySet<string> = new Set(["host", "content-length"]);

/** The host as the browser's URL had it: the port only when it is not the scheme's default. */
const tunnelAuthority = (t: SyntheticTunnel) => formatAuthority(t.host, t.port, t.proto === "https" ? 443 : 80);

/** The path of a request inside a synthetic tunnel (origin form, or the path of an absolute-form target). */
const tunnelPath = (url: string) => (url.startsWith("/") ? url : (parseAbsoluteForm(url)?.path ?? "/"));

/** What an HTTP/1.1 request asked of `host`:`port`, as its log lines name it. */
function exchangeOf(req: http.IncomingMessage, host: string, port: number, site?: string): Exchange {
  const hostHeader = headerValues(req.rawHeaders, "host")[0];
  return {
    method: req.method ?? "GET",
    host,
    port,
    ...(site ? { site } : {}),
    ...(hostHeader !== undefined ? { hostHeader } : {}),
  };
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

export class Routes {
  readonly gatewayHost: string;
  readonly gatewayPort: number;
  private readonly gatewayPrefix: string;

  constructor(
    private readonly router: Router,
    private readonly gateway: URL,
    private readonly secrets: SecretTokens | undefined,
  ) {
    this.gatewayHost = normalizeHost(gateway.hostname);
    this.gatewayPort = Number(gateway.port || 80);
    this.gatewayPrefix = gateway.pathname.replace(/\/$/, "");
  }

  /** A CONNECT to `target`, by the computer's site table and reaching. */
  forConnect(target: { host: string; port: number }): ConnectRoute {
    const route = this.router.route(target.host);
    if (route.kind === "synthetic") return { to: "terminate", site: route.site };
    if (route.kind === "forward" && route.record) return { to: "terminate", site: undefined };
    if (route.kind === "refused")
      return { to: "answer", failure: refusedByRoute({ method: "CONNECT", ...target }, route.why) };
    return { to: "tunnel" };
  }

  /**
   * An HTTP/1.1 request (or upgrade) on `socket`: inside `tunnel` its name decides; outside one, its absolute-form
   * target does (`notProxyHint` ends the answer to a request that is not a proxy's).
   */
  forRequest(
    req: http.IncomingMessage,
    socket: net.Socket,
    tunnel: SyntheticTunnel | undefined,
    notProxyHint: string,
  ): RequestRoute {
    const version = `HTTP/${req.httpVersion}`;
    if (tunnel) {
      const path = tunnelPath(req.url ?? "/");
      const x = exchangeOf(req, tunnel.host, tunnel.port, tunnel.site);
      const asked = this.asked(`${tunnel.proto}://${tunnelAuthority(tunnel)}${path}`, version, req.rawHeaders, socket);
      if (tunnel.site === undefined) {
        const headers = endToEndHeaders(req.rawHeaders, WRITTEN_FOR_A_HOST, this.secrets);
        const destination = {
          host: tunnel.host,
          port: tunnel.port,
          path,
          headers: ["Host", tunnelAuthority(tunnel), ...headers],
        };
        return { to: tunnel.proto === "https" ? "recorded" : "host", x, asked, destination };
      }
      const destination = this.gatewayDestination(
        req.rawHeaders,
        tunnel.site,
        tunnelAuthority(tunnel),
        tunnel.proto,
        path,
      );
      return { to: "gateway", x, asked, destination };
    }
    const target = parseAbsoluteForm(req.url ?? "");
    if (!target) {
      const message = `not a proxy request: "${req.method} ${req.url}"${notProxyHint}`;
      return { to: "answer", failure: badRequest(socket.remoteAddress, message, req.method) };
    }
    const route = this.router.route(target.host);
    const asked = this.asked(`http://${target.authority}${target.path}`, version, req.rawHeaders, socket);
    if (route.kind === "synthetic") {
      const x = exchangeOf(req, target.host, target.port, route.site);
      const destination = this.gatewayDestination(req.rawHeaders, route.site, target.authority, "http", target.path);
      return { to: "gateway", x, asked, destination };
    }
    if (route.kind === "refused")
      return { to: "answer", failure: refusedByRoute(exchangeOf(req, target.host, target.port), route.why) };
    // A proxy replaces whatever Host header came with an absolute-form request by the target's own (RFC 9112 3.2.2),
    // so a conflicting one cannot pick another virtual host at the same address.
    const headers = endToEndHeaders(req.rawHeaders, WRITTEN_FOR_A_HOST, this.secrets);
    const destination = {
      host: target.host,
      port: target.port,
      path: target.path,
      headers: ["Host", formatAuthority(target.host, target.port), ...headers],
    };
    return { to: "host", x: exchangeOf(req, target.host, target.port), asked, destination };
  }

  /**
   * One HTTP/2 stream inside `tunnel`: its own name's site or recorded host, else refused. A connection is for its
   * tunnel's name alone (no coalescing, RFC 9113 9.1.1): another authority is misdirected.
   */
  forStream(r: H2Request, tunnel: SyntheticTunnel, connection: object, client: string | undefined): RequestRoute {
    const problem = streamProblem(r);
    if (problem) {
      const message = `malformed request: ${problem}`;
      const failure: Failure = {
        status: 400,
        verdict: SiteProxyVerdict.badRequest,
        message,
        line: {
          event: "error",
          error: message,
          client,
          method: r.method,
          host: tunnel.host,
          port: tunnel.port,
          status: 400,
        },
      };
      return { to: "answer", failure };
    }
    const target = parseAuthority(r.authority!, 443);
    if (!target || target.host !== tunnel.host || target.port !== tunnel.port) {
      const why = `this connection is for ${formatAuthority(tunnel.host, tunnel.port, 443)} only`;
      const address = target ? addressOf(target.host) : undefined;
      const failure: Failure = {
        status: 421,
        verdict: SiteProxyVerdict.refused,
        message: `${r.authority} is misdirected: ${why}`,
        line: {
          event: "refused",
          method: r.method,
          host: target?.host ?? r.authority!,
          port: target?.port ?? 443,
          ...(address !== undefined ? { address } : {}),
          why,
        },
      };
      return { to: "answer", failure };
    }
    const x = { method: r.method, host: tunnel.host, port: tunnel.port, site: tunnel.site, hostHeader: r.authority };
    const asked = this.asked(`https://${r.authority}${r.path}`, "HTTP/2.0", r.received, connection);
    if (tunnel.site === undefined) {
      // The control token comes out here as on every other path: a stream's headers reach a host as they are else.
      const headers = [
        "Host",
        tunnelAuthority(tunnel),
        ...endToEndHeaders(r.headers, WRITTEN_FOR_A_HOST, this.secrets),
      ];
      return {
        to: "recorded",
        x,
        asked,
        destination: { host: tunnel.host, port: tunnel.port, path: r.path!, headers },
      };
    }
    const destination = this.gatewayDestination(r.headers, tunnel.site, tunnelAuthority(tunnel), "https", r.path!);
    return { to: "gateway", x, asked, destination };
  }

  private asked(url: string, httpVersion: string, rawHeaders: string[], connection: object): Asked {
    return { url, httpVersion, rawHeaders, connection };
  }

  /** The request's own headers for the gateway: the gateway's Host, and the browser's in X-Forwarded-Host/-Proto. */
  private gatewayDestination(
    rawHeaders: string[],
    site: string,
    authority: string,
    proto: "http" | "https",
    path: string,
  ): Destination {
    const headers = endToEndHeaders(rawHeaders, WRITTEN_FOR_THE_GATEWAY, this.secrets);
    return {
      host: this.gatewayHost,
      port: this.gatewayPort,
      path: `${this.gatewayPrefix}/website/${site}${path}`,
      headers: ["Host", this.gateway.host, ...headers, "X-Forwarded-Host", authority, "X-Forwarded-Proto", proto],
    };
  }
}
