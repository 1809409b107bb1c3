// What a computer's site proxy forwards beyond synthetic names (docs/design.md "Rules": reaching).
import { domainPatternProblem, isAddress, isLocalhostName } from "../protocol/host-names";
import { problem, quote } from "./problems";
import { punycodeHint } from "./sites";
import type { ComputerNetwork, Problem, Reaching } from "./types";

/** `allow-all` stays as it is; an allowlist gets the live hosts added; `none` reaches only synthetic sites. */
export function reaching(network: ComputerNetwork, liveHosts: readonly string[]): Reaching {
  if (network === "allow-all" || network === "none") return network;
  const reach = [...network];
  for (const host of liveHosts) if (!reach.includes(host)) reach.push(host);
  return reach;
}

/** True when the computer may reach hosts on the public web: allow-all, or any name to reach. */
export function reachesPublicHosts(reach: Reaching): boolean {
  return reach === "allow-all" || (Array.isArray(reach) && reach.length > 0);
}

/**
 * Problems with a computer's allowlist. The site proxy never forwards an allowlisted address or
 * localhost name, so listing one would silently do nothing: it is refused instead.
 */
export function allowlistProblems(computer: string, network: ComputerNetwork): Problem[] {
  if (!Array.isArray(network)) return [];
  const problems: Problem[] = [];
  network.forEach((name, index) => {
    const path = ["computers", computer, "network", index];
    if (isAddress(name)) {
      problems.push(
        problem(
          path,
          `${quote(name)} is an address; an allowlist holds host names (use network: allow-all to reach addresses)`,
        ),
      );
    } else if (isLocalhostName(name)) {
      problems.push(
        problem(path, `${quote(name)} is a localhost name, which the browser reaches without its proxy; remove it`),
      );
    } else if (name === "*") {
      problems.push(problem(path, `"*" would mean every host: write network: allow-all instead of an allowlist`));
    } else {
      const syntax = domainPatternProblem(name);
      if (syntax !== undefined) problems.push(problem(path, `${quote(name)} ${syntax}${punycodeHint(name)}`));
    }
  });
  return problems;
}
