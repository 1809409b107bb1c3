import { describe, expect, it } from "vitest";
import { formatProblem } from "../../src/plan/problems";
import { MAX_ENV_VARIABLE_BYTES, websiteProblems, websiteWarnings } from "../../src/plan/sites";
import { websites } from "./fixtures";

function problemsOf(site: Record<string, unknown>): string[] {
  const config = websites({ s: site });
  return websiteProblems("s", config.s).map(formatProblem);
}

describe("a synthetic site", () => {
  it("may claim names and wildcards, with settings and secret settings", () => {
    expect(
      problemsOf({ domains: ["shop.test", "*.shop.test"], settings: { a: 1 }, secretSettings: { token: "shopToken" } }),
    ).toEqual([]);
  });

  it("may claim no name (reached through the gateway only)", () => {
    expect(problemsOf({ domains: [] })).toEqual([]);
  });

  it("may not have allowHosts", () => {
    expect(problemsOf({ domains: ["shop.test"], allowHosts: ["cdn.test"] })).toEqual([
      "multienv:websites.s.allowHosts: only a live site has allowHosts; remove them or set live: true",
    ]);
  });

  it("may not claim an address or a localhost name", () => {
    expect(problemsOf({ domains: ["10.0.0.1", "shop.localhost"] })).toEqual([
      `multienv:websites.s.domains[0]: "10.0.0.1" is an address; a site's names must be host names`,
      `multienv:websites.s.domains[1]: "shop.localhost" is a localhost name, which a browser takes to its own loopback without the proxy; a site's names must be other host names`,
    ]);
  });

  it("may not list a name twice or write a bad name", () => {
    expect(problemsOf({ domains: ["shop.test", "shop.test", "Shop.test"] })).toEqual([
      `multienv:websites.s.domains[1]: "shop.test" is listed twice; remove one`,
      `multienv:websites.s.domains[2]: "Shop.test" has upper case letters; write "shop.test"`,
    ]);
  });
});

describe("a live site", () => {
  it("with domains and allowHosts is fine", () => {
    expect(
      problemsOf({ live: true, domains: ["github.com", "*.github.com"], allowHosts: ["*.githubassets.com"] }),
    ).toEqual([]);
  });

  it("needs at least one domain", () => {
    expect(problemsOf({ live: true, domains: [] })).toEqual([
      "multienv:websites.s.domains: a live site needs at least one domain: the real site's names, e.g. github.com",
    ]);
  });

  it("has no frontend", () => {
    expect(problemsOf({ live: true, domains: ["github.com"], frontend: { port: 80 } })).toEqual([
      "multienv:websites.s.frontend: a live site serves no pages, so it has no frontend; remove frontend or set live: false",
    ]);
  });

  it("refuses an address as a domain, naming it", () => {
    expect(problemsOf({ live: true, domains: ["github.com", "140.82.112.3"] })).toEqual([
      `multienv:websites.s.domains[1]: "140.82.112.3" is an address; a live site's names must be host names`,
    ]);
  });

  it("refuses an address, an IPv6 address and localhost names as allowed hosts", () => {
    expect(
      problemsOf({ live: true, domains: ["github.com"], allowHosts: ["1.2.3.4", "::1", "localhost", "*.localhost"] }),
    ).toEqual([
      `multienv:websites.s.allowHosts[0]: "1.2.3.4" is an address; a live site's allowed hosts must be host names`,
      `multienv:websites.s.allowHosts[1]: "::1" is an address; a live site's allowed hosts must be host names`,
      `multienv:websites.s.allowHosts[2]: "localhost" is a localhost name, which a browser takes to its own loopback without the proxy; a live site's allowed hosts must be other host names`,
      `multienv:websites.s.allowHosts[3]: "*.localhost" is a localhost name, which a browser takes to its own loopback without the proxy; a live site's allowed hosts must be other host names`,
    ]);
  });
});

describe("settings", () => {
  it("a setting is either plain or secret", () => {
    expect(
      problemsOf({ domains: ["shop.test"], settings: { token: "x" }, secretSettings: { token: "shopToken" } }),
    ).toEqual([
      `multienv:websites.s.secretSettings.token: setting "token" is also in settings; a setting is either plain or secret, so remove it from one`,
    ]);
  });
});

describe("site images", () => {
  it("are the task's own: a server with no image, or a synthetic site's frontend with none, is refused by name", () => {
    const config = websites(
      { shop: { domains: ["shop.test"] }, gh: { live: true, domains: ["github.com"] } },
      { bare: true },
    );
    expect([...websiteProblems("shop", config.shop), ...websiteProblems("gh", config.gh)].map(formatProblem)).toEqual([
      "multienv:websites.shop.server.image: a website's server needs an image (the task's own site image); set it",
      "multienv:websites.shop.frontend.image: a synthetic site's frontend needs an image (the task's own site image); set it",
      "multienv:websites.gh.server.image: a website's server needs an image (the task's own site image); set it",
    ]);
  });
});

describe("what a deploy would refuse or regret about one site", () => {
  it("refuses settings larger than one environment variable holds (AGENTENV_WEBSITE_SETTINGS, name and = included)", () => {
    // {"big":"x...x"} with the variable's name, "=" and the NUL: exactly at the limit, then one byte past it.
    const overhead = Buffer.byteLength('AGENTENV_WEBSITE_SETTINGS={"big":""}') + 1;
    const at = "x".repeat(MAX_ENV_VARIABLE_BYTES - overhead);
    expect(problemsOf({ domains: ["s.test"], settings: { big: at } })).toEqual([]);
    expect(problemsOf({ domains: ["s.test"], settings: { big: `${at}x` } })).toEqual([
      "multienv:websites.s.settings: come to 129 KiB as AGENTENV_WEBSITE_SETTINGS, and one environment variable holds at most 128 KiB (Linux's MAX_ARG_STRLEN), so the server could not start; move the large values into the site's image or data",
    ]);
  });

  it("gives a Unicode name's punycode form", () => {
    expect(problemsOf({ domains: ["bücher.test", "*.münchen.test"] })).toEqual([
      'multienv:websites.s.domains[0]: "bücher.test" has the label "bücher"; labels are letters, digits and inner hyphens; a host name is written in ASCII: its punycode form is xn--bcher-kva.test',
      'multienv:websites.s.domains[1]: "*.münchen.test" is a wildcard whose suffix has the label "münchen"; labels are letters, digits and inner hyphens; a host name is written in ASCII: its punycode form is *.xn--mnchen-3ya.test',
    ]);
  });

  it("warns of a synthetic site with no domains: it runs, and no browser can open it", () => {
    const config = websites({ s: { domains: [] }, named: { domains: ["named.test"] } });
    expect(websiteWarnings("s", config.s).map(formatProblem)).toEqual([
      "multienv:websites.s.domains: is empty: the synthetic site is deployed and runs, but has no name a computer's browser could open it at; add its names, such as shop.test",
    ]);
    expect(websiteWarnings("named", config.named)).toEqual([]);
  });

  it("warns of a plain setting whose name says it is a secret, naming the secret setting to make of it", () => {
    const config = websites({
      shop: { domains: ["shop.test"], settings: { apiKey: "k-123", currency: "USD", token: 7 } },
    });
    expect(websiteWarnings("shop", config.shop).map(formatProblem)).toEqual([
      "multienv:websites.shop.settings.apiKey: looks like a secret, and a plain setting sits in plain text in the stack file, the state and the deploy's output; make it a secret setting: `pulumi config set --secret shopApiKey <value>` and secretSettings: {apiKey: shopApiKey}",
    ]);
  });
});
