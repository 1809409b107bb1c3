// Where a request for a host goes, decided from the computer's site table and reaching alone (docs/design.md "Site
// proxy"). A synthetic name always wins, also inside a wildcard the computer reaches; beyond synthetic names, allow-all
// forwards any host, an allowlist only its own names (never an address or a localhost name), none nothing.
import { covers, isAddress, isLocalhostName, isWildcard } from "../protocol/host-names";
import { normalizeHost } from "./connect";

/** `record`: the host is a live site's the proxy opens to record (its HTTPS terminated here, never tunnelled). */
export type Route =
  { kind: "synthetic"; site: string } | { kind: "forward"; record?: true } | { kind: "refused"; why: string };

export type Reach = "allow-all" | "none" | string[];

export interface Router {
  route(host: string): Route;
}

export function createRouter(sites: Record<string, string[]>, reach: Reach, record: string[] = []): Router {
  const recorded = record.map(normalizeHost);
  const forward = (host: string): Route =>
    recorded.some((pattern) => covers(pattern, host)) ? { kind: "forward", record: true } : { kind: "forward" };
  const exact = new Map<string, string>();
  // Longest suffix first, so the narrowest wildcard that covers a name decides its site.
  const wildcards: { pattern: string; site: string }[] = [];
  for (const [site, names] of Object.entries(sites)) {
    for (const name of names.map(normalizeHost)) {
      if (isWildcard(name)) wildcards.push({ pattern: name, site });
      else exact.set(name, site);
    }
  }
  wildcards.sort((a, b) => b.pattern.length - a.pattern.length);
  const allowlist = Array.isArray(reach) ? reach.map(normalizeHost) : [];

  return {
    route(rawHost) {
      const host = normalizeHost(rawHost);
      const site = exact.get(host) ?? wildcards.find((w) => covers(w.pattern, host))?.site;
      if (site !== undefined) return { kind: "synthetic", site };
      if (reach === "allow-all") return forward(host);
      if (reach === "none") return { kind: "refused", why: "this computer reaches only its synthetic sites" };
      if (isAddress(host)) return { kind: "refused", why: "an allowlist never reaches an address" };
      if (isLocalhostName(host)) return { kind: "refused", why: "an allowlist never reaches a localhost name" };
      if (allowlist.some((pattern) => covers(pattern, host))) return forward(host);
      return { kind: "refused", why: "not in this computer's allowlist" };
    },
  };
}
