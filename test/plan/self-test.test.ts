// Which checks the deploy's self-test runs in each computer: what its reaching says it must load and must be
// refused, nothing a test of its own could not also show by hand.
import { describe, expect, it } from "vitest";
import { plan, type Plan } from "../../src/plan";
import { planned } from "../helpers/plans";
import { stackConfig } from "./fixtures";

const WEBSITES = {
  shop: { domains: ["shop.test", "*.shop.test"] },
  gh: { live: true, domains: ["*.github.com", "github.com"] },
  cdn: { live: true, domains: ["*.cdn.example"] },
};

const checks = (p: Plan, computer: string) => p.selfTest.checks[computer].map((c) => `${c.expect} ${c.url}`);

describe("the self-test's checks", () => {
  const p = planned(
    stackConfig({
      websites: WEBSITES,
      computers: {
        listed: { network: ["pypi.org"], startTabs: ["https://www.shop.test/cart", "https://github.com/"] },
        open: { network: "allow-all" },
        offline: { network: "none" },
      },
    }),
  );

  it("loads a synthetic name over HTTPS (the first synthetic start tab), connects to each live site's first exact name, and is refused the rest", () => {
    expect(checks(p, "listed")).toEqual([
      "synthetic-loads https://www.shop.test/cart",
      "live-connects https://github.com/",
      "refused http://not-reached.multienv.invalid/",
      "refused http://169.254.169.254/latest/meta-data/",
    ]);
  });

  it("reaches the public web from an allow-all computer, and is refused the metadata address there too", () => {
    expect(checks(p, "open")).toEqual([
      "synthetic-loads https://shop.test/",
      "live-connects https://github.com/",
      "refused http://169.254.169.254/latest/meta-data/",
      "public-reached https://example.com/",
    ]);
  });

  it("lets a `none` computer load synthetic names alone: every live site is refused, over plain HTTP so the marker shows", () => {
    expect(checks(p, "offline")).toEqual([
      "synthetic-loads https://shop.test/",
      "refused http://github.com/",
      "refused http://not-reached.multienv.invalid/",
      "refused http://169.254.169.254/latest/meta-data/",
    ]);
  });

  it("checks no replayed site as a live one: its names answer from its recording, so neither connect nor refusal holds", () => {
    const recording = { path: "/recordings/gh.har", sha256: "c".repeat(64), bytes: 1024 };
    const replayed = planned(
      stackConfig({
        websites: { ...WEBSITES, gh: { ...WEBSITES.gh, replay: "gh.har" } },
        computers: { open: { network: "allow-all" }, offline: { network: "none" } },
      }),
      { recordings: { gh: recording } },
    );
    // (Its name may be the one a synthetic check loads: it is served over HTTPS with the env CA as a synthetic one.)
    for (const computer of ["open", "offline"])
      expect(
        checks(replayed, computer).filter((c) => /^(live-connects|refused) https?:\/\/github\.com\//.test(c)),
      ).toEqual([]);
  });

  it("checks each computer's start tabs, and only the computers that have some", () => {
    expect(p.selfTest.startTabs).toEqual({ listed: ["https://www.shop.test/cart", "https://github.com/"] });
  });

  it("holds no start tab of a computer that routes no sites to the sites' cards: its tabs are pages of the web", () => {
    const q = planned(
      stackConfig({
        websites: WEBSITES,
        computers: {
          plain: { network: "allow-all", routesSites: false, startTabs: ["https://news.example/"] },
          routed: { network: "none", startTabs: ["https://shop.test/"] },
        },
      }),
    );
    expect(q.selfTest.startTabs).toEqual({ routed: ["https://shop.test/"] });
  });

  it("skips the synthetic check for a computer that routes no sites", () => {
    const q = planned(
      stackConfig({ websites: WEBSITES, computers: { plain: { network: "allow-all", routesSites: false } } }),
    );
    expect(checks(q, "plain")[0]).toBe("live-connects https://github.com/");
  });

  it("takes the public page from the config, and is off by config, by the deploy's switch, or with no computer", () => {
    expect(
      checks(
        planned(
          stackConfig({
            websites: WEBSITES,
            computers: { open: { network: "allow-all" } },
            selfTest: { publicUrl: "https://standin.example/x" },
          }),
        ),
        "open",
      ).at(-1),
    ).toBe("public-reached https://standin.example/x");
    expect(
      planned(stackConfig({ websites: WEBSITES, computers: { open: { network: "allow-all" } } })).selfTest.enabled,
    ).toBe(true);
    expect(
      planned(stackConfig({ websites: WEBSITES, computers: { open: { network: "allow-all" } }, selfTest: false }))
        .selfTest.enabled,
    ).toBe(false);
    expect(
      planned(stackConfig({ websites: WEBSITES, computers: { open: { network: "allow-all" } } }), { selfTest: false })
        .selfTest.enabled,
    ).toBe(false);
    expect(planned(stackConfig({ websites: WEBSITES })).selfTest.enabled).toBe(false);
  });

  it("refuses a public page that is not an http(s) URL, naming the field", () => {
    expect(() => stackConfig({ selfTest: { publicUrl: "ftp://example.com/" } })).toThrow(/http:\/\/ or https:\/\/ URL/);
  });
});

describe("the self-test's config", () => {
  it("warns of a publicUrl no check loads: no computer is allow-all", () => {
    const none = plan(
      stackConfig({ selfTest: { publicUrl: "https://example.org/" }, computers: { a: { network: "none" } } }),
      {
        stack: "demo",
      },
    );
    expect(none.warnings).toEqual([
      "multienv:selfTest.publicUrl: is loaded only by an allow-all computer's check, and no computer is allow-all, so it is never used; remove it",
    ]);
    const open = plan(
      stackConfig({ selfTest: { publicUrl: "https://example.org/" }, computers: { a: { network: "allow-all" } } }),
      {
        stack: "demo",
      },
    );
    expect(open.warnings).toEqual([]);
  });
});
