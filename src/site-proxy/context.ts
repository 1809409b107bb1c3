// What the proxy's passes share: the route, the upstreams, the exchanges and their observers, and which tunnel each
// conversation of the computer's is in. The transports take it; createProxyServer (proxy.ts) makes it.
import type * as net from "node:net";
import type { CertificateAuthority } from "./ca";
import type { OpenConnections } from "./connections";
import type { Exchange, Exchanges, Failure } from "./exchange";
import { failureOf } from "./failures";
import type { ForwardHooks } from "./forward";
import type { EventLog } from "./log";
import type { Routes, SyntheticTunnel } from "./request-route";
import type { Upstreams } from "./upstreams";

/** The computer's conversations: the tunnel each is in, and those whose framing broke. */
export class Conversations {
  // Conversations inside a tunnel to a synthetic name, served by this same server: the tunnel's name decides the site.
  private readonly tunnels = new WeakMap<net.Socket, SyntheticTunnel>();
  // Connections whose framing broke: whatever the parser read after the broken request is never acted on.
  private readonly condemned = new WeakSet<net.Socket>();

  tunnelOf(socket: net.Socket): SyntheticTunnel | undefined {
    return this.tunnels.get(socket);
  }

  inTunnel(socket: net.Socket, tunnel: SyntheticTunnel): void {
    this.tunnels.set(socket, tunnel);
  }

  condemn(socket: net.Socket): void {
    this.condemned.add(socket);
  }

  isCondemned(socket: net.Socket): boolean {
    return this.condemned.has(socket);
  }
}

export interface ProxyContext {
  log: EventLog;
  ca: CertificateAuthority;
  idleTimeoutMs: number;
  /** A connection whose request head (or TLS handshake) is not complete this long after it began is dropped. */
  headTimeoutMs: number;
  connections: OpenConnections;
  routes: Routes;
  upstreams: Upstreams;
  exchanges: Exchanges;
  conversations: Conversations;
}

/** How an exchange on its way tells that it was answered or abandoned: its observers hear it. */
export function endingHooks(exchanges: Exchanges, x: Exchange): Omit<ForwardHooks, "failed"> {
  return {
    ...(x.tap ? { tap: x.tap } : {}),
    answered: (status, headers) => exchanges.ended(x, { how: "answered", status, headers }),
    abandoned: (endedBy) => exchanges.ended(x, { how: "abandoned", endedBy }),
  };
}

/** The proxy's own answer to an exchange that could not be sent on (its observers told); the caller sends it. */
export function failed(exchanges: Exchanges, x: Exchange, err: Error): Failure {
  const failure = failureOf(err, x);
  exchanges.ended(x, { how: "failed", failure });
  return failure;
}
