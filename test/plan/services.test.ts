import { describe, expect, it } from "vitest";
import { browserServiceConfig, formatProblem, gatewayServiceConfig, plan, siteProxyServiceConfig } from "../../src/plan";
import type { Plan } from "../../src/plan";
import { stackConfig } from "./fixtures";

function planned(input: Record<string, unknown>): Plan {
  const result = plan(stackConfig(input), { stack: "demo" });
  if (!result.ok) throw new Error(result.problems.map(formatProblem).join("\n"));
  return result.plan;
}

const p = planned({
  captureTraffic: true,
  websites: {
    shop: { domains: ["shop.test"], server: { port: 8001 }, frontend: { port: 3000 } },
    gh: { live: true, domains: ["github.com"] },
  },
  computers: { desk: { network: ["pypi.org"], startTabs: ["https://shop.test/"] }, open: { network: "allow-all", routesSites: false } },
});

describe("gateway service config", () => {
  it("routes each site to its env-network alias, a frontend for synthetic sites only, and each computer to its proxy", () => {
    expect(gatewayServiceConfig(p)).toEqual({
      listen: { host: "0.0.0.0", port: 8080 },
      sites: {
        gh: { server: "http://gh-server:8000", live: true },
        shop: { server: "http://shop-server:8001", frontend: "http://shop-frontend:3000", live: false },
      },
      capturesDir: "/captures",
      computers: {
        desk: { cdp: "http://demo-desk-proxy:9222", proxyLog: "http://demo-desk-proxy:9000/log" },
        open: { cdp: "http://demo-open-proxy:9222", proxyLog: "http://demo-open-proxy:9000/log" },
      },
    });
  });

  it("has no capturesDir when capture is off", () => {
    expect(gatewayServiceConfig(planned({ websites: { shop: { domains: [] } } }))).not.toHaveProperty("capturesDir");
  });
});

describe("site proxy service config", () => {
  it("carries the computer's site table and reaching, and relays CDP to its browser", () => {
    expect(siteProxyServiceConfig(p, "desk")).toEqual({
      listen: { host: "0.0.0.0", port: 3128 },
      gateway: "http://demo-gateway:8080",
      sites: { shop: ["shop.test"] },
      reach: ["pypi.org", "github.com"],
      log: "/var/log/multienv/site-proxy.log",
      connectTimeoutMs: 30000,
      idleTimeoutMs: 300000,
      ca: { cert: "/var/lib/multienv/ca/ca.pem", key: "/var/lib/multienv/ca-private/ca-key.pem" },
      relays: [{ listen: { host: "0.0.0.0", port: 9222 }, target: "demo-desk-browser:9222" }],
      control: { host: "0.0.0.0", port: 9000 },
    });
  });

  it("takes a planned computer as well as a name; a computer that does not route sites has an empty table", () => {
    const open = p.computers.find((c) => c.name === "open")!;
    const config = siteProxyServiceConfig(p, open);
    expect(config.sites).toEqual({});
    expect(config.reach).toBe("allow-all");
  });

  it("does not share arrays with the plan", () => {
    const config = siteProxyServiceConfig(p, "desk");
    (config.reach as string[]).push("x.test");
    config.sites.shop.push("y.test");
    expect(p.computers[0].reaching).toEqual(["pypi.org", "github.com"]);
    expect(p.computers[0].siteTable.shop).toEqual(["shop.test"]);
  });

  it("refuses a computer the plan does not have", () => {
    expect(() => siteProxyServiceConfig(p, "nope")).toThrow(/no computer "nope"/);
  });
});

describe("browser service config", () => {
  it("points the browser at its proxy, with its start tabs and the proxy's CA", () => {
    expect(browserServiceConfig(p, "desk")).toEqual({
      proxy: "http://demo-desk-proxy:3128",
      startTabs: ["https://shop.test/"],
      cdpPort: 9222,
      caFile: "/var/lib/multienv/ca/ca.pem",
    });
  });
});
