// Rules about one website on its own: its names, live-site refusals, settings (docs/design.md "Rules").
import { domainToASCII } from "node:url";
import { domainPatternProblem, isAddress, isLocalhostName } from "../protocol/host-names";
import { ENV_VARS } from "../protocol/env";
import { problem, quote } from "./problems";
import type { Problem, WebsiteConfig } from "./types";
import { websiteSettingsJson } from "./wiring";

/**
 * The longest one environment variable can be on Linux, `NAME=value` and its terminating NUL included
 * (MAX_ARG_STRLEN, 32 pages of 4 KiB): a longer one makes the container's process fail to start.
 */
export const MAX_ENV_VARIABLE_BYTES = 128 * 1024;

/** `; write it as xn--...` for a name with non-ASCII letters (a wildcard keeps its `*.`), else "". */
export function punycodeHint(name: string): string {
  if (!/[^\p{ASCII}]/u.test(name)) return "";
  const wildcard = name.startsWith("*.") ? "*." : "";
  const ascii = domainToASCII(name.slice(wildcard.length));
  return ascii === "" ? "" : `; a host name is written in ASCII: its punycode form is ${wildcard}${ascii}`;
}

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
  return syntax === undefined ? undefined : `${quote(name)} ${syntax}${punycodeHint(name)}`;
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
  if (website.record && !website.live)
    problems.push(
      problem(
        ["websites", site, "record"],
        "records a live site; a synthetic site's exchanges are always in the request log, so remove record",
      ),
    );
  if (website.keepCredentials && !website.record)
    problems.push(
      problem(
        ["websites", site, "keepCredentials"],
        "keeps a recorded site's credentials in the request log; set record: true or remove it",
      ),
    );
  if (website.recordTrust !== undefined && !website.record)
    problems.push(
      problem(
        ["websites", site, "recordTrust"],
        "is trusted for a recorded site's TLS alone; set record: true or remove it",
      ),
    );
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
  // The settings reach the server as one environment variable: past Linux's limit for one, the container cannot
  // start. Secret values are merged in at the deploy, so they count on top of this.
  const settingsBytes =
    Buffer.byteLength(`${ENV_VARS.websiteSettings}=${websiteSettingsJson(website.settings, {})}`, "utf8") + 1;
  if (settingsBytes > MAX_ENV_VARIABLE_BYTES) {
    problems.push(
      problem(
        ["websites", site, "settings"],
        `come to ${Math.ceil(settingsBytes / 1024)} KiB as ${ENV_VARS.websiteSettings}, and one environment variable holds at most ${MAX_ENV_VARIABLE_BYTES / 1024} KiB (Linux's MAX_ARG_STRLEN), so the server could not start; move the large values into the site's image or data`,
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

/** A setting name that says its value is a secret. */
const SECRET_NAME = /pass(word|phrase)?|secret|token|api[-_]?key|credential|private[-_]?key/i;

/**
 * Warnings about one website: a synthetic site with no name runs, but no computer can ever open it; a plain setting
 * whose name says it is a secret sits in plain text in the stack file, the state and `check`'s output.
 */
export function websiteWarnings(site: string, website: WebsiteConfig): Problem[] {
  const warnings: Problem[] = [];
  if (!website.live && website.domains.length === 0)
    warnings.push(
      problem(
        ["websites", site, "domains"],
        "is empty: the synthetic site is deployed and runs, but has no name a computer's browser could open it at; add its names, such as shop.test",
      ),
    );
  if (website.live && website.record)
    warnings.push(
      problem(
        ["websites", site, "record"],
        `opens the live site's HTTPS at each computer's site proxy (the one case a live site is decrypted), so its requests and answers go in the request log${website.keepCredentials ? ", its session's cookies and credential headers included" : " (its cookies' values and credential headers left out)"}`,
      ),
    );
  for (const [setting, value] of Object.entries(website.settings)) {
    if (!SECRET_NAME.test(setting) || typeof value !== "string" || value === "") continue;
    warnings.push(
      problem(
        ["websites", site, "settings", setting],
        `looks like a secret, and a plain setting sits in plain text in the stack file, the state and the deploy's output; make it a secret setting: \`pulumi config set --secret ${site}${setting.charAt(0).toUpperCase()}${setting.slice(1)} <value>\` and secretSettings: {${setting}: ${site}${setting.charAt(0).toUpperCase()}${setting.slice(1)}}`,
      ),
    );
  }
  return warnings;
}
