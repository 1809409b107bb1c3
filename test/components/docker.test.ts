// The docker target under Pulumi's mocks: the real program, the graph it would register on the local engine.
import { beforeAll, describe, expect, it } from "vitest";
import {
  siteProxyServiceConfig,
  browserServiceConfig,
  gatewayServiceConfig,
  DOCKER_DEFAULT_ADDRESS_POOLS,
  type Plan,
} from "../../src/plan";
import { validateStackConfig } from "../../src/config";
import { GATEWAY_START_SECONDS, goDuration } from "../../src/plan/wiring";
import { computerAgentToken, computerControlToken } from "../../src/protocol/auth";
import type { Graph } from "../../src/runner/check/graph";
import {
  CONTAINER,
  DOCKER_PROVIDER,
  IMAGE,
  NETWORK,
  VOLUME,
  container,
  containers,
  dockerResources,
  envOf,
  graphOf,
  mountsOf,
  networksOf,
  rawConfig,
  recordDependencies,
  resource,
} from "./helpers";
import { planned } from "../helpers/plans";

const STACK = "t1";
const CONFIG = {
  target: "docker",
  captureTraffic: true,
  capture: { fileSizeMb: 5, fileCount: 3 },
  websites: {
    shop: {
      domains: ["shop.test"],
      server: { image: "multienv/sample-shop-server" },
      frontend: { image: "multienv/sample-shop-frontend" },
      settings: { currency: "USD" },
    },
    github: {
      live: true,
      domains: ["github.com", "*.github.com"],
      allowHosts: ["*.githubassets.com"],
      server: { image: "multienv/sample-live-server" },
      settings: { account: "alex" },
      secretSettings: { token: "githubToken" },
    },
  },
  computers: {
    desktop: { network: ["example.org"], startTabs: ["https://shop.test/", "https://github.com/"] },
    open: { network: "allow-all" },
    offline: { network: "none" },
  },
};
const SECRET_VALUE = "ghp_not-a-real-token-0123456789";

function planOf(config: Record<string, unknown>, stack: string): Plan {
  const { config: raw, secretKeys } = rawConfig(config, { githubToken: SECRET_VALUE });
  const values = Object.fromEntries(
    Object.entries(raw).map(([k, v]) => [
      k.slice("multienv:".length),
      secretKeys.includes(k) ? { secret: true } : { secret: false, value: v },
    ]),
  );
  const validated = validateStackConfig(values as never, stack);
  if (!validated.config) throw new Error(JSON.stringify(validated.problems));
  return planned(validated.config, { stack });
}

describe("docker target", () => {
  let graph: Graph;
  let revealed: Graph;
  let demoPlan: Plan;
  const recorded = recordDependencies();
  beforeAll(async () => {
    graph = await graphOf(STACK, CONFIG, { githubToken: SECRET_VALUE });
    recorded.stop();
    revealed = await graphOf(STACK, CONFIG, { githubToken: SECRET_VALUE }, true);
    demoPlan = planOf(CONFIG, STACK);
  });

  it("puts each container on exactly the networks of the topology", () => {
    const networks = Object.fromEntries(
      containers(graph)
        .filter((c) => c.inputs.networksAdvanced)
        .map((c) => [c.name, networksOf(c.inputs)]),
    );
    expect(networks).toEqual({
      // The gateway: the sites (env), the runner (ingress), each computer's proxy (its link).
      "t1-gateway": ["t1-env", "t1-ingress", "t1-desktop-link", "t1-offline-link", "t1-open-link"],
      "t1-shop-server": ["t1-env"],
      "t1-shop-frontend": ["t1-env"],
      // A live site's server calls the real site.
      "t1-github-server": ["t1-env", "t1-egress"],
      // Proxies: own net + link to the gateway, plus an egress of their own only when the computer reaches
      // public hosts. Never the env network or the live servers' egress.
      "t1-desktop-proxy": ["t1-desktop-net", "t1-desktop-link", "t1-desktop-egress"],
      "t1-open-proxy": ["t1-open-net", "t1-open-link", "t1-open-egress"],
      "t1-offline-proxy": ["t1-offline-net", "t1-offline-link"],
      // A browser is on its own network only.
      "t1-desktop-browser": ["t1-desktop-net"],
      "t1-open-browser": ["t1-open-net"],
      "t1-offline-browser": ["t1-offline-net"],
    });
    expect(container(graph, "t1-shop-server").networksAdvanced[0].aliases).toEqual(["shop-server"]);
    expect(container(graph, "t1-shop-frontend").networksAdvanced[0].aliases).toEqual(["shop-frontend"]);
  });

  it("deletes each Docker resource on its own (the local engine outlives the stack)", () => {
    for (const r of graph.resources) expect(r.deletedWith, r.name).toBeUndefined();
  });

  it("makes the env and computer networks internal; egress and ingress reach out", () => {
    const internal = Object.fromEntries(
      graph.resources.filter((r) => r.type === NETWORK).map((r) => [r.inputs.name, r.inputs.internal]),
    );
    expect(internal).toEqual({
      "t1-env": true,
      "t1-desktop-net": true,
      "t1-desktop-link": true,
      "t1-open-net": true,
      "t1-open-link": true,
      "t1-offline-net": true,
      "t1-offline-link": true,
      "t1-egress": false,
      "t1-ingress": false,
      "t1-desktop-egress": false,
      "t1-open-egress": false,
    });
  });

  it("runs one capture sidecar per website container, in that container's network namespace", () => {
    const sidecars = containers(graph).filter((c) => c.name.endsWith("-capture"));
    expect(sidecars.map((s) => s.name).sort()).toEqual([
      "t1-github-server-capture",
      "t1-shop-frontend-capture",
      "t1-shop-server-capture",
    ]);
    for (const sidecar of sidecars) {
      const target = sidecar.name.replace(/-capture$/, "");
      expect(sidecar.inputs.networkMode).toBe(`container:${target}-id`);
      expect(sidecar.inputs.networksAdvanced).toBeUndefined();
    }
    // tcpdump under a script that restarts it in a restarted container's new namespace: the files' base, their
    // size and count from the config.
    const shop = container(graph, "t1-shop-server-capture");
    const [sh, dashC, script, ...args] = [...shop.entrypoints, ...shop.command];
    expect([sh, dashC, ...args]).toEqual(["sh", "-c", "capture", "/captures/shop-server", "5", "3"]);
    expect(script).toContain('tcpdump -i any -n -U -w "$base.pcap" -C "$size" -W "$count" -Z root');
  });

  it("gives NET_RAW/NET_ADMIN to capture sidecars alone; every other container drops NET_RAW", () => {
    expect(containers(graph)).toHaveLength(13);
    for (const c of containers(graph)) {
      const caps = c.inputs.capabilities as { adds?: string[]; drops?: string[] };
      // Spelt as Docker reads them back, so a refresh finds no drift.
      if (c.name.endsWith("-capture")) {
        expect(caps.adds, c.name).toEqual(["CAP_NET_RAW", "CAP_NET_ADMIN"]);
      } else {
        expect(caps.adds ?? [], c.name).toEqual([]);
        expect(caps.drops, c.name).toContain("CAP_NET_RAW");
      }
      expect(c.inputs.privileged, c.name).toBeUndefined();
    }
  });

  it("mounts the captures volume rw in sidecars, ro in the gateway, nowhere else; the CA volume rw in the proxy, ro in the browser", () => {
    const mounts = Object.fromEntries(containers(graph).map((c) => [c.name, mountsOf(c.inputs)]));
    for (const [name, list] of Object.entries(mounts)) {
      const captures = list.filter((m) => m.startsWith("t1-captures:"));
      if (name.endsWith("-capture")) expect(captures, name).toEqual(["t1-captures:/captures:rw"]);
      else if (name === "t1-gateway") expect(captures, name).toEqual(["t1-captures:/captures:ro"]);
      else expect(captures, name).toEqual([]);
    }
    expect(mounts["t1-desktop-proxy"]).toEqual(["t1-desktop-ca:/var/lib/multienv/ca:rw"]);
    expect(mounts["t1-desktop-browser"]).toEqual(["t1-desktop-ca:/var/lib/multienv/ca:ro"]);
    expect(mounts["t1-shop-server"]).toEqual([]);
  });

  it("creates the gateway beside the sites and captures, and collects before any container of theirs is removed", () => {
    const urnOf = (name: string) => containers(graph).find((c) => c.inputs.name === name)!.urn;
    const siteContainers = containers(graph)
      .filter((c) => /^t1-(shop|github)-/.test(c.inputs.name as string))
      .map((c) => c.urn);
    expect(siteContainers.length).toBeGreaterThanOrEqual(5);
    // Its health check waits for them; ordered after them, its own start would wait too.
    const gateway = recorded.dependencies.get(urnOf("t1-gateway"));
    expect(gateway, "the gateway's registration was recorded").toBeDefined();
    expect(gateway!.filter((urn) => siteContainers.includes(urn))).toEqual([]);
    // The collector is deleted first on destroy: every container whose capture or log it collects outlives it.
    const collector = graph.resources.find((r) => r.name === "t1-capture-collector")!;
    expect(recorded.dependencies.get(collector.urn)).toEqual(
      expect.arrayContaining([...siteContainers, urnOf("t1-gateway"), urnOf("t1-desktop-proxy")]),
    );
  });

  it("publishes the gateway on loopback only, with a health check the deploy waits for", () => {
    const gateway = container(graph, "t1-gateway");
    expect(gateway.ports).toEqual([{ internal: 8080, ip: "127.0.0.1" }]);
    expect(gateway.wait).toBe(true);
    // Its wait covers its websites' containers coming up beside it, not only its own start, and a check that fails
    // while they start counts only after that wait: a crowded engine's slow sites do not make it unhealthy.
    expect(gateway.waitTimeout).toBe(GATEWAY_START_SECONDS);
    // Spelt as the provider reads it back (Go's duration form), or every later deploy would replace the gateway.
    expect(gateway.healthcheck.startPeriod).toBe(goDuration(GATEWAY_START_SECONDS));
    // On its published listener, which is bound to the gateway's ingress address alone; checked every second, so
    // the deploy's wait ends soon after the gateway is up.
    expect(gateway.healthcheck.tests.slice(0, 3)).toEqual(["CMD", "bash", "-c"]);
    expect(gateway.healthcheck.tests[3]).toContain("/dev/tcp/gateway-ingress/8080");
    expect(gateway.healthcheck.tests[3]).toContain("GET /healthz HTTP/1.0");
    expect(gateway.healthcheck.interval).toBe("1s");
    for (const c of containers(graph)) if (c.name !== "t1-gateway") expect(c.inputs.ports ?? [], c.name).toEqual([]);
  });

  it("hands each service its config from src/plan, and the site server its settings as one JSON line", () => {
    const gatewayEnv = envOf(container(revealed, "t1-gateway"));
    expect(JSON.parse(gatewayEnv.MULTIENV_GATEWAY_CONFIG)).toEqual(gatewayServiceConfig(demoPlan));
    expect(gatewayEnv.MULTIENV_CONTROL_TOKEN).toBe("<random 32 bytes>");
    const networkNames = graph.resources.filter((r) => r.type === NETWORK).map((r) => r.inputs.name);
    for (const computer of demoPlan.computers) {
      const proxyEnv = envOf(container(revealed, computer.proxyContainerName));
      const { deny, ...proxyConfig } = JSON.parse(proxyEnv.MULTIENV_SITE_PROXY_CONFIG);
      expect(proxyConfig).toEqual(siteProxyServiceConfig(demoPlan, computer));
      // Every network of the env is denied to every proxy, its own included: their subnets as the engine gave them,
      // and every subnet Docker may give any network (the graph asks no engine for its own pools).
      expect(deny.sort()).toEqual(
        [...networkNames.map((n) => `<subnet of ${n}>`), ...DOCKER_DEFAULT_ADDRESS_POOLS].sort(),
      );
      // The proxy's own token, derived from the control token: it opens this computer's control listener alone.
      expect(proxyEnv.MULTIENV_SITE_PROXY_TOKEN).toBe(computerControlToken("<random 32 bytes>", computer.name));
      expect(JSON.parse(envOf(container(graph, computer.browserContainerName)).MULTIENV_BROWSER_CONFIG)).toEqual(
        browserServiceConfig(demoPlan, computer),
      );
    }
    const shopEnv = envOf(container(graph, "t1-shop-server"));
    expect(shopEnv.AGENTENV_WEBSITE_SETTINGS).toBe('{"currency":"USD"}');
    // The frontend is told its own server alone, never the site's settings.
    expect(container(graph, "t1-shop-frontend").envs).toEqual(["AGENTENV_WEBSITE_SERVER=http://shop-server:8000"]);
  });

  it("exports each computer's agent token as a secret, derived as the gateway derives it, and gives it to no container", () => {
    expect(graph.outputs.agentTokens).toBe("[secret]");
    // A revealed graph shows a secret as {"[secret]": value}.
    const tokens = (revealed.outputs.agentTokens as Record<string, Record<string, string>>)["[secret]"];
    expect(tokens).toEqual(
      Object.fromEntries(demoPlan.computers.map((c) => [c.name, computerAgentToken("<random 32 bytes>", c.name)])),
    );
    // Only the gateway holds it, derived at start: no computer, proxy or site is given it.
    const inputs = JSON.stringify(revealed.resources.map((r) => r.inputs));
    for (const token of Object.values(tokens)) expect(inputs).not.toContain(token);
  });

  it("keeps the control token and secret settings secret: the whole env value is a secret, the value merged in", () => {
    const text = JSON.stringify(graph);
    expect(text).not.toContain(SECRET_VALUE);
    expect(container(graph, "t1-github-server").envs).toBe("[secret]");
    expect(container(graph, "t1-gateway").envs).toBe("[secret]");
    for (const proxy of ["t1-desktop-proxy", "t1-open-proxy", "t1-offline-proxy"]) {
      expect(container(graph, proxy).envs, proxy).toBe("[secret]");
      expect(resource(graph, CONTAINER, proxy).additionalSecretOutputs, proxy).toEqual(["envs"]);
    }
    const revealedEnv = container(revealed, "t1-github-server").envs;
    expect(Object.keys(revealedEnv)).toEqual(["[secret]"]);
    expect(JSON.parse(envOf(container(revealed, "t1-github-server")).AGENTENV_WEBSITE_SETTINGS)).toEqual({
      account: "alex",
      token: SECRET_VALUE,
    });
    const generator = resource(graph, "pulumi-nodejs:dynamic/multienv:Secret", "t1-control-token-generator");
    expect(generator.additionalSecretOutputs).toContain("value");
    expect(generator.inputs.bytes).toBe(32);
    expect(graph.outputs.controlToken).toBe("[secret]");
  });

  it("creates every docker resource on the local engine (DOCKER_HOST or the default socket), through its one provider", () => {
    const onEngine = dockerResources(graph);
    expect(onEngine.length).toBeGreaterThan(20);
    for (const r of onEngine) expect(r.provider, `${r.type} ${r.name}`).toBe("t1-engine-provider");
    // The engine's provider names no host: the provider then reads DOCKER_HOST, else the default socket.
    const providers = graph.resources.filter((r) => r.type.startsWith("pulumi:providers:"));
    expect(providers.map((p) => `${p.type} ${p.name}`)).toEqual([`${DOCKER_PROVIDER} t1-engine-provider`]);
    expect(providers[0].inputs).toEqual({});
    expect(graph.resources.some((r) => r.type.startsWith("aws:"))).toBe(false);
    // The project's own resources are served by their dynamic provider, never the docker one.
    for (const r of graph.resources.filter((r) => r.type.startsWith("pulumi-nodejs:")))
      expect(r.provider, `${r.type} ${r.name}`).toBeUndefined();
  });

  it("builds no project image and runs the task's site images as given", () => {
    // The project's images are `npm run images`'s: the deploy declares no image resource for them, whatever it runs.
    expect(
      graph.resources
        .filter((r) => r.type === IMAGE)
        .map((r) => r.inputs.name)
        .sort(),
    ).toEqual(["multienv/sample-live-server", "multienv/sample-shop-frontend", "multienv/sample-shop-server"]);
    expect(resource(graph, IMAGE, "t1-engine-image-multienv-sample-shop-server").inputs).toEqual({
      name: "multienv/sample-shop-server",
      keepLocally: true,
    });
    // Containers run the id the engine has under the tag (read at deploy), so a rebuilt image replaces them.
    expect(container(graph, "t1-gateway").image).toBe("<id of multienv/gateway:latest>");
    expect(container(graph, "t1-desktop-browser").image).toBe("<id of multienv/browser:latest>");
    expect(container(graph, "t1-desktop-proxy").image).toBe("<id of multienv/site-proxy:latest>");
    expect(container(graph, "t1-shop-server").image).toBe("<id of multienv/sample-shop-server>");
  });

  it("exports the outputs docs/design.md names", () => {
    const url = "http://127.0.0.1:<port chosen by Docker>";
    expect(graph.outputs).toEqual({
      gatewayUrl: url,
      controlToken: "[secret]",
      agentTokens: "[secret]",
      websites: {
        shop: { live: false, domains: ["shop.test"], svcUrl: `${url}/svc/shop/`, browseUrl: `${url}/website/shop/` },
        github: { live: true, domains: ["github.com", "*.github.com"], svcUrl: `${url}/svc/github/` },
      },
      computers: {
        desktop: {
          network: ["example.org"],
          reaching: demoPlan.computers.find((c) => c.name === "desktop")!.reaching,
          siteTable: { shop: ["shop.test"] },
          cdpUrl: `${url}/computers/desktop/cdp`,
          startTabs: ["https://shop.test/", "https://github.com/"],
        },
        offline: {
          network: "none",
          reaching: "none",
          siteTable: { shop: ["shop.test"] },
          cdpUrl: `${url}/computers/offline/cdp`,
          startTabs: [],
        },
        open: {
          network: "allow-all",
          reaching: "allow-all",
          siteTable: { shop: ["shop.test"] },
          cdpUrl: `${url}/computers/open/cdp`,
          startTabs: [],
        },
      },
      live: true,
      liveReasons: [
        {
          website: "github",
          domains: ["github.com", "*.github.com"],
          why: "live website github (github.com, *.github.com) is served live",
        },
        ...demoPlan.liveReasons.filter((r) => "computer" in r),
      ],
      liveWebsites: [
        {
          name: "github",
          domains: ["github.com", "*.github.com"],
          allowHosts: ["*.githubassets.com"],
          reproducible: false,
        },
      ],
      replayedWebsites: [],
      reproducible: false,
      captureTraffic: true,
    });
    expect(demoPlan.computers.find((c) => c.name === "desktop")!.reaching).toContain("github.com");
  });
});

describe("docker target without capture or live sites", () => {
  it("has no sidecar and no captures volume, and the gateway mounts nothing; with no live site, the computers reaching the public web make the env live", async () => {
    const computers = { ...CONFIG.computers, desktop: { network: ["example.org"], startTabs: ["https://shop.test/"] } };
    const graph = await graphOf("t2", {
      ...CONFIG,
      captureTraffic: false,
      websites: { shop: CONFIG.websites.shop },
      computers,
    });
    expect(containers(graph).filter((c) => c.name.endsWith("-capture"))).toEqual([]);
    expect(
      graph.resources
        .filter((r) => r.type === VOLUME)
        .map((r) => r.inputs.name)
        .sort(),
    ).toEqual(["t2-desktop-ca", "t2-offline-ca", "t2-open-ca"]);
    expect(container(graph, "t2-gateway").mounts).toEqual([]);
    expect(graph.outputs).toMatchObject({ live: true, liveWebsites: [], reproducible: false, captureTraffic: false });
    expect((graph.outputs.liveReasons as { why: string }[]).map((r) => r.why)).toEqual([
      "computer desktop reaches public hosts on its allowlist (example.org)",
      "computer open reaches the public web (network: allow-all)",
    ]);
    // No live host to reach: the allowlist computer reaches only example.org, still on the web.
    expect(networksOf(container(graph, "t2-desktop-proxy"))).toContain("t2-desktop-egress");
  });

  it("runs a computer's own browser image instead of building the project's", async () => {
    const graph = await graphOf("t3", {
      websites: { shop: CONFIG.websites.shop },
      computers: { kiosk: { network: "none", image: "example/kiosk:1" } },
    });
    expect(container(graph, "t3-kiosk-browser").image).toBe("<id of example/kiosk:1>");
    expect(graph.resources.some((r) => r.type === IMAGE && r.name.endsWith("browser-image"))).toBe(false);
  });

  it("refuses a website without an image, naming the config key", async () => {
    await expect(graphOf("t4", { websites: { shop: { domains: ["shop.test"] } } })).rejects.toThrow(
      "multienv:websites.shop.server.image: a website's server needs an image",
    );
  });

  it("renders the same graph on a second run in one process", async () => {
    const first = await graphOf("t5", CONFIG, { githubToken: SECRET_VALUE });
    const second = await graphOf("t5", CONFIG, { githubToken: SECRET_VALUE });
    expect(second).toEqual(first);
    expect(first.resources.filter((r) => r.type === CONTAINER)).toHaveLength(13);
  });
});
