// Where the gateway's listeners bind. A listener's host may be a DNS name: in a deploy it is an
// alias that exists only on the one network the listener is for, so the addresses it resolves
// to inside the gateway are that network's, and the listener is bound there alone. Docker's
// DNS may not answer for the first moments of a container, so a failed lookup is retried for
// `resolveTimeoutMs` before the start fails.
import { lookup as dnsLookup } from "node:dns/promises";
import { isIP } from "node:net";
import { CONFIG_ENV, type GatewayConfig } from "./config";
import { ServiceConfigError } from "../protocol/service-config";

export type Listener = "published" | "browse";

/** One socket to listen on. */
export interface Binding {
  listener: Listener;
  /** As configured (a name or an address). */
  host: string;
  /** The address bound. */
  address: string;
  port: number;
}

export type Lookup = (host: string) => Promise<string[]>;

const systemLookup: Lookup = async (host) =>
  (await dnsLookup(host, { all: true, verbatim: true })).map((entry) => entry.address);
const RETRY_MS = 250;

/**
 * The addresses `host` resolves to, retried until `timeoutMs`; throws ServiceConfigError naming `field` when it never
 * does.
 */
export async function resolveHost(
  field: string,
  host: string,
  timeoutMs: number,
  lookup: Lookup = systemLookup,
): Promise<string[]> {
  if (isIP(host)) return [host];
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    let failure: string;
    try {
      const addresses = [...new Set(await lookup(host))];
      if (addresses.length > 0) return addresses;
      failure = "no addresses";
    } catch (error) {
      failure = (error as NodeJS.ErrnoException).code ?? (error as Error).message;
    }
    if (Date.now() + RETRY_MS > deadline) {
      throw new ServiceConfigError(
        `${field}: cannot resolve ${JSON.stringify(host)} (${failure}) after ${timeoutMs} ms; use a name that resolves inside the gateway, or an address`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, RETRY_MS));
  }
}

/** Every socket the config asks for, names resolved. */
export async function resolveBindings(config: GatewayConfig, lookup?: Lookup): Promise<Binding[]> {
  const bindings: Binding[] = [];
  const published = await resolveHost(`${CONFIG_ENV}.listen.host`, config.listen.host, config.resolveTimeoutMs, lookup);
  for (const address of published)
    bindings.push({ listener: "published", host: config.listen.host, address, port: config.listen.port });
  const hosts = config.browse?.hosts ?? [];
  const resolved = await Promise.all(
    hosts.map((host, i) => resolveHost(`${CONFIG_ENV}.browse.hosts.${i}`, host, config.resolveTimeoutMs, lookup)),
  );
  hosts.forEach((host, i) => {
    for (const address of resolved[i]) bindings.push({ listener: "browse", host, address, port: config.browse!.port });
  });
  return bindings;
}
