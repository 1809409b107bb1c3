// Where exchanges go, as connections: the gateway (a kept-alive pool shared by every request to a synthetic site, at
// most GATEWAY_CONNECTIONS requests at once), hosts the computer reaches (each connection checked by the address
// check and logged with a `connection` line when it closes), and recorded live hosts (TLS over such a connection,
// the host's certificate verified).
import type * as http from "node:http";
import { isIP } from "node:net";
import type * as net from "node:net";
import * as tls from "node:tls";
import type { AddressCheck } from "../protocol/address-check";
import { covers } from "../protocol/host-names";
import type { Connector, Opened } from "./connect";
import type { OpenConnections } from "./connections";
import { connectorAgent, RequestSlots } from "./forward";
import type { EventLog } from "./log";
import { endedByRelay } from "./relay";

/** Connections to the gateway a proxy holds at most (requests beyond them wait for one to be free). */
export const GATEWAY_CONNECTIONS = 32;

/** Where a route sends its exchanges: the gateway, a host, or a recorded live host. */
export type Upstream = "gateway" | "host" | "recorded";

export interface UpstreamOptions {
  connector: Connector;
  /** Decides which addresses a host the computer names may be dialled at (never applied to the gateway). */
  check: AddressCheck;
  log: EventLog;
  gateway: { host: string; port: number };
  idleTimeoutMs: number;
  connections: OpenConnections;
  /** The certificates a recorded host's TLS is verified against, and further ones trusted for some hosts alone. */
  trust: string[] | undefined;
  trustFor: { hosts: string[]; pem: string }[];
}

export class Upstreams {
  // HTTP/2 lets one connection carry 128 requests at once, where a browser held itself to 32 connections to a proxy:
  // the gateway, shared by every computer, gets at most this many of this computer's requests at a time, the rest
  // waiting their turn here, on connections kept alive and reused.
  readonly gatewaySlots = new RequestSlots(GATEWAY_CONNECTIONS);
  private readonly agents: Record<Upstream, http.Agent>;

  constructor(private readonly options: UpstreamOptions) {
    const { idleTimeoutMs } = options;
    this.agents = {
      gateway: connectorAgent(() => this.openGateway(), idleTimeoutMs),
      host: connectorAgent(async (host, port) => (await this.openLogged("HTTP", host, port)).socket, idleTimeoutMs),
      recorded: connectorAgent((host, port) => this.openRecorded(host, port), idleTimeoutMs),
    };
  }

  /** The kept-alive pool of requests to `to`. */
  agent(to: Upstream): http.Agent {
    return this.agents[to];
  }

  /** A fresh connection to `to` (an upgraded connection is never pooled). */
  open(to: Upstream, host: string, port: number): Promise<net.Socket> {
    if (to === "gateway") return this.openGateway();
    if (to === "recorded") return this.openRecorded(host, port);
    return this.openLogged("HTTP", host, port).then((opened) => opened.socket);
  }

  /** Opens a connection to a host the computer reaches and writes its `connection` line when it closes. */
  async openLogged(method: "CONNECT" | "HTTP", host: string, port: number): Promise<Opened> {
    const { connector, check, connections, idleTimeoutMs, log } = this.options;
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

  async openGateway(): Promise<net.Socket> {
    const { connector, gateway, idleTimeoutMs } = this.options;
    const { socket } = await connector.open(gateway.host, gateway.port);
    socket.setTimeout(idleTimeoutMs);
    socket.once("timeout", () => socket.destroy(new Error(`no traffic for ${idleTimeoutMs} ms`)));
    return socket;
  }

  /** A connection to a recorded live host: TLS over a logged connection, the host's certificate verified. */
  async openRecorded(host: string, port: number): Promise<net.Socket> {
    const { socket } = await this.openLogged("HTTP", host, port);
    const secure = tls.connect({
      socket,
      ...(isIP(host) === 0 ? { servername: host } : {}),
      ca: this.trustFor(host),
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

  /** Ends the pools' kept-alive connections. */
  destroy(): void {
    for (const agent of Object.values(this.agents)) agent.destroy();
  }

  /** The certificates a recorded host's TLS is verified against: the trust store, and what is trusted for it alone. */
  private trustFor(host: string): string[] {
    const trust = this.options.trust ?? [...tls.rootCertificates];
    const own = this.options.trustFor.filter((t) => t.hosts.some((pattern) => covers(pattern, host)));
    return own.length === 0 ? trust : [...trust, ...own.map((t) => t.pem)];
  }
}
