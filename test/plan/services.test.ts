import { describe, expect, it } from "vitest";
import {
  browserServiceConfig,
  formatProblem,
  gatewayConfigOnHosts,
  gatewayServiceConfig,
  plan,
  siteProxyConfigOnHosts,
  DOCKER_DEFAULT_ADDRESS_POOLS,
  engineMachines,
  siteProxyServiceConfig,
} from "../../src/plan";
import type { Plan } from "../../src/plan";
import { parseBrowserConfig } from "../../src/browser/config";
import { parseGatewayConfig } from "../../src/gateway/config";
import { parseSiteProxyConfig } from "../../src/site-proxy/config";
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
  computers: {
    desk: { network: ["pypi.org"], startTabs: ["https://shop.test/"] },
    open: { network: "allow-all", routesSites: false },
  },
});

describe("gateway service config", () => {
  it("routes each site to its env-network alias, a frontend for synthetic sites only, and each computer to its proxy's control listener", () => {
    expect(gatewayServiceConfig(p)).toEqual({
      // Each listener is bound to the gateway's name on one network: published on ingress, browse on each link.
      listen: { host: "gateway-ingress", port: 8080 },
      browse: { hosts: ["gateway-desk", "gateway-open"], port: 8081 },
      sites: {
        gh: { server: "http://gh-server:8000", live: true },
        shop: { server: "http://shop-server:8001", frontend: "http://shop-frontend:3000", live: false },
      },
      capturesDir: "/captures",
      computers: {
        desk: {
          cdp: "http://proxy-desk:9000/cdp",
          proxyLog: "http://proxy-desk:9000/log",
          endConnections: "http://proxy-desk:9000/connections/end",
          requests: "http://proxy-desk:9000/requests",
          person: "http://proxy-desk:9000/person",
        },
        open: {
          cdp: "http://proxy-open:9000/cdp",
          proxyLog: "http://proxy-open:9000/log",
          endConnections: "http://proxy-open:9000/connections/end",
          requests: "http://proxy-open:9000/requests",
          person: "http://proxy-open:9000/person",
        },
      },
    });
  });

  it("has no capturesDir when capture is off", () => {
    expect(gatewayServiceConfig(planned({ websites: { shop: { domains: [] } } }))).not.toHaveProperty("capturesDir");
  });
});

describe("site proxy service config", () => {
  it("carries the computer's site table and reaching, reaches the gateway's browse listener, and serves DevTools on its control listener", () => {
    expect(siteProxyServiceConfig(p, "desk")).toEqual({
      listen: { host: "site-proxy", port: 3128 },
      gateway: "http://gateway-desk:8081",
      sites: { shop: ["shop.test"] },
      reach: ["pypi.org", "github.com"],
      log: "/var/log/multienv/site-proxy.log",
      connectTimeoutMs: 30000,
      idleTimeoutMs: 300000,
      ca: { cert: "/var/lib/multienv/ca/ca.pem", key: "/var/lib/multienv/ca-private/ca-key.pem" },
      control: { host: "proxy-desk", port: 9000, cdp: "browser:9222" },
      requestLog: {
        dir: "/var/log/multienv/requests",
        computer: "desk",
        bodyLimitBytes: 1024 * 1024,
        redact: [],
      },
    });
  });

  it("keeps a request log by default, with the config's body limit and redacted names, and none when it is off", () => {
    const limited = planned({
      requestLog: { bodyLimitBytes: 4096, redact: ["X-Api-Key", "sid"] },
      websites: { shop: { domains: ["shop.test"] } },
      computers: { desk: { network: "none" } },
    });
    expect(siteProxyServiceConfig(limited, "desk").requestLog).toEqual({
      dir: "/var/log/multienv/requests",
      computer: "desk",
      bodyLimitBytes: 4096,
      redact: ["X-Api-Key", "sid"],
    });
    expect(parseSiteProxyConfig(siteProxyServiceConfig(limited, "desk")).requestLog).toMatchObject({
      bodyLimitBytes: 4096,
    });
    const off = planned({
      requestLog: false,
      websites: { shop: { domains: ["shop.test"] } },
      computers: { desk: { network: "none" } },
    });
    expect(siteProxyServiceConfig(off, "desk")).not.toHaveProperty("requestLog");
    expect(gatewayServiceConfig(off).computers.desk).not.toHaveProperty("requests");
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

describe("recording a live site", () => {
  const config = {
    websites: {
      shop: { domains: ["shop.test"] },
      gh: { live: true, domains: ["github.com"], allowHosts: ["*.githubassets.com"], record: true },
      docs: { live: true, domains: ["docs.example.org"], record: true, keepCredentials: true },
      other: { live: true, domains: ["other.example.org"] },
    },
    computers: { desk: { network: "allow-all" } },
  };

  it("opens the recorded sites' names at each site proxy, marks them recorded, and says so as a warning", () => {
    const result = plan(stackConfig(config), { stack: "demo" });
    if (!result.ok) throw new Error(result.problems.map(formatProblem).join("\n"));
    expect(siteProxyServiceConfig(result.plan, "desk").record).toEqual({
      hosts: ["docs.example.org", "github.com", "*.githubassets.com"],
      keepCredentials: ["docs.example.org"],
    });
    expect(parseSiteProxyConfig(siteProxyServiceConfig(result.plan, "desk")).record?.hosts).toHaveLength(3);
    expect(result.plan.liveWebsites.map((w) => [w.name, w.recorded])).toEqual([
      ["docs", true],
      ["gh", true],
      ["other", undefined],
    ]);
    expect(result.warnings.filter((w) => w.includes(".record"))).toEqual([
      expect.stringMatching(
        /^multienv:websites\.docs\.record: opens the live site's HTTPS .*cookies and credential headers included/,
      ),
      expect.stringMatching(
        /^multienv:websites\.gh\.record: opens the live site's HTTPS .*cookies' values and credential headers left out/,
      ),
    ]);
  });

  it("trusts a recorded site's own certificates for its names alone", () => {
    const pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
    const result = plan(
      stackConfig({ ...config, websites: { ...config.websites, gh: { ...config.websites.gh, recordTrust: pem } } }),
      { stack: "demo" },
    );
    if (!result.ok) throw new Error(result.problems.map(formatProblem).join("\n"));
    const record = parseSiteProxyConfig(siteProxyServiceConfig(result.plan, "desk")).record;
    expect(record?.trustFor).toEqual([{ hosts: ["github.com", "*.githubassets.com"], pem }]);
  });

  it("refuses record on a synthetic site, keepCredentials without record, and record with the request log off", () => {
    const result = plan(
      stackConfig({
        requestLog: false,
        websites: {
          shop: { domains: ["shop.test"], record: true },
          gh: { live: true, domains: ["github.com"], keepCredentials: true },
          other: {
            live: true,
            domains: ["other.example.org"],
            recordTrust: "-----BEGIN CERTIFICATE-----x-----END CERTIFICATE-----",
          },
          docs: { live: true, domains: ["docs.example.org"], record: true },
        },
      }),
      { stack: "demo" },
    );
    expect(result.ok).toBe(false);
    const lines = result.ok ? [] : result.problems.map(formatProblem);
    expect(lines).toContainEqual(expect.stringMatching(/^multienv:websites\.shop\.record: records a live site/));
    expect(lines).toContainEqual(expect.stringMatching(/^multienv:websites\.gh\.keepCredentials: keeps a recorded/));
    expect(lines).toContainEqual(
      expect.stringMatching(/^multienv:websites\.other\.recordTrust: is trusted for a recorded site's TLS alone/),
    );
    expect(lines).toContainEqual(
      expect.stringMatching(/^multienv:websites\.docs\.record: records into the request log, which requestLog: false/),
    );
  });
});

describe("the configs once the env exists", () => {
  it("denies a proxy, on the docker target, its engine's subnets, the engine's pools and the machine's own addresses", () => {
    const machine = { addresses: ["127.0.0.1", "192.0.2.2", "fe80::1", "10.200.0.1"], addressPools: ["10.200.0.0/13"] };
    const config = siteProxyConfigOnHosts(siteProxyServiceConfig(p, "desk"), {
      subnets: ["10.200.1.0/26"],
      envHost: undefined,
      computerHosts: [undefined, undefined],
      machines: engineMachines(p, machine),
    });
    expect(config.deny).toEqual([
      "10.200.1.0/26",
      "10.200.0.0/13",
      "127.0.0.1/32",
      "192.0.2.2/32",
      "fe80::1/128",
      "10.200.0.1/32",
    ]);
    expect(config.gateway).toBe("http://gateway-desk:8081");
  });

  it("denies Docker's own pools where the engine could not be asked (checked offline, or an engine elsewhere)", () => {
    const config = siteProxyConfigOnHosts(siteProxyServiceConfig(p, "desk"), {
      subnets: [],
      envHost: undefined,
      computerHosts: [undefined, undefined],
      machines: engineMachines(p, undefined),
    });
    expect(config.deny).toEqual(DOCKER_DEFAULT_ADDRESS_POOLS);
    expect(DOCKER_DEFAULT_ADDRESS_POOLS).toContain("172.17.0.0/16");
    expect(DOCKER_DEFAULT_ADDRESS_POOLS).toContain("172.31.0.0/16");
    expect(DOCKER_DEFAULT_ADDRESS_POOLS).toContain("192.168.0.0/16");
  });

  it("on remote hosts also denies the env host and every computer's host, once each, and reaches the gateway there", () => {
    const config = siteProxyConfigOnHosts(siteProxyServiceConfig(p, "open"), {
      subnets: ["172.18.0.0/16"],
      envHost: "10.0.0.5",
      computerHosts: ["10.0.0.6", "10.0.0.7", "10.0.0.5"],
      machines: [{ addresses: [], addressPools: ["172.18.0.0/16"] }],
    });
    expect(config.deny).toEqual(["172.18.0.0/16", "10.0.0.5/32", "10.0.0.6/32", "10.0.0.7/32"]);
    expect(config.gateway).toBe("http://10.0.0.5:8081");
  });

  it("points the gateway at each computer's host for its control endpoints, and leaves the plan's config alone", () => {
    const planned = gatewayServiceConfig(p);
    const config = gatewayConfigOnHosts(planned, { desk: "10.0.0.6", open: undefined });
    expect(config.computers.desk).toEqual({
      cdp: planned.computers.desk.cdp.replace("proxy-desk", "10.0.0.6"),
      proxyLog: planned.computers.desk.proxyLog.replace("proxy-desk", "10.0.0.6"),
      endConnections: planned.computers.desk.endConnections.replace("proxy-desk", "10.0.0.6"),
      requests: planned.computers.desk.requests!.replace("proxy-desk", "10.0.0.6"),
      person: planned.computers.desk.person!.replace("proxy-desk", "10.0.0.6"),
    });
    expect(config.computers.open).toEqual(planned.computers.open);
    expect(planned.computers.desk.cdp).toContain("proxy-desk");
  });
});

describe("the services read what the plan writes", () => {
  it("parses each config with the service's own schema", () => {
    expect(parseGatewayConfig(JSON.stringify(gatewayServiceConfig(p))).browse).toEqual({
      hosts: ["gateway-desk", "gateway-open"],
      port: 8081,
    });
    for (const computer of p.computers) {
      expect(
        parseSiteProxyConfig({ ...siteProxyServiceConfig(p, computer), deny: ["172.30.0.0/16"] }).control?.cdp,
      ).toBe("browser:9222");
      expect(parseBrowserConfig(JSON.stringify(browserServiceConfig(p, computer))).cdpHost).toBe("browser");
    }
  });
});

describe("browser service config", () => {
  it("points the browser at its proxy, with its start tabs and the proxy's CA", () => {
    expect(browserServiceConfig(p, "desk")).toEqual({
      proxy: "http://site-proxy:3128",
      startTabs: ["https://shop.test/"],
      cdpHost: "browser",
      cdpPort: 9222,
      caFile: "/var/lib/multienv/ca/ca.pem",
    });
  });
});
