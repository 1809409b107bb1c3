// Start tabs (docs/design.md "Rules": start tabs).
import { isClaimed, syntheticClaimOf } from "./claims";
import { covers } from "../protocol/host-names";
import { problem, quote } from "./problems";
import type { ComputerConfig, Problem, Reaching, WebsiteConfig } from "./types";

/** A URL's user name or password (`scheme://user:pass@host`), also in a string that does not parse as a URL. */
const USERINFO = /^[a-z][a-z0-9+.-]*:\/*[^/?#]*@/i;

/**
 * The host of an http(s) URL, or a message saying why `tab` is not one. A tab with credentials in it is refused
 * without being echoed: the message would put the password in a terminal, a log or `check --json`.
 */
export function startTabHost(tab: string): { host: string } | { problem: string } {
  let url: URL | undefined;
  try {
    url = new URL(tab);
  } catch {
    url = undefined;
  }
  if (USERINFO.test(tab) || (url !== undefined && (url.username !== "" || url.password !== ""))) {
    return {
      problem:
        "holds a user name or password in its URL (user:password@), which would sit in plain text in the outputs and the browser; remove them (the URL is not shown here), and sign the computer in with `multienv sign-in` instead",
    };
  }
  if (url === undefined)
    return { problem: `${quote(tab)} is not a URL; a start tab is an http(s) URL such as https://shop.test/` };
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    return { problem: `${quote(tab)} is not an http(s) URL; a start tab is an http(s) URL such as https://shop.test/` };
  }
  return { host: url.hostname };
}

/**
 * Every start tab must be an http(s) URL. A computer that routes sites may open a start tab only at a host
 * that a website of the env claims (exact or under a wildcard, synthetic or live); the refusal names the host.
 */
export function startTabProblems(
  computer: string,
  config: ComputerConfig,
  websites: Record<string, WebsiteConfig>,
): Problem[] {
  const problems: Problem[] = [];
  config.startTabs.forEach((tab, index) => {
    const path = ["computers", computer, "startTabs", index];
    const parsed = startTabHost(tab);
    if ("problem" in parsed) {
      problems.push(problem(path, parsed.problem));
      return;
    }
    if (config.routesSites && !isClaimed(websites, parsed.host)) {
      problems.push(
        problem(
          path,
          `${quote(parsed.host)} is claimed by no website of the env, so computer ${computer}, which routes sites, cannot open a start tab there; add it to a website's domains or remove the tab`,
        ),
      );
    }
  });
  return problems;
}

/**
 * Warnings for start tabs the computer will not be able to load: a host that is neither a synthetic name the
 * computer routes nor covered by its reaching (e.g. a live site's page on a computer whose network is none).
 */
export function startTabWarnings(
  computer: string,
  config: ComputerConfig,
  reach: Reaching,
  websites: Record<string, WebsiteConfig>,
): Problem[] {
  const warnings: Problem[] = [];
  config.startTabs.forEach((tab, index) => {
    const parsed = startTabHost(tab);
    if ("problem" in parsed) return;
    const host = parsed.host;
    if (config.routesSites && !isClaimed(websites, host)) return; // refused by startTabProblems already
    if (config.routesSites && syntheticClaimOf(websites, host) !== undefined) return;
    if (reach === "allow-all" || (Array.isArray(reach) && reach.some((name) => covers(name, host)))) return;
    const network = Array.isArray(config.network) ? "its allowlist" : `network ${config.network}`;
    warnings.push(
      problem(
        ["computers", computer, "startTabs", index],
        `${quote(host)} is not reachable from computer ${computer} (${network}), so this tab will not load`,
      ),
    );
  });
  return warnings;
}
