import { describe, expect, it } from "vitest";
import { formatProblem, plan } from "../../src/plan";
import { planned } from "../helpers/plans";
import { stackConfig } from "./fixtures";

const demo = stackConfig({
  captureTraffic: true,
  websites: {
    shop: {
      domains: ["shop.test", "*.shop.test"],
      settings: { greeting: "hi" },
      frontend: { image: "shop-frontend:1", port: 3000 },
    },
    gh: {
      live: true,
      domains: ["github.com", "*.github.com", "gist.github.com"],
      allowHosts: ["*.githubassets.com"],
      secretSettings: { token: "githubToken" },
      server: { image: "gh-server:1", port: 9000 },
    },
    gist: { domains: ["gist.github.com"] },
  },
  computers: {
    desk: { network: ["pypi.org"], startTabs: ["https://shop.test/", "https://github.com/"] },
    open: { network: "allow-all", routesSites: false, image: "my-browser:2" },
    offline: { network: "none" },
  },
});

describe("plan", () => {
  it("names every container, network and volume after the stack, per docs/contracts.md", () => {
    const p = planned(demo);
    expect(p.stack).toBe("demo");
    expect(p.target).toBe("docker");
    expect(p.gateway).toEqual({ containerName: "demo-gateway", port: 8080 });
    expect(p.networks).toEqual({ env: "demo-env", egress: "demo-egress", ingress: "demo-ingress" });
    expect(p.capture.volumeName).toBe("demo-captures");
    const shop = p.websites.find((w) => w.name === "shop")!;
    expect(shop.server).toEqual({
      containerName: "demo-shop-server",
      image: "site-server:test",
      port: 8000,
      alias: "shop-server",
    });
    expect(shop.frontend).toEqual({
      containerName: "demo-shop-frontend",
      image: "shop-frontend:1",
      port: 3000,
      alias: "shop-frontend",
    });
    const desk = p.computers.find((c) => c.name === "desk")!;
    expect(desk.browserContainerName).toBe("demo-desk-browser");
    expect(desk.proxyContainerName).toBe("demo-desk-proxy");
    expect(desk.networkName).toBe("demo-desk-net");
    expect(desk.caVolumeName).toBe("demo-desk-ca");
  });

  it("sorts websites and computers by name", () => {
    const p = planned(demo);
    expect(p.websites.map((w) => w.name)).toEqual(["gh", "gist", "shop"]);
    expect(p.computers.map((c) => c.name)).toEqual(["desk", "offline", "open"]);
  });

  it("is deterministic: the same config in another key order plans the same", () => {
    const reordered = stackConfig({
      computers: Object.fromEntries(Object.entries(demo.computers).reverse()),
      websites: Object.fromEntries(Object.entries(demo.websites).reverse()),
      captureTraffic: true,
    });
    expect(planned(reordered)).toEqual(planned(demo));
  });

  it("gives a synthetic site a frontend (default port 80) and a live site none; a live server joins egress", () => {
    const p = planned(
      stackConfig({ websites: { a: { domains: ["a.test"] }, gh: { live: true, domains: ["github.com"] } } }),
    );
    const [a, gh] = p.websites;
    expect(a.frontend).toEqual({
      containerName: "demo-a-frontend",
      image: "site-frontend:test",
      port: 80,
      alias: "a-frontend",
    });
    expect(a.serverOnEgress).toBe(false);
    expect(gh.frontend).toBeUndefined();
    expect(gh.serverOnEgress).toBe(true);
    expect(gh.server).toEqual({
      containerName: "demo-gh-server",
      image: "site-server:test",
      port: 8000,
      alias: "gh-server",
    });
  });

  it("keeps settings and secret settings (names of config keys, never values)", () => {
    const p = planned(demo);
    expect(p.websites.find((w) => w.name === "shop")!.settings).toEqual({ greeting: "hi" });
    expect(p.websites.find((w) => w.name === "gh")!.secretSettings).toEqual({ token: "githubToken" });
  });

  it("computes live hosts after synthetic wins, with the warning", () => {
    const p = planned(demo);
    expect(p.liveHosts).toEqual(["*.github.com", "*.githubassets.com", "github.com"]);
    expect(p.warnings).toEqual([
      `multienv:websites.gh.domains[2]: "gist.github.com" is claimed by synthetic site gist; synthetic wins, so computers reach gist at it and it is left out of the live hosts`,
    ]);
  });

  it("gives each computer its reaching, site table and whether it reaches public hosts", () => {
    const p = planned(demo);
    const [desk, offline, open] = p.computers;
    expect(desk.reaching).toEqual(["pypi.org", "*.github.com", "*.githubassets.com", "github.com"]);
    expect(desk.siteTable).toEqual({ gist: ["gist.github.com"], shop: ["shop.test", "*.shop.test"] });
    expect(desk.reachesPublicHosts).toBe(true);
    expect(offline.reaching).toBe("none");
    expect(offline.reachesPublicHosts).toBe(false);
    expect(offline.siteTable).toEqual(desk.siteTable);
    expect(open.reaching).toBe("allow-all");
    expect(open.siteTable).toEqual({});
    expect(open.reachesPublicHosts).toBe(true);
    expect(open.image).toBe("my-browser:2");
    expect(open.routesSites).toBe(false);
  });

  it("an allowlist computer with no live site and an empty allowlist reaches no public host", () => {
    const p = planned(stackConfig({ websites: { a: { domains: ["a.test"] } }, computers: { desk: { network: [] } } }));
    expect(p.computers[0].reaching).toEqual([]);
    expect(p.computers[0].reachesPublicHosts).toBe(false);
  });

  it("marks a stack with a live site live and not reproducible, listing its live websites", () => {
    const p = planned(demo);
    expect(p.live).toBe(true);
    expect(p.reproducible).toBe(false);
    expect(p.liveWebsites).toEqual([
      {
        name: "gh",
        domains: ["github.com", "*.github.com", "gist.github.com"],
        allowHosts: ["*.githubassets.com"],
        reproducible: false,
      },
    ]);
  });

  it("marks a stack of synthetic sites reproducible and not live", () => {
    const p = planned(stackConfig({ websites: { a: { domains: ["a.test"] } } }));
    expect(p.live).toBe(false);
    expect(p.reproducible).toBe(true);
    expect(p.liveWebsites).toEqual([]);
  });

  it("plans an empty env", () => {
    const p = planned(stackConfig({}));
    expect(p.websites).toEqual([]);
    expect(p.computers).toEqual([]);
    expect(p.warnings).toEqual([]);
  });

  it("carries the ec2 section for target ec2, and warns that it is ignored for docker", () => {
    const ec2 = {
      region: "us-east-1",
      instanceType: "t3.large",
      runnerCidrs: ["203.0.113.7/32"],
      sshPublicKey: "ssh-ed25519 AAAA me",
    };
    expect(planned(stackConfig({ target: "ec2", ec2 })).ec2).toEqual({
      ...ec2,
      sshUser: "ec2-user",
      lifetimeHours: 4,
      architecture: "x86_64",
      amiParameter: "/aws/service/ecs/optimized-ami/amazon-linux-2023/recommended/image_id",
    });
    const result = plan(stackConfig({ ec2 }), { stack: "demo" });
    expect(result.ok && result.plan.ec2).toBeUndefined();
    expect(result.warnings).toEqual([
      "multienv:ec2: ignored, since target is docker; set target: ec2 to deploy on EC2, or remove ec2",
    ]);
  });

  it("reports every problem at once, each naming its config path, and still the warnings", () => {
    const result = plan(
      stackConfig({
        captureTraffic: true,
        websites: {
          github: { live: true, domains: ["github.com", "140.82.112.3", "gist.github.com"] },
          gist: { domains: ["gist.github.com"], allowHosts: ["x.test"] },
          gateway: { domains: [] },
        },
        computers: { desk: { network: ["10.0.0.1"], startTabs: ["https://example.com/"] }, gist: { network: "none" } },
      }),
      { stack: "Bad_Stack" },
    );
    expect(result.ok).toBe(false);
    if (result.ok) return;
    expect(result.problems.map(formatProblem)).toEqual([
      `multienv: stack "Bad_Stack": a stack name must be lowercase letters, digits and inner hyphens, at most 40 characters, since it prefixes every container name`,
      `multienv:websites.gateway: site name "gateway" is reserved for the env's own parts; choose another name`,
      `multienv:computers.gist: computer "gist" has the name of a website; a site and a computer each need their own name`,
      `multienv:websites.gist.allowHosts: only a live site has allowHosts; remove them or set live: true`,
      `multienv:websites.github.domains[1]: "140.82.112.3" is an address; a live site's names must be host names`,
      `multienv:computers.desk.network[0]: "10.0.0.1" is an address; an allowlist holds host names (use network: allow-all to reach addresses)`,
      `multienv:computers.desk.startTabs[0]: "example.com" is claimed by no website of the env, so computer desk, which routes sites, cannot open a start tab there; add it to a website's domains or remove the tab`,
    ]);
    expect(result.warnings).toHaveLength(2);
    expect(result.warnings[0]).toMatch(
      /^multienv:websites\.github\.domains\[2\]: "gist\.github\.com" is claimed by synthetic site gist/,
    );
    expect(result.warnings[1]).toMatch(
      /^multienv:websites\.gateway\.domains: is empty: the synthetic site is deployed/,
    );
  });

  it("is plain data: JSON round-trips it", () => {
    const p = planned(demo);
    expect(JSON.parse(JSON.stringify(p))).toEqual(p);
    expect(structuredClone(p)).toEqual(p);
  });

  it("plans 100 synthetic sites, 10 live sites and 10 computers quickly, growing linearly", () => {
    const websites: Record<string, unknown> = {};
    for (let i = 0; i < 100; i++) websites[`site${i}`] = { domains: [`site${i}.test`, `*.site${i}.test`] };
    for (let i = 0; i < 10; i++)
      websites[`live${i}`] = { live: true, domains: [`live${i}.example`], allowHosts: [`cdn${i}.example`] };
    const computers: Record<string, unknown> = {};
    for (let i = 0; i < 10; i++)
      computers[`desk${i}`] = { network: ["pypi.org"], startTabs: [`https://site${i}.test/`] };
    const config = stackConfig({ websites, computers, captureTraffic: true });
    const started = performance.now();
    const p = planned(config);
    expect(performance.now() - started).toBeLessThan(500);
    expect(p.websites).toHaveLength(110);
    expect(p.capture.sidecars).toHaveLength(210);
    expect(p.computers[0].reaching).toHaveLength(21);
  });
});
