// Whether an env is live, so not reproducible, and why (docs/design.md "Rules": live): what it shows depends on the
// public web at the time, through a live site served live or a computer that reaches the public web on its own.
import { syntheticClaimOf } from "./claims";
import type { ComputerConfig, LiveReason, LiveWebsiteMark, WebsiteConfig } from "./types";

/**
 * What of the public web a computer reaches on its own: all of it under allow-all (whether or not it routes sites),
 * else the names on its allowlist that no synthetic site it routes wins (a replayed site's names count as synthetic);
 * nothing under none. A live site's hosts, which its reaching gets too, are that site's own reason to be live.
 */
export function publicReachOf(
  computer: Pick<ComputerConfig, "network" | "routesSites">,
  websites: Record<string, WebsiteConfig>,
): "allow-all" | string[] {
  if (computer.network === "allow-all") return "allow-all";
  if (computer.network === "none") return [];
  return computer.network.filter((name) => !computer.routesSites || syntheticClaimOf(websites, name) === undefined);
}

/** A computer's reason to make the env live, or undefined when it reaches nothing of the public web on its own. */
export function computerLiveReason(
  name: string,
  computer: Pick<ComputerConfig, "network" | "routesSites">,
  websites: Record<string, WebsiteConfig>,
): LiveReason | undefined {
  const reach = publicReachOf(computer, websites);
  if (reach === "allow-all") {
    const routes = computer.routesSites ? "" : ", routesSites: false";
    return { computer: name, reach, why: `computer ${name} reaches the public web (network: allow-all${routes})` };
  }
  if (reach.length === 0) return undefined;
  return { computer: name, reach, why: `computer ${name} reaches public hosts on its allowlist (${reach.join(", ")})` };
}

/** A live site's reason to make the env live. */
export function liveWebsiteReason(site: Pick<LiveWebsiteMark, "name" | "domains">): LiveReason {
  return {
    website: site.name,
    domains: [...site.domains],
    why: `live website ${site.name} (${site.domains.join(", ")}) is served live`,
  };
}

/** Every reason the env is live: each live site served live, then each computer that reaches the public web. */
export function liveReasons(
  liveWebsites: readonly LiveWebsiteMark[],
  computers: Record<string, Pick<ComputerConfig, "network" | "routesSites">>,
  websites: Record<string, WebsiteConfig>,
): LiveReason[] {
  return [
    ...liveWebsites.map(liveWebsiteReason),
    ...Object.keys(computers)
      .sort()
      .flatMap((name) => computerLiveReason(name, computers[name], websites) ?? []),
  ];
}
