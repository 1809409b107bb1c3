// Rules about one website on its own: its names, live-site refusals, settings (docs/design.md "Rules").
import { domainPatternProblem, isAddress, isLocalhostName } from "../protocol/host-names";
import { problem, quote } from "./problems";
import type { Problem, WebsiteConfig } from "./types";

/**
 * Why `name` cannot be one of a site's names (a domain, or a live site's allowed host), or undefined.
 * Addresses and localhost names are refused for every site: a live site's names are host names the real
 * web answers at, and browsers take localhost names to loopback themselves without asking the proxy,
 * so no site can claim one.
 */
export function siteNameProblem(name: string, live: boolean, what: "domain" | "allowed host"): string | undefined {
  const kind = live ? "a live site's" : "a site's";
  const names = what === "domain" ? "names" : "allowed hosts";
  if (isAddress(name)) return `${quote(name)} is an address; ${kind} ${names} must be host names`;
  if (isLocalhostName(name)) {
    return `${quote(name)} is a localhost name, which a browser takes to its own loopback without the proxy; ${kind} ${names} must be other host names`;
  }
  const syntax = domainPatternProblem(name);
  return syntax === undefined ? undefined : `${quote(name)} ${syntax}`;
}

function listProblems(site: string, key: "domains" | "allowHosts", names: string[], live: boolean): Problem[] {
  const problems: Problem[] = [];
  const seen = new Set<string>();
  names.forEach((name, index) => {
    const path = ["websites", site, key, index];
    const message = siteNameProblem(name, live, key === "domains" ? "domain" : "allowed host");
    if (message !== undefined) problems.push(problem(path, message));
    else if (seen.has(name)) problems.push(problem(path, `${quote(name)} is listed twice; remove one`));
    seen.add(name);
  });
  return problems;
}

/** Everything wrong with one website taken alone (claims between sites are in claims.ts). */
export function websiteProblems(site: string, website: WebsiteConfig): Problem[] {
  const problems: Problem[] = [];
  problems.push(...listProblems(site, "domains", website.domains, website.live));
  if (website.live) {
    if (website.domains.length === 0) {
      problems.push(
        problem(
          ["websites", site, "domains"],
          "a live site needs at least one domain: the real site's names, e.g. github.com",
        ),
      );
    }
    if (website.frontend !== undefined) {
      problems.push(
        problem(
          ["websites", site, "frontend"],
          "a live site serves no pages, so it has no frontend; remove frontend or set live: false",
        ),
      );
    }
    problems.push(...listProblems(site, "allowHosts", website.allowHosts, true));
    if (website.accountPool !== undefined && Object.keys(website.secretSettings).length > 0) {
      problems.push(
        problem(
          ["websites", site, "secretSettings"],
          `the site leases its account from pool ${website.accountPool}, whose accounts hold the secret settings; remove secretSettings, or accountPool to use the site's own account`,
        ),
      );
    }
  } else if (website.accountPool !== undefined) {
    problems.push(
      problem(
        ["websites", site, "accountPool"],
        "only a live site signs in with a pool's accounts; remove accountPool or set live: true",
      ),
    );
  } else if (website.allowHosts.length > 0) {
    problems.push(
      problem(["websites", site, "allowHosts"], "only a live site has allowHosts; remove them or set live: true"),
    );
  }
  // Site images are the task's own: the project ships no site image to fall back to.
  if (website.server.image === undefined) {
    problems.push(
      problem(
        ["websites", site, "server", "image"],
        "a website's server needs an image (the task's own site image); set it",
      ),
    );
  }
  if (!website.live && website.frontend?.image === undefined) {
    problems.push(
      problem(
        ["websites", site, "frontend", "image"],
        "a synthetic site's frontend needs an image (the task's own site image); set it",
      ),
    );
  }
  for (const setting of Object.keys(website.secretSettings)) {
    if (Object.hasOwn(website.settings, setting)) {
      problems.push(
        problem(
          ["websites", site, "secretSettings", setting],
          `setting ${quote(setting)} is also in settings; a setting is either plain or secret, so remove it from one`,
        ),
      );
    }
  }
  return problems;
}
