import { describe, expect, it } from "vitest";
import { createAddressCheck } from "../../src/protocol/address-check";
import { isAddress } from "../../src/protocol/host-names";
import { formatProblem } from "../../src/plan/problems";
import { isClaimed, liveHosts } from "../../src/plan/claims";
import { reaching } from "../../src/plan/reaching";
import { siteTable } from "../../src/plan/site-table";
import { startTabReachProblems, startTabUrlProblems } from "../../src/plan/start-tabs";
import { createRouter } from "../../src/site-proxy/routing";
import { stackConfig } from "./fixtures";

const config = stackConfig({
  websites: {
    shop: { domains: ["shop.test", "*.shop.test"] },
    gh: { live: true, domains: ["github.com"], allowHosts: ["*.githubassets.com"] },
  },
  computers: {
    desk: { network: "none", startTabs: [] },
    open: { network: "allow-all", routesSites: false, startTabs: [] },
  },
});
const LIVE = liveHosts(config.websites).hosts;

/** Every refusal of `computer`'s start tabs, as the plan makes them: the URL's and the reach's. */
function refusals(computer: Record<string, unknown>): string[] {
  const c = stackConfig({ websites: config.websites, computers: { c: computer } }).computers.c;
  return [
    ...startTabUrlProblems("c", c.startTabs),
    ...startTabReachProblems("c", c, reaching(c.network, LIVE), config.websites),
  ].map(formatProblem);
}

function problemsFor(computer: "desk" | "open", startTabs: string[]): string[] {
  const c = { ...config.computers[computer], startTabs };
  return [
    ...startTabUrlProblems(computer, startTabs),
    ...startTabReachProblems(computer, c, reaching(c.network, LIVE), config.websites),
  ].map(formatProblem);
}

describe("start tabs", () => {
  it("a routing computer may open tabs at synthetic names and names under a wildcard, and at live hosts it reaches", () => {
    expect(problemsFor("desk", ["https://shop.test/", "http://a.b.shop.test:8080/x?y"])).toEqual([]);
    expect(
      refusals({
        network: [],
        startTabs: ["https://shop.test/", "https://github.com/", "https://x.githubassets.com/a.js"],
      }),
    ).toEqual([]);
  });

  it("a routing computer may not open a tab at a host no website claims; the refusal names the host and the computer", () => {
    expect(problemsFor("desk", ["https://shop.test/", "https://example.com/path"])).toEqual([
      `multienv:computers.desk.startTabs[1]: "example.com" is claimed by no website of the env, so computer desk, which routes sites, cannot open a start tab there; add it to a website's domains or remove the tab`,
    ]);
  });

  it("a wildcard does not claim its bare suffix", () => {
    expect(problemsFor("desk", ["https://test/"])).toHaveLength(1);
  });

  it("an allow-all computer that does not route sites may open tabs at any name and any public or private address", () => {
    expect(
      problemsFor("open", [
        "https://example.com/",
        "https://93.184.215.14/",
        "http://10.1.2.3/",
        "http://[2606:4700::1]/",
      ]),
    ).toEqual([]);
  });

  it("every computer's tabs must be http(s) URLs", () => {
    expect(problemsFor("open", ["file:///etc/passwd", "shop.test"])).toEqual([
      `multienv:computers.open.startTabs[0]: "file:///etc/passwd" is not an http(s) URL; a start tab is an http(s) URL such as https://shop.test/`,
      `multienv:computers.open.startTabs[1]: "shop.test" is not a URL; a start tab is an http(s) URL such as https://shop.test/`,
    ]);
  });
});

describe("a start tab the computer can never load is refused, naming the field and the fix", () => {
  it("an address on a computer with an allowlist, which never reaches an address, whether or not it routes sites", () => {
    for (const routesSites of [true, false])
      expect(refusals({ network: ["example.org"], routesSites, startTabs: ["https://93.184.215.14/"] })).toEqual([
        `multienv:computers.c.startTabs[0]: ${routesSites ? `"93.184.215.14" is claimed by no website of the env, so computer c, which routes sites, cannot open a start tab there; add it to a website's domains or remove the tab` : `"93.184.215.14" is an address, and computer c's allowlist never reaches an address, so this tab can never load; open the page by a host name on computers.c.network, or set computers.c.network to allow-all`}`,
      ]);
    // the IPv6 form, and an address the URL parser writes out from a shorthand
    expect(
      refusals({ network: ["example.org"], routesSites: false, startTabs: ["http://[2606:4700::1]/", "http://1.1/"] }),
    ).toEqual([
      expect.stringMatching(
        /^multienv:computers\.c\.startTabs\[0\]: "\[2606:4700::1\]" is an address, and computer c's allowlist never reaches/,
      ),
      expect.stringMatching(/^multienv:computers\.c\.startTabs\[1\]: "1\.0\.0\.1" is an address/),
    ]);
  });

  it("a host outside the allowlist of a computer that does not route sites; a live site's hosts are on it", () => {
    expect(
      refusals({
        network: ["pypi.org"],
        routesSites: false,
        startTabs: ["https://pypi.org/", "https://example.com/", "https://github.com/", "https://a.githubassets.com/"],
      }),
    ).toEqual([
      `multienv:computers.c.startTabs[1]: "example.com" is neither on computer c's allowlist nor a live site's name, so this tab can never load; add it to computers.c.network, or remove the tab`,
    ]);
  });

  it("a synthetic name on a computer that does not route sites and has an allowlist or none", () => {
    expect(refusals({ network: ["pypi.org"], routesSites: false, startTabs: ["https://shop.test/"] })).toEqual([
      `multienv:computers.c.startTabs[0]: "shop.test" is synthetic site shop's, and computer c does not route sites (routesSites: false) nor has it on its allowlist, so this tab can never load; set computers.c.routesSites: true, or remove the tab`,
    ]);
    expect(refusals({ network: "none", routesSites: false, startTabs: ["https://shop.test/"] })).toEqual([
      `multienv:computers.c.startTabs[0]: computer c has network: none, which routes no sites (routesSites: false), so it loads no page at all; a tab at "shop.test" can never load. Give computers.c.network a reach that holds the host (an allowlist naming it, or allow-all), or remove the tab`,
    ]);
  });

  it("any host but a synthetic one on a computer whose network is none: a live site's too", () => {
    expect(refusals({ network: "none", startTabs: ["https://shop.test/", "https://github.com/"] })).toEqual([
      `multienv:computers.c.startTabs[1]: computer c has network: none, which reaches only the synthetic sites it routes; a tab at "github.com" can never load. Give computers.c.network a reach that holds the host (an allowlist naming it, or allow-all), or remove the tab`,
    ]);
  });

  it("an address no site proxy dials, even under allow-all: loopback, link-local, metadata, special-purpose", () => {
    const tabs = [
      "http://127.0.0.1/",
      "http://[::1]/",
      "http://169.254.169.254/latest",
      "http://192.0.2.1/",
      "http://[::ffff:127.0.0.1]/",
      "http://0.0.0.0/",
    ];
    const lines = refusals({ network: "allow-all", routesSites: false, startTabs: tabs });
    expect(lines).toHaveLength(tabs.length);
    expect(lines[0]).toBe(
      `multienv:computers.c.startTabs[0]: "127.0.0.1" is not an address computer c's site proxy ever dials (a loopback address), so this tab can never load; open a page on the public web or a site of the env, or remove the tab`,
    );
    expect(lines[2]).toContain("(a cloud metadata address)");
  });

  it("a localhost name, which the browser sends to its proxy and the proxy never dials, in every reach mode", () => {
    for (const network of ["allow-all", ["example.org"]])
      expect(
        refusals({ network, routesSites: false, startTabs: ["http://localhost:9222/json", "http://a.localhost/"] }),
      ).toEqual([
        `multienv:computers.c.startTabs[0]: "localhost" is a localhost name, which computer c's browser sends to its site proxy and the proxy never dials (loopback), so this tab can never load; remove the tab`,
        expect.stringMatching(/^multienv:computers\.c\.startTabs\[1\]: "a\.localhost" is a localhost name/),
      ]);
  });
});

describe("the plan's verdict on a start tab is the site proxy's", () => {
  // What the deployed proxy does with a host: its router (site table and reach) and, for an address, its address
  // check. A tab is accepted exactly when the proxy would route or forward it, and, on a computer that routes sites,
  // a website of the env claims its host.
  const HOSTS = [
    "shop.test",
    "a.shop.test",
    "github.com",
    "x.githubassets.com",
    "example.org",
    "pypi.org",
    "localhost",
    "93.184.215.14",
    "10.1.2.3",
    "127.0.0.1",
    "169.254.169.254",
    "192.0.2.1",
    "[2606:4700::1]",
    "[::1]",
  ];
  const NETWORKS = ["allow-all", "none", ["example.org"], []];
  for (const network of NETWORKS)
    for (const routesSites of [true, false])
      it(`network ${JSON.stringify(network)}, routesSites ${routesSites}`, () => {
        const c = stackConfig({ websites: config.websites, computers: { c: { network, routesSites } } }).computers.c;
        const reach = reaching(c.network, LIVE);
        const router = createRouter(siteTable(c, config.websites), reach);
        const check = createAddressCheck({ reach });
        for (const host of HOSTS) {
          const route = router.route(host);
          const bare = host.replace(/^\[(.*)\]$/, "$1");
          const dialled =
            route.kind === "synthetic" ||
            (route.kind === "forward" && (!isAddress(host) || check(bare) === undefined) && host !== "localhost");
          const accepted = dialled && (!routesSites || isClaimed(config.websites, host));
          const refused = startTabReachProblems("c", { ...c, startTabs: [`http://${host}/`] }, reach, config.websites);
          expect({ host, accepted: refused.length === 0 }).toEqual({ host, accepted });
        }
      });
});

describe("a start tab with credentials in its URL", () => {
  it("is refused, and neither its user nor its password is in the message, whether or not the URL parses", () => {
    const tabs = [
      "https://alice:hunter2-secret@shop.test/",
      "https://alice@shop.test/",
      "https://:hunter2-secret@shop.test/",
      "https://alice:hunter2-secret@shop.test:99999/",
    ];
    const problems = problemsFor("desk", tabs);
    expect(problems).toHaveLength(tabs.length);
    for (const [i, line] of problems.entries()) {
      expect(line).toMatch(
        new RegExp(`^multienv:computers\\.desk\\.startTabs\\[${i}\\]: holds a user name or password`),
      );
      expect(line).not.toMatch(/alice|hunter2|shop\.test/);
    }
  });
});
