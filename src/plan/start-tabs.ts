// Start tabs (docs/design.md "Rules": start tabs).
import { isClaimed, syntheticClaimOf } from "./claims";
import { createAddressCheck } from "../protocol/address-check";
import { covers, isAddress, isLocalhostName } from "../protocol/host-names";
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

/** Every start tab must be an http(s) URL with no credentials in it: a rule of the tabs alone. */
export function startTabUrlProblems(computer: string, startTabs: readonly string[]): Problem[] {
  return startTabs.flatMap((tab, index) => {
    const parsed = startTabHost(tab);
    return "problem" in parsed ? [problem(["computers", computer, "startTabs", index], parsed.problem)] : [];
  });
}

/** What an allow-all computer's site proxy says of an address it is asked for; the env's own networks come on top. */
const allowAllAddressCheck = createAddressCheck({ reach: "allow-all" });

/**
 * Why computer `computer` can never load a page at `host`, which it does not route to a synthetic site: the site
 * proxy's routing (src/site-proxy/routing.ts) and address check (src/protocol/address-check.ts) refuse it whatever
 * the web holds. Undefined when some answer could come: a name the computer reaches, or an address of the public web
 * or a private network under allow-all.
 */
function neverLoads(
  computer: string,
  config: Pick<ComputerConfig, "routesSites">,
  reach: Reaching,
  host: string,
  websites: Record<string, WebsiteConfig>,
): string | undefined {
  const fix = `computers.${computer}.network`;
  // The browser sends loopback to its proxy too (src/browser/launcher.ts), and no proxy dials it.
  if (isLocalhostName(host))
    return `${quote(host)} is a localhost name, which computer ${computer}'s browser sends to its site proxy and the proxy never dials (loopback), so this tab can never load; remove the tab`;
  if (reach === "none") {
    const routes = config.routesSites
      ? "reaches only the synthetic sites it routes"
      : "routes no sites (routesSites: false), so it loads no page at all";
    return `computer ${computer} has network: none, which ${routes}; a tab at ${quote(host)} can never load. Give ${fix} a reach that holds the host (an allowlist naming it, or allow-all), or remove the tab`;
  }
  const synthetic = config.routesSites ? undefined : syntheticClaimOf(websites, host);
  if (isAddress(host)) {
    if (Array.isArray(reach))
      return `${quote(host)} is an address, and computer ${computer}'s allowlist never reaches an address, so this tab can never load; open the page by a host name on ${fix}, or set ${fix} to allow-all`;
    const verdict = allowAllAddressCheck(host.replace(/^\[(.*)\]$/, "$1"));
    if (verdict === undefined) return undefined;
    return `${quote(host)} is not an address computer ${computer}'s site proxy ever dials (${verdict}), so this tab can never load; open a page on the public web or a site of the env, or remove the tab`;
  }
  if (reach === "allow-all" || reach.some((name) => covers(name, host))) return undefined;
  if (synthetic !== undefined)
    return `${quote(host)} is synthetic site ${synthetic.site}'s, and computer ${computer} does not route sites (routesSites: false) nor has it on its allowlist, so this tab can never load; set computers.${computer}.routesSites: true, or remove the tab`;
  return `${quote(host)} is neither on computer ${computer}'s allowlist nor a live site's name, so this tab can never load; add it to ${fix}, or remove the tab`;
}

/**
 * A computer may open a start tab only where it can load a page. A computer that routes sites may open one only at a
 * host a website of the env claims (exact or under a wildcard, synthetic or live), the refusal naming the host;
 * beyond the synthetic names it routes, only at a host its reaching (`reach`, src/plan/reaching.ts) lets its site
 * proxy forward: a tab the proxy would refuse whatever the web holds is refused here (`neverLoads`). A tab that is
 * no http(s) URL is `startTabUrlProblems`'s.
 */
export function startTabReachProblems(
  computer: string,
  config: Pick<ComputerConfig, "routesSites" | "startTabs">,
  reach: Reaching,
  websites: Record<string, WebsiteConfig>,
): Problem[] {
  const problems: Problem[] = [];
  config.startTabs.forEach((tab, index) => {
    const path = ["computers", computer, "startTabs", index];
    const parsed = startTabHost(tab);
    if ("problem" in parsed) return;
    const host = parsed.host;
    if (config.routesSites && !isClaimed(websites, host)) {
      problems.push(
        problem(
          path,
          `${quote(host)} is claimed by no website of the env, so computer ${computer}, which routes sites, cannot open a start tab there; add it to a website's domains or remove the tab`,
        ),
      );
      return;
    }
    if (config.routesSites && syntheticClaimOf(websites, host) !== undefined) return;
    const why = neverLoads(computer, config, reach, host, websites);
    if (why !== undefined) problems.push(problem(path, why));
  });
  return problems;
}
