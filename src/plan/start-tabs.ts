// Start tabs (DESIGN "Rules": start tabs).
import { isClaimed } from "./claims";
import { problem, quote } from "./problems";
import type { ComputerConfig, Problem, WebsiteConfig } from "./types";

/** The host of an http(s) URL, or a message saying why `tab` is not one. */
export function startTabHost(tab: string): { host: string } | { problem: string } {
  let url: URL;
  try {
    url = new URL(tab);
  } catch {
    return { problem: `${quote(tab)} is not a URL; a start tab is an http(s) URL such as https://shop.test/` };
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    return { problem: `${quote(tab)} is not an http(s) URL; a start tab is an http(s) URL such as https://shop.test/` };
  }
  return { host: url.hostname };
}

/**
 * Every start tab must be an http(s) URL. A computer that routes sites may open a start tab only at a host
 * that a website of the env claims (exact or under a wildcard, synthetic or live); the refusal names the host.
 */
export function startTabProblems(computer: string, config: ComputerConfig, websites: Record<string, WebsiteConfig>): Problem[] {
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
