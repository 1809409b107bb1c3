// Which site a name belongs to (docs/design.md "Rules": claims, synthetic wins, live hosts).
import { covers, overlaps } from "../protocol/host-names";
import { problem, quote } from "./problems";
import { replayedNames, servedLive } from "./replay";
import type { Problem, WebsiteConfig } from "./types";

interface Claim {
  site: string;
  key: "domains" | "allowHosts";
  index: number;
  name: string;
}

function sortedSites(websites: Record<string, WebsiteConfig>): [string, WebsiteConfig][] {
  return Object.entries(websites).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
}

function domainClaims(websites: Record<string, WebsiteConfig>, live: boolean): Claim[] {
  return sortedSites(websites)
    .filter(([, website]) => website.live === live)
    .flatMap(([site, website]) =>
      website.domains.map((name, index) => ({ site, key: "domains" as const, index, name })),
    );
}

/**
 * Two synthetic sites, or two live sites, may not claim one name: equal names, or one covering the other
 * (`*.shop.test` and `a.shop.test` both claim `a.shop.test`). A synthetic name inside a live one is allowed
 * (synthetic wins, see liveHosts). The problem is reported on the later site's name, pointing at the earlier.
 */
export function claimProblems(websites: Record<string, WebsiteConfig>): Problem[] {
  const problems: Problem[] = [];
  for (const live of [false, true]) {
    const claims = domainClaims(websites, live);
    const kind = live ? "live" : "synthetic";
    claims.forEach((later, i) => {
      const earlier = claims.slice(0, i).find((c) => c.site !== later.site && overlaps(c.name, later.name));
      if (earlier === undefined) return;
      const as = earlier.name === later.name ? "" : ` (as ${quote(earlier.name)})`;
      problems.push(
        problem(
          ["websites", later.site, "domains", later.index],
          `${quote(later.name)} is also claimed by ${kind} site ${earlier.site}${as}; two ${kind} sites cannot claim one name`,
        ),
      );
    });
  }
  return problems;
}

/**
 * The synthetic name that wins `host` (equal to it or covering it), if any. A replayed live site's names count as
 * synthetic: the computers route them to the gateway as they route a synthetic site's.
 */
export function syntheticClaimOf(
  websites: Record<string, WebsiteConfig>,
  host: string,
): { site: string; name: string } | undefined {
  for (const [site, website] of sortedSites(websites)) {
    if (servedLive(website)) continue;
    const names = website.live ? replayedNames(website) : website.domains;
    const name = names.find((d) => covers(d, host));
    if (name !== undefined) return { site, name };
  }
  return undefined;
}

export interface LiveHosts {
  /** Sorted, without duplicates. */
  hosts: string[];
  warnings: Problem[];
}

/**
 * The live hosts of the env: every live site's domains and allowHosts (a replayed site has none: it is routed to the
 * gateway), except those a synthetic name covers
 * or equals ("synthetic wins": that name is the synthetic site's, and is left out with a warning).
 * A wider live wildcard stays, since the synthetic name is still routed inside it.
 */
export function liveHosts(websites: Record<string, WebsiteConfig>): LiveHosts {
  const hosts = new Set<string>();
  const warnings: Problem[] = [];
  for (const [site, website] of sortedSites(websites)) {
    if (!servedLive(website)) continue;
    const claims: Claim[] = [
      ...website.domains.map((name, index) => ({ site, key: "domains" as const, index, name })),
      ...website.allowHosts.map((name, index) => ({ site, key: "allowHosts" as const, index, name })),
    ];
    for (const claim of claims) {
      const winner = syntheticClaimOf(websites, claim.name);
      if (winner === undefined) {
        hosts.add(claim.name);
        continue;
      }
      const as = winner.name === claim.name ? "" : ` (as ${quote(winner.name)})`;
      warnings.push(
        problem(
          ["websites", site, claim.key, claim.index],
          `${quote(claim.name)} is claimed by synthetic site ${winner.site}${as}; synthetic wins, so computers reach ${winner.site} at it and it is left out of the live hosts`,
        ),
      );
    }
  }
  return { hosts: [...hosts].sort(), warnings };
}

/**
 * True when some website of the env claims `host`: a synthetic domain, or a live domain or allowed host (exact or
 * wildcard).
 */
export function isClaimed(websites: Record<string, WebsiteConfig>, host: string): boolean {
  return Object.values(websites).some((website) =>
    [...website.domains, ...(website.live ? website.allowHosts : [])].some((name) => covers(name, host)),
  );
}
