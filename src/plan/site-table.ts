// A routing computer's site table (docs/design.md "Rules": site tables).
import { replayedNames, servedLive } from "./replay";
import type { ComputerConfig, WebsiteConfig } from "./types";

/**
 * Synthetic site -> the names it claims, for a computer that routes sites; empty otherwise.
 * A replayed live site is routed as a synthetic one, at its domains and allowed hosts (its recording answers them).
 * Live sites never appear: the computer reaches them at their real names. Sites that claim
 * no name are left out (they are reached through the gateway's /website/<site>/ only).
 */
export function siteTable(
  computer: Pick<ComputerConfig, "routesSites">,
  websites: Record<string, WebsiteConfig>,
): Record<string, string[]> {
  const table: Record<string, string[]> = {};
  if (!computer.routesSites) return table;
  for (const site of Object.keys(websites).sort()) {
    const website = websites[site];
    if (!website.live && website.domains.length > 0) table[site] = [...website.domains];
    else if (website.live && !servedLive(website)) table[site] = replayedNames(website);
  }
  return table;
}
