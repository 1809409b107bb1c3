import { describe, expect, it } from "vitest";
import { withReproducibility, emptyRunRecord } from "../../src/runner/evidence/run-record";
import { planned } from "../helpers/plans";
import { stackConfig } from "./fixtures";

const shop = { domains: ["shop.test"] };

describe("an env is live, and not reproducible, when it reaches the public web", () => {
  it("a computer alone with network allow-all and routesSites false, its start tab on the public web", () => {
    const p = planned(
      stackConfig({
        websites: { shop },
        computers: { open: { network: "allow-all", routesSites: false, startTabs: ["https://example.com/"] } },
      }),
    );
    expect(p).toMatchObject({ live: true, reproducible: false, liveWebsites: [] });
    expect(p.liveReasons).toEqual([
      {
        computer: "open",
        reach: "allow-all",
        why: "computer open reaches the public web (network: allow-all, routesSites: false)",
      },
    ]);
  });

  it("an allowlist naming public hosts, but not the synthetic names the computer routes", () => {
    const p = planned(
      stackConfig({
        websites: { shop },
        computers: {
          desk: { network: ["example.org", "shop.test"] },
          walled: { network: ["shop.test"] },
          none: { network: "none" },
        },
      }),
    );
    expect(p.liveReasons).toEqual([
      {
        computer: "desk",
        reach: ["example.org"],
        why: "computer desk reaches public hosts on its allowlist (example.org)",
      },
    ]);
    expect(p.reproducible).toBe(false);
  });

  it("a live site served live, and each computer, each named once; a replayed site and walled computers are not live", () => {
    const p = planned(
      stackConfig({
        websites: { shop, gh: { live: true, domains: ["github.com"] } },
        computers: { desk: { network: [] }, open: { network: "allow-all" } },
      }),
    );
    expect(p.liveReasons.map((r) => r.why)).toEqual([
      "live website gh (github.com) is served live",
      "computer open reaches the public web (network: allow-all)",
    ]);
    const walled = planned(
      stackConfig({
        websites: { shop },
        computers: { desk: { network: "none" }, lane: { network: ["shop.test"] } },
      }),
    );
    expect(walled).toMatchObject({ live: false, reproducible: true, liveReasons: [] });
  });
});

describe("run.json", () => {
  it("names every live reason of the deploy as why the run is not reproducible", () => {
    const p = planned(
      stackConfig({ websites: { shop }, computers: { open: { network: "allow-all", routesSites: false } } }),
    );
    const record = withReproducibility({
      ...emptyRunRecord("t"),
      live: p.live,
      liveReasons: p.liveReasons,
      liveWebsites: p.liveWebsites,
    });
    expect(record).toMatchObject({
      reproducible: false,
      notReproducibleBecause: ["computer open reaches the public web (network: allow-all, routesSites: false)"],
    });
  });

  it("a record of a deploy older than the reasons names its live sites, as it did", () => {
    const record = withReproducibility({
      ...emptyRunRecord("t"),
      live: true,
      liveWebsites: [{ name: "gh", domains: ["github.com"], allowHosts: [], reproducible: false }],
    });
    expect(record.notReproducibleBecause).toEqual(["live website gh (github.com) was deployed"]);
  });
});
