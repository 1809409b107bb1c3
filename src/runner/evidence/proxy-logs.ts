// Evidence-based reproducibility: which public hosts the computers actually contacted.
// The stack's live marks say what was *deployed*; a computer with `allow-all` (or an allowlist) can reach the
// public web with no live site declared, and such a run is no more reproducible than a live one. Each
// computer's site proxy logs a `connection` record per connection it made; every host in them that is neither
// one of the env's synthetic names nor a loopback/private address is a public host.
import { isIPv4, isIPv6 } from "node:net";
import { covers, isLocalhostName } from "../../protocol/host-names";
import { GatewayClient, type ProxyLogPiece } from "../../protocol/gateway-client";

export type { ProxyLogPiece };
import { parseLiveSiteProxyLog, type ConnectionRecord, type LogMark } from "../../protocol/site-proxy";

/** Fetches a computer's site-proxy log (JSON lines) through the gateway. */
export async function fetchProxyLog(gatewayUrl: string, token: string, computer: string): Promise<string> {
  return new GatewayClient(gatewayUrl, token).proxyLog(computer);
}

const LOG_READ_TIMEOUT_MS = 30_000;

/**
 * The part of a computer's site-proxy log asked for, through the gateway (GatewayClient.proxyLogPiece), bounded in
 * time: a proxy that stopped answering must not hold a follower.
 */
export async function fetchProxyLogPiece(
  gatewayUrl: string,
  token: string,
  computer: string,
  part: { from: number } | { last: number },
): Promise<ProxyLogPiece> {
  return new GatewayClient(gatewayUrl, token).proxyLogPiece(computer, part, AbortSignal.timeout(LOG_READ_TIMEOUT_MS));
}

/**
 * Ends every connection a computer's site proxy holds, to its browser and to hosts, and resolves once their
 * `connection` lines are in its log: a browser keeps idle connections open, and a connection is logged when it
 * ends. With `mark`, the proxy then marks the log (an episode begins, a self-test begins or ends). The number of
 * sockets ended, or undefined from a site proxy that cannot do this (an older image).
 */
export async function endProxyConnections(
  gatewayUrl: string,
  token: string,
  computer: string,
  mark?: LogMark,
): Promise<number | undefined> {
  return new GatewayClient(gatewayUrl, token).endConnections(computer, mark);
}

/**
 * Resolves once every computer's site-proxy log has stopped growing (two reads `quietMs` apart agree), or after
 * `timeoutMs`: connections a browser just closed are logged a moment later. Unreadable logs do not hold it up.
 */
export async function logsSettled(
  access: { gatewayUrl: string; controlToken: string },
  computers: string[],
  quietMs = 300,
  timeoutMs = 5_000,
): Promise<void> {
  const sizes = async () =>
    Promise.all(
      // Its last byte tells its size (Content-Range); a proxy that ignores Range sends it whole.
      computers.map((c) =>
        fetchProxyLogPiece(access.gatewayUrl, access.controlToken, c, { last: 1 }).then(
          (piece) => piece.size ?? piece.start + piece.bytes.length,
          () => -1,
        ),
      ),
    );
  const until = Date.now() + timeoutMs;
  let before = await sizes();
  while (Date.now() < until) {
    await new Promise((resolve) => setTimeout(resolve, quietMs));
    const now = await sizes();
    if (now.every((size, i) => size === before[i])) return;
    before = now;
  }
}

function ipv4Octets(address: string): number[] {
  return address.split(".").map(Number);
}

/**
 * True for IPv4/IPv6 addresses that do not route on the public internet: loopback, private, link-local, CGNAT,
 * unspecified.
 */
export function isNonPublicAddress(host: string): boolean {
  const bare = host.startsWith("[") && host.endsWith("]") ? host.slice(1, -1) : host;
  if (isIPv4(bare)) {
    const [a, b] = ipv4Octets(bare);
    return (
      a === 0 ||
      a === 10 ||
      a === 127 ||
      (a === 100 && b >= 64 && b <= 127) ||
      (a === 169 && b === 254) ||
      (a === 172 && b >= 16 && b <= 31) ||
      (a === 192 && b === 168)
    );
  }
  if (isIPv6(bare)) {
    const lower = bare.toLowerCase();
    const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(lower);
    if (mapped) return isNonPublicAddress(mapped[1]);
    return lower === "::1" || lower === "::" || /^f[cd]/.test(lower) || /^fe[89ab]/.test(lower);
  }
  return false;
}

/**
 * True when a connection to `host` went to the public web: not a synthetic site (the proxy marks those with
 * `site`, and the env's synthetic domain patterns cover them), not a localhost name, not a non-public address.
 */
export function isPublicHost(host: string, syntheticDomains: readonly string[]): boolean {
  const name = host.toLowerCase().replace(/\.$/, "");
  if (isLocalhostName(name) || isNonPublicAddress(name)) return false;
  return !syntheticDomains.some((pattern) => covers(pattern, name));
}

/** The public hosts (sorted, unique) in a site-proxy log, and how many connections it records. */
export function publicHostsInLog(
  logText: string,
  syntheticDomains: readonly string[],
): { connections: number; publicHosts: string[] } {
  const connections = parseLiveSiteProxyLog(logText).filter((r): r is ConnectionRecord => r.event === "connection");
  const hosts = new Set<string>();
  for (const connection of connections) {
    if (connection.site !== undefined) continue;
    if (isPublicHost(connection.host, syntheticDomains)) hosts.add(connection.host.toLowerCase().replace(/\.$/, ""));
  }
  return { connections: connections.length, publicHosts: [...hosts].sort() };
}
