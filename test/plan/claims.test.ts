import { describe, expect, it } from "vitest";
import { claimProblems, isClaimed, liveHosts } from "../../src/plan/claims";
import { formatProblem } from "../../src/plan/problems";
import { websites } from "./fixtures";

describe("claims", () => {
  it("two synthetic sites may not claim one name", () => {
    const sites = websites({ a: { domains: ["shop.test"] }, b: { domains: ["other.test", "shop.test"] } });
    expect(claimProblems(sites).map(formatProblem)).toEqual([
      `multienv:websites.b.domains[1]: "shop.test" is also claimed by synthetic site a; two synthetic sites cannot claim one name`,
    ]);
  });

  it("two synthetic sites may not claim overlapping names (a wildcard and a name under it)", () => {
    const sites = websites({ a: { domains: ["*.shop.test"] }, b: { domains: ["x.shop.test"] } });
    expect(claimProblems(sites).map(formatProblem)).toEqual([
      `multienv:websites.b.domains[0]: "x.shop.test" is also claimed by synthetic site a (as "*.shop.test"); two synthetic sites cannot claim one name`,
    ]);
  });

  it("two synthetic sites may claim a name and the wildcard beside it (*.s does not cover s)", () => {
    expect(claimProblems(websites({ a: { domains: ["shop.test"] }, b: { domains: ["*.shop.test"] } }))).toEqual([]);
  });

  it("two live sites may not claim one name", () => {
    const sites = websites({
      gh: { live: true, domains: ["github.com"] },
      gh2: { live: true, domains: ["github.com"] },
    });
    expect(claimProblems(sites).map(formatProblem)).toEqual([
      `multienv:websites.gh2.domains[0]: "github.com" is also claimed by live site gh; two live sites cannot claim one name`,
    ]);
  });

  it("a synthetic name inside a live wildcard is allowed, and so is a synthetic name equal to a live one", () => {
    const sites = websites({
      gh: { live: true, domains: ["github.com", "*.github.com"] },
      gist: { domains: ["gist.github.com", "github.com"] },
    });
    expect(claimProblems(sites)).toEqual([]);
  });

  it("one site may claim a wildcard and names under it", () => {
    expect(claimProblems(websites({ a: { domains: ["*.shop.test", "x.shop.test"] } }))).toEqual([]);
  });

  it("live sites may share allowed hosts (a CDN two sites need)", () => {
    const sites = websites({
      a: { live: true, domains: ["a.com"], allowHosts: ["cdn.example"] },
      b: { live: true, domains: ["b.com"], allowHosts: ["cdn.example"] },
    });
    expect(claimProblems(sites)).toEqual([]);
    expect(liveHosts(sites).hosts).toEqual(["a.com", "b.com", "cdn.example"]);
  });
});

describe("live hosts and synthetic wins", () => {
  it("are every live site's domains and allowHosts, sorted, without synthetic sites' names", () => {
    const sites = websites({
      gh: { live: true, domains: ["github.com", "*.github.com"], allowHosts: ["*.githubassets.com"] },
      shop: { domains: ["shop.test"] },
    });
    expect(liveHosts(sites)).toEqual({ hosts: ["*.github.com", "*.githubassets.com", "github.com"], warnings: [] });
  });

  it("a live exact host equal to a synthetic name is dropped with a warning", () => {
    const sites = websites({
      gh: { live: true, domains: ["github.com", "gist.github.com"] },
      gist: { domains: ["gist.github.com"] },
    });
    const result = liveHosts(sites);
    expect(result.hosts).toEqual(["github.com"]);
    expect(result.warnings.map(formatProblem)).toEqual([
      `multienv:websites.gh.domains[1]: "gist.github.com" is claimed by synthetic site gist; synthetic wins, so computers reach gist at it and it is left out of the live hosts`,
    ]);
  });

  it("a live host covered by a synthetic wildcard is dropped with a warning, allowed hosts too", () => {
    const sites = websites({
      gh: { live: true, domains: ["github.com"], allowHosts: ["x.fake.test", "*.a.fake.test"] },
      fake: { domains: ["*.fake.test"] },
    });
    const result = liveHosts(sites);
    expect(result.hosts).toEqual(["github.com"]);
    expect(result.warnings.map(formatProblem)).toEqual([
      `multienv:websites.gh.allowHosts[0]: "x.fake.test" is claimed by synthetic site fake (as "*.fake.test"); synthetic wins, so computers reach fake at it and it is left out of the live hosts`,
      `multienv:websites.gh.allowHosts[1]: "*.a.fake.test" is claimed by synthetic site fake (as "*.fake.test"); synthetic wins, so computers reach fake at it and it is left out of the live hosts`,
    ]);
  });

  it("a wider live wildcard stays when a synthetic name sits inside it", () => {
    const sites = websites({
      gh: { live: true, domains: ["*.github.com"] },
      gist: { domains: ["gist.github.com", "*.gist.github.com"] },
    });
    expect(liveHosts(sites)).toEqual({ hosts: ["*.github.com"], warnings: [] });
  });

  it("a synthetic wildcard does not cover the bare live name", () => {
    const sites = websites({ gh: { live: true, domains: ["github.com"] }, fake: { domains: ["*.github.com"] } });
    expect(liveHosts(sites)).toEqual({ hosts: ["github.com"], warnings: [] });
  });
});

describe("isClaimed", () => {
  const sites = websites({
    gh: { live: true, domains: ["github.com", "*.github.com"], allowHosts: ["*.githubassets.com"] },
    shop: { domains: ["shop.test", "*.shop.test"] },
  });
  it.each(["shop.test", "a.shop.test", "github.com", "gist.github.com", "x.githubassets.com"])(
    "%s is claimed",
    (host) => {
      expect(isClaimed(sites, host)).toBe(true);
    },
  );
  it.each(["example.com", "githubassets.com", "test", "notshop.test"])("%s is not", (host) => {
    expect(isClaimed(sites, host)).toBe(false);
  });
});
