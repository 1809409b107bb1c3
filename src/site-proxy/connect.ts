// Opening a connection to a host: the name lookup and every connection attempt share one deadline, and a
// name's addresses are tried in turn. The reason a connection could not be opened is what the client's 502 and
// the `failed` log line say.
import * as dns from "node:dns";
import * as net from "node:net";
import { isAddress } from "../protocol/host-names";
import type { FailedReason } from "../protocol/site-proxy";
import type { AddressCheck } from "../protocol/address-check";
import { BulkReads } from "./bulk-reads";

/** A connection that could not be opened, and why. */
export class ConnectFailure extends Error {
  constructor(
    readonly reason: FailedReason,
    message: string,
  ) {
    super(message);
  }
}

/** A host that resolves to an address the address check refuses: nothing was dialled. */
export class AddressRefused extends Error {
  constructor(
    readonly address: string,
    readonly why: string,
  ) {
    super(`${address} is ${why}`);
  }
}

export interface OpenOptions {
  /** Read into a shared buffer (see bulk-reads.ts): for byte relays, not for sockets a parser reads. */
  bulkReads?: boolean;
  /**
   * Checked on every address the host stands for before any is dialled: when one is refused the host is refused
   * (AddressRefused), so a name with one allowed and one refused address never falls through to the refused one.
   */
  check?: AddressCheck;
}

export interface Opened {
  socket: net.Socket;
  /** The address connected to. */
  address: string;
  /** Where the socket's reads go, when it was opened with `bulkReads` (its 'data' events never fire then). */
  bulk?: BulkReads;
}

export interface ConnectorOptions {
  connectTimeoutMs: number;
  /** Static answers, checked before DNS. */
  resolve?: Record<string, string[]>;
  /** `host:port` DNS servers to ask instead of the system's resolver. */
  dnsServers?: string[];
}

export interface Connector {
  /** Resolves `host` (unless it is an address) and connects to one of its addresses before the deadline. */
  open(host: string, port: number, options?: OpenOptions): Promise<Opened>;
  /** The addresses `host` stands for, or a ConnectFailure with reason `doesn't resolve`. */
  lookup(host: string, deadline: number): Promise<string[]>;
}

/** A lowercase host without brackets or a trailing dot: how names are compared everywhere in the proxy. */
export function normalizeHost(host: string): string {
  const bare = host.startsWith("[") && host.endsWith("]") ? host.slice(1, -1) : host;
  return bare.toLowerCase().replace(/\.$/, "");
}

/**
 * The address a normalized host is, when it is one: itself, or the dotted form of a spelling a browser reads as
 * an IPv4 address (`127.1`, `0x7f.1`, `2130706433`, `017700000001`); undefined for a name.
 */
export function addressOf(host: string): string | undefined {
  if (net.isIP(host)) return host;
  if (isAddress(host)) return new URL(`http://${host}/`).hostname;
  return undefined;
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** Runs `work` but gives up at `deadline` with `onLate`'s failure; the work's late result is ignored. */
function beforeDeadline<T>(work: Promise<T>, deadline: number, onLate: () => Error): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(onLate()), Math.max(0, deadline - Date.now()));
    work.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (err) => {
        clearTimeout(timer);
        reject(err);
      },
    );
  });
}

/** One connection attempt to one address, given up after `timeoutMs`. */
function attempt(address: string, port: number, timeoutMs: number, bulk: BulkReads | undefined): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({
      host: address,
      port,
      allowHalfOpen: true,
      noDelay: true,
      ...(bulk ? { onread: bulk.onread } : {}),
    });
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`connect ${address}:${port}: no answer within ${timeoutMs} ms`));
    }, timeoutMs);
    socket.once("connect", () => {
      clearTimeout(timer);
      socket.removeAllListeners("error");
      resolve(socket);
    });
    socket.once("error", (err) => {
      clearTimeout(timer);
      socket.destroy();
      reject(err);
    });
  });
}

export function createConnector(options: ConnectorOptions): Connector {
  const staticAnswers = new Map(
    Object.entries(options.resolve ?? {}).map(([name, addresses]) => [normalizeHost(name), addresses]),
  );
  let resolver: dns.promises.Resolver | undefined;
  if (options.dnsServers) {
    resolver = new dns.promises.Resolver({ timeout: Math.min(options.connectTimeoutMs, 5_000), tries: 2 });
    resolver.setServers(options.dnsServers);
  }

  async function ask(host: string): Promise<string[]> {
    if (resolver) {
      const [v4, v6] = await Promise.allSettled([resolver.resolve4(host), resolver.resolve6(host)]);
      const addresses = [
        ...(v4.status === "fulfilled" ? v4.value : []),
        ...(v6.status === "fulfilled" ? v6.value : []),
      ];
      if (addresses.length === 0) {
        const err =
          v4.status === "rejected" ? v4.reason : v6.status === "rejected" ? v6.reason : new Error("no addresses");
        throw new ConnectFailure("doesn't resolve", errorText(err));
      }
      return addresses;
    }
    try {
      return (await dns.promises.lookup(host, { all: true })).map((answer) => answer.address);
    } catch (err) {
      throw new ConnectFailure("doesn't resolve", errorText(err));
    }
  }

  async function lookup(host: string, deadline: number): Promise<string[]> {
    const name = normalizeHost(host);
    const address = addressOf(name);
    if (address !== undefined) return [address];
    const known = staticAnswers.get(name);
    if (known) return known;
    return beforeDeadline(
      ask(name),
      deadline,
      () =>
        new ConnectFailure(
          "doesn't resolve",
          `lookup of ${name}: no answer within the ${options.connectTimeoutMs} ms deadline`,
        ),
    );
  }

  async function open(host: string, port: number, openOptions: OpenOptions = {}): Promise<Opened> {
    const deadline = Date.now() + options.connectTimeoutMs;
    const addresses = await lookup(host, deadline);
    if (openOptions.check) {
      for (const address of addresses) {
        const why = openOptions.check(address);
        if (why !== undefined) throw new AddressRefused(address, why);
      }
    }
    const errors: string[] = [];
    for (let i = 0; i < addresses.length; i++) {
      const remaining = deadline - Date.now();
      if (remaining <= 0) break;
      // Each address left gets an equal share of the time left, so one that hangs cannot use up the deadline
      // of the ones after it; the last gets everything that remains.
      const share = Math.ceil(remaining / (addresses.length - i));
      try {
        const bulk = openOptions.bulkReads ? new BulkReads() : undefined;
        const socket = await attempt(addresses[i], port, share, bulk);
        return { socket, address: addresses[i], bulk };
      } catch (err) {
        errors.push(errorText(err));
      }
    }
    if (errors.length < addresses.length)
      errors.push(
        `no time left for ${addresses.slice(errors.length).join(", ")} within ${options.connectTimeoutMs} ms`,
      );
    throw new ConnectFailure("no answer", errors.join("; "));
  }

  return { open, lookup };
}
