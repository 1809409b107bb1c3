import { describe, expect, it } from "vitest";
import { formatProblem } from "../../src/plan/problems";
import { reaching } from "../../src/plan/reaching";
import { startTabProblems, startTabWarnings } from "../../src/plan/start-tabs";
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

function problemsFor(computer: "desk" | "open", startTabs: string[]): string[] {
  return startTabProblems(computer, { ...config.computers[computer], startTabs }, config.websites).map(formatProblem);
}

describe("start tabs", () => {
  it("a routing computer may open tabs at synthetic names, names under a wildcard, and live hosts", () => {
    expect(
      problemsFor("desk", [
        "https://shop.test/",
        "http://a.b.shop.test:8080/x?y",
        "https://github.com/",
        "https://x.githubassets.com/a.js",
      ]),
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

  it("a computer that does not route sites may open tabs anywhere", () => {
    expect(problemsFor("open", ["https://example.com/"])).toEqual([]);
  });

  it("every computer's tabs must be http(s) URLs", () => {
    expect(problemsFor("open", ["file:///etc/passwd", "shop.test"])).toEqual([
      `multienv:computers.open.startTabs[0]: "file:///etc/passwd" is not an http(s) URL; a start tab is an http(s) URL such as https://shop.test/`,
      `multienv:computers.open.startTabs[1]: "shop.test" is not a URL; a start tab is an http(s) URL such as https://shop.test/`,
    ]);
  });
});

describe("start tabs a computer cannot load", () => {
  function warningsFor(computer: Record<string, unknown>): string[] {
    const c = stackConfig({ websites: config.websites, computers: { c: computer } }).computers.c;
    return startTabWarnings("c", c, reaching(c.network, ["github.com", "*.githubassets.com"]), config.websites).map(
      formatProblem,
    );
  }

  it("are warned about: a live host on a computer whose network is none", () => {
    expect(warningsFor({ network: "none", startTabs: ["https://shop.test/", "https://github.com/"] })).toEqual([
      `multienv:computers.c.startTabs[1]: "github.com" is not reachable from computer c (network none), so this tab will not load`,
    ]);
  });

  it("are warned about: a host off the allowlist of a computer that does not route sites, or a synthetic name it does not route", () => {
    expect(
      warningsFor({
        network: ["pypi.org"],
        routesSites: false,
        startTabs: ["https://pypi.org/", "https://example.com/", "https://shop.test/"],
      }),
    ).toEqual([
      `multienv:computers.c.startTabs[1]: "example.com" is not reachable from computer c (its allowlist), so this tab will not load`,
      `multienv:computers.c.startTabs[2]: "shop.test" is not reachable from computer c (its allowlist), so this tab will not load`,
    ]);
  });

  it("are none for routed synthetic names, live hosts an allowlist computer reaches, and allow-all", () => {
    expect(
      warningsFor({
        network: [],
        startTabs: ["https://shop.test/", "https://github.com/", "https://a.githubassets.com/"],
      }),
    ).toEqual([]);
    expect(warningsFor({ network: "allow-all", routesSites: false, startTabs: ["https://example.com/"] })).toEqual([]);
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
