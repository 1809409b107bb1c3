import { describe, expect, it } from "vitest";
import { siteTable } from "../../src/plan/site-table";
import { websites } from "./fixtures";

const sites = websites({
  shop: { domains: ["shop.test", "*.shop.test"] },
  gist: { domains: ["gist.github.com"] },
  gh: { live: true, domains: ["github.com", "*.github.com"] },
  api: { domains: [] },
});

describe("site table", () => {
  it("of a routing computer maps each synthetic site to its names, sorted by site; live sites never appear", () => {
    expect(siteTable({ routesSites: true }, sites)).toEqual({
      gist: ["gist.github.com"],
      shop: ["shop.test", "*.shop.test"],
    });
    expect(Object.keys(siteTable({ routesSites: true }, sites))).toEqual(["gist", "shop"]);
  });

  it("of a computer that does not route sites is empty", () => {
    expect(siteTable({ routesSites: false }, sites)).toEqual({});
  });

  it("is empty when every site is live", () => {
    expect(siteTable({ routesSites: true }, websites({ gh: { live: true, domains: ["github.com"] } }))).toEqual({});
  });
});
