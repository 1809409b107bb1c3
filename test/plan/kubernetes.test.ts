// The kubernetes target's plan (src/plan/targets/kubernetes.ts, src/plan/targets/kubernetes-services.ts), read as an
// attacker would: the NetworkPolicies are evaluated here, from the policies alone, into a reachability matrix of every
// pod to every pod and port, and to addresses outside the cluster, and that matrix must be the topology's arrows and
// nothing else.
import path from "node:path";
import ipaddr from "ipaddr.js";
import { describe, expect, it } from "vitest";
import { readStackFile } from "../../src/config";
import { stackConfigSchema } from "../../src/config/schema";
import type { Plan } from "../../src/plan";
import {
  KUBERNETES_NON_PUBLIC_CIDRS,
  kubernetesNetworkPolicies,
  kubernetesPods,
  placementGroupOf,
  publicWebPeers,
  type PlannedNetworkPolicy,
  type PlannedPod,
} from "../../src/plan/targets/kubernetes";
import {
  kubernetesBrowserConfig,
  kubernetesGatewayConfig,
  kubernetesReplayServerConfig,
  kubernetesSiteProxyConfig,
} from "../../src/plan/targets/kubernetes-services";
import { replayServerConfigSchema } from "../../src/protocol/replay-server-config";
import { parseBrowserConfig } from "../../src/browser/config";
import { parseGatewayConfig } from "../../src/gateway/config";
import { parseSiteProxyConfig } from "../../src/site-proxy/config";
import { createAddressCheck } from "../../src/protocol/address-check";
import { NON_PUBLIC_IPV4, NON_PUBLIC_IPV6 } from "../../src/protocol/address-ranges";
import { planned } from "../helpers/plans";
import type { StackConfig } from "../../src/plan/types";

const DEMO_FILE = path.join(__dirname, "../../stacks/Pulumi.demo-kubernetes.yaml");
const demo = readStackFile(DEMO_FILE);
const STACK = demo.stack;

/** The demo's config with changes, through the schema again (its defaults filled as a user's would be). */
function demoWith(changes: Record<string, unknown>): StackConfig {
  return stackConfigSchema.parse({ ...structuredClone(demo.config), ...changes });
}

const demoPlan = planned(demo.config, { stack: STACK });
/** The demo plus a computer that reaches no public host, and a synthetic site on ports of its own. */
const widerPlan = planned(
  demoWith({
    websites: {
      ...demo.config.websites,
      notes: {
        domains: ["notes.test"],
        server: { image: "notes-server:1", port: 9001 },
        frontend: { image: "notes-frontend:1", port: 3000 },
      },
    },
    computers: { ...demo.config.computers, offline: { network: "none" } },
  }),
  { stack: STACK },
);
const uncapturedPlan = planned(demoWith({ captureTraffic: false }), { stack: STACK });
/** The demo with its live site github served from a recording (as the runner reads it) rather than live. */
const RECORDING = { path: "/recordings/github.har", sha256: "b".repeat(64), bytes: 2 * 1024 * 1024 };
const replayedPlan = planned(
  demoWith({
    websites: {
      ...demo.config.websites,
      github: {
        ...demo.config.websites.github,
        replay: { file: "github.har", ignoreParams: [], ignoreBodyFields: [] },
      },
    },
  }),
  { stack: STACK, recordings: { github: RECORDING } },
);

// --- an evaluator of NetworkPolicies -------------------------------------------------------------------------

/** Something that opens or takes a connection: a pod of some namespace (with its address), or an outside address. */
interface Endpoint {
  name: string;
  address: string;
  /** A pod's namespace and labels; absent for an address outside the cluster. */
  namespace?: string;
  labels?: Record<string, string>;
}

type Protocol = "TCP" | "UDP";

// Loosely typed: a peer or port of a kind the plan's types do not name must fail the test, not be ignored.
type AnyPeer = Record<string, any>;
type AnyPort = { protocol?: string; port?: number | string; endPort?: number };

function inCidr(address: string, cidr: string): boolean {
  const parsed = ipaddr.parse(address);
  const range = ipaddr.parseCIDR(cidr);
  return parsed.kind() === range[0].kind() && parsed.match(range);
}

function labelsMatch(selector: AnyPeer, labels: Record<string, string> | undefined): boolean {
  if (labels === undefined) return false;
  const keys = Object.keys(selector);
  if (keys.some((k) => k !== "matchLabels")) throw new Error(`selector with ${keys.join(", ")} is not evaluated`);
  return Object.entries((selector.matchLabels ?? {}) as Record<string, string>).every(([k, v]) => labels[k] === v);
}

/** NetworkPolicy peer semantics: a podSelector alone is the policy's own namespace; an ipBlock is addresses. */
function peerMatches(peer: AnyPeer, namespace: string, other: Endpoint): boolean {
  const keys = Object.keys(peer);
  if (keys.length !== 1) throw new Error(`peer ${JSON.stringify(peer)} is not evaluated`);
  if (peer.podSelector !== undefined)
    return other.namespace === namespace && labelsMatch(peer.podSelector, other.labels);
  if (peer.ipBlock !== undefined) {
    const { cidr, except = [] } = peer.ipBlock as { cidr: string; except?: string[] };
    return inCidr(other.address, cidr) && !except.some((e) => inCidr(other.address, e));
  }
  throw new Error(`peer ${JSON.stringify(peer)} is not evaluated`);
}

function portMatches(ports: AnyPort[] | undefined, protocol: Protocol, port: number): boolean {
  if (ports === undefined || ports.length === 0) return true;
  return ports.some((p) => {
    if (typeof p.port === "string") throw new Error(`named port ${p.port} is not evaluated`);
    if ((p.protocol ?? "TCP") !== protocol) return false;
    if (p.port === undefined) return true;
    return p.endPort === undefined ? p.port === port : port >= p.port && port <= p.endPort;
  });
}

/**
 * Whether the policies let `self` (a pod of `namespace`) send to / take from `other`: a pod no policy of that
 * direction selects is not isolated (the API's rule), else some rule of a policy selecting it must allow the peer
 * and port (an absent or empty peer list is every peer; absent or empty ports every port).
 */
function allows(
  policies: PlannedNetworkPolicy[],
  direction: "Ingress" | "Egress",
  namespace: string,
  self: Endpoint,
  other: Endpoint,
  protocol: Protocol,
  port: number,
): boolean {
  if (self.namespace !== namespace) return true;
  const selecting = policies.filter(
    (p) => p.spec.policyTypes.includes(direction) && labelsMatch(p.spec.podSelector, self.labels),
  );
  if (selecting.length === 0) return true;
  return selecting.some((p) => {
    const rules: { peers?: AnyPeer[]; ports?: AnyPort[] }[] =
      direction === "Egress"
        ? (p.spec.egress ?? []).map((r) => ({ peers: r.to, ports: r.ports }))
        : (p.spec.ingress ?? []).map((r) => ({ peers: r.from, ports: r.ports }));
    return rules.some(
      (r) =>
        (r.peers === undefined ||
          r.peers.length === 0 ||
          r.peers.some((peer) => peerMatches(peer, namespace, other))) &&
        portMatches(r.ports, protocol, port),
    );
  });
}

/** A connection from `from` to `to` on `port`: allowed by `from`'s egress and by `to`'s ingress. */
function connects(
  policies: PlannedNetworkPolicy[],
  namespace: string,
  from: Endpoint,
  to: Endpoint,
  port: number,
  protocol: Protocol = "TCP",
): boolean {
  return (
    allows(policies, "Egress", namespace, from, to, protocol, port) &&
    allows(policies, "Ingress", namespace, to, from, protocol, port)
  );
}

/** The plan's pods as endpoints of its namespace, each at an address of a typical pod range. */
function podEndpoints(p: Plan): (Endpoint & { pod: PlannedPod })[] {
  return kubernetesPods(p).map((pod, i) => ({
    name: pod.name,
    address: `10.244.${Math.floor(i / 200)}.${10 + (i % 200)}`,
    namespace: p.kubernetes?.namespace,
    labels: pod.labels,
    pod,
  }));
}

const outside = (address: string): Endpoint => ({ name: address, address });

/** Every port a pod of `p` listens on, the gateway's runner port, DNS, and a few the web uses. */
function portsOf(p: Plan): number[] {
  const ports = new Set([p.gateway.port, 22, 53, 80, 443, 6443, 10250]);
  for (const pod of kubernetesPods(p)) for (const port of pod.ports) ports.add(port.port);
  for (const site of p.websites) {
    ports.add(site.server.port);
    if (site.frontend) ports.add(site.frontend.port);
  }
  return [...ports].sort((a, b) => a - b);
}

/** Every pod-to-pod connection the policies allow, as `from -> to:port`. */
function podMatrix(p: Plan): string[] {
  const policies = kubernetesNetworkPolicies(p);
  const namespace = p.kubernetes?.namespace ?? "";
  const pods = podEndpoints(p);
  const allowed: string[] = [];
  for (const from of pods)
    for (const to of pods) {
      if (from === to) continue;
      for (const port of portsOf(p))
        if (connects(policies, namespace, from, to, port)) allowed.push(`${from.name} -> ${to.name}:${port}`);
    }
  return allowed.sort();
}

/** The topology's arrows (docs/design.md "Topology"), written from the plan's sites and computers, not its pods. */
function topologyArrows(p: Plan): string[] {
  const arrows: string[] = [];
  const captured = (site: string, role: string) => p.capture.sidecars.some((s) => s.site === site && s.role === role);
  for (const site of p.websites) {
    const server = `${site.name}-server`;
    arrows.push(`gateway -> ${server}:${site.server.port}`);
    if (captured(site.name, "server")) arrows.push(`gateway -> ${server}:8090`);
    if (site.frontend) {
      const frontend = `${site.name}-frontend`;
      arrows.push(`gateway -> ${frontend}:${site.frontend.port}`, `${frontend} -> ${server}:${site.server.port}`);
      if (captured(site.name, "frontend")) arrows.push(`gateway -> ${frontend}:8090`);
    }
    if (site.replay) {
      // The replay server is the site's frontend for the gateway (its site and control ports), captured as that.
      const replay = `${site.name}-replay`;
      arrows.push(`gateway -> ${replay}:${site.replay.port}`, `gateway -> ${replay}:${site.replay.controlPort}`);
      if (captured(site.name, "frontend")) arrows.push(`gateway -> ${replay}:8090`);
    }
  }
  for (const c of p.computers) {
    const proxy = `${c.name}-proxy`;
    const browser = `${c.name}-browser`;
    arrows.push(
      `gateway -> ${proxy}:9000`,
      `${proxy} -> gateway:8081`,
      `${browser} -> ${proxy}:3128`,
      `${proxy} -> ${browser}:9222`,
    );
  }
  return arrows.sort();
}

const PUBLIC = ["11.99.0.2", "8.8.8.8", "140.82.112.3", "2606:4700::1", "2a00:1450:4001:80b::200e"];
/** The API server's Service, nodes, private ranges, metadata, loopback, shared, and their IPv6 forms. */
const NON_PUBLIC = [
  "10.96.0.1",
  "10.0.0.1",
  "169.254.169.254",
  "127.0.0.1",
  "100.64.0.1",
  "172.16.0.1",
  "172.18.0.2",
  "192.168.1.1",
  "0.0.0.0",
  "::1",
  "fe80::1",
  "fd00::1",
  // No IPv4-mapped forms: they are a socket API's spelling, never a packet's destination (the API refuses them in a
  // policy); the site proxy judges them by the IPv4 address inside.
  "64:ff9b::a9fe:a9fe",
  // One in each special-purpose range (IANA's registries), and IPv6 outside 2000::/3.
  "192.0.0.9",
  "192.0.2.1",
  "198.51.100.1",
  "203.0.113.1",
  "198.18.0.1",
  "198.19.255.254",
  "192.88.99.1",
  "224.0.0.1",
  "240.0.0.1",
  "255.255.255.255",
  "::",
  "::808:808",
  "64:ff9b::808:808",
  "64:ff9b:1::808:808",
  "100::1",
  "100:0:0:1::1",
  "2001::1",
  "2001:2::1",
  "2001:20::1",
  "2001:db8::1",
  "2002:808:808::1",
  "3fff::1",
  "5f00::1",
  "4000::1",
  "8000::1",
  "fe80::1",
  "ff02::1",
];
/** Ports other than DNS's: a connection to a non-public address on any of them is the cluster's or a host's. */
const NON_DNS_PORTS = [22, 80, 443, 2379, 6443, 8080, 10250];

// --- tests -----------------------------------------------------------------------------------------------------

describe("kubernetes pods of the demo", () => {
  const pods = kubernetesPods(demoPlan);
  const byName = new Map(pods.map((p) => [p.name, p]));

  it("has one pod per website container, the gateway, and each computer's proxy and browser, by the names the services use", () => {
    expect(pods.map((p) => p.name)).toEqual([
      "gist-server",
      "gist-frontend",
      "github-server",
      "shop-server",
      "shop-frontend",
      "gateway",
      "desktop-proxy",
      "desktop-browser",
      "open-proxy",
      "open-browser",
    ]);
  });

  it("labels each pod with its stack, its role, and its site or computer (so one selector names one pod)", () => {
    expect(byName.get("shop-frontend")?.labels).toEqual({
      "multienv.stack": STACK,
      "multienv.role": "frontend",
      "multienv.site": "shop",
    });
    expect(byName.get("github-server")?.labels).toEqual({
      "multienv.stack": STACK,
      "multienv.role": "server",
      "multienv.site": "github",
    });
    expect(byName.get("gateway")?.labels).toEqual({ "multienv.stack": STACK, "multienv.role": "gateway" });
    expect(byName.get("desktop-proxy")?.labels).toEqual({
      "multienv.stack": STACK,
      "multienv.role": "site-proxy",
      "multienv.computer": "desktop",
    });
    expect(byName.get("open-browser")?.labels).toEqual({
      "multienv.stack": STACK,
      "multienv.role": "browser",
      "multienv.computer": "open",
    });
    // No pod's labels are a subset of another's: a policy selecting one never selects a second.
    for (const a of pods)
      for (const b of pods)
        if (a !== b)
          expect(labelsMatch({ matchLabels: a.labels }, b.labels), `${a.name} selects ${b.name}`).toBe(false);
  });

  it("exposes each pod's listeners and nothing else: the gateway's runner port is never one of them", () => {
    expect(Object.fromEntries(pods.map((p) => [p.name, p.ports.map((port) => port.port)]))).toEqual({
      "gist-server": [8000, 8090],
      "gist-frontend": [80, 8090],
      "github-server": [8000, 8090],
      "shop-server": [8000, 8090],
      "shop-frontend": [80, 8090],
      gateway: [8081],
      "desktop-proxy": [3128, 9000],
      "desktop-browser": [9222],
      "open-proxy": [3128, 9000],
      "open-browser": [9222],
    });
    expect(kubernetesPods(uncapturedPlan).find((p) => p.name === "shop-server")?.ports).toEqual([
      { name: "http", port: 8000 },
    ]);
  });

  it("maps in each pod's /etc/hosts exactly the names its service dials, each to the pod behind it", () => {
    expect(Object.fromEntries(pods.map((p) => [p.name, p.hostAliases]))).toEqual({
      "gist-server": {},
      "gist-frontend": { "gist-server": "gist-server" },
      "github-server": {},
      "shop-server": {},
      "shop-frontend": { "shop-server": "shop-server" },
      gateway: {
        "gist-server": "gist-server",
        "gist-frontend": "gist-frontend",
        "github-server": "github-server",
        "shop-server": "shop-server",
        "shop-frontend": "shop-frontend",
        "proxy-desktop": "desktop-proxy",
        "proxy-open": "open-proxy",
      },
      "desktop-proxy": { "gateway-desktop": "gateway", browser: "desktop-browser" },
      "desktop-browser": { "site-proxy": "desktop-proxy" },
      "open-proxy": { "gateway-open": "gateway", browser: "open-browser" },
      "open-browser": { "site-proxy": "open-proxy" },
    });
  });

  it("has every name a service config dials among its pod's hostAliases, behind a pod listening on that port and reachable under the policies", () => {
    for (const p of [demoPlan, widerPlan]) {
      const all = podEndpoints(p);
      const policies = kubernetesNetworkPolicies(p);
      const ns = p.kubernetes?.namespace ?? "";
      const dials = new Map<string, string[]>();
      const add = (pod: string, url: string) => dials.set(pod, [...(dials.get(pod) ?? []), url]);
      const gateway = kubernetesGatewayConfig(p);
      for (const site of Object.values(gateway.sites)) {
        add("gateway", site.server);
        if (site.frontend) add("gateway", site.frontend);
      }
      for (const c of Object.values(gateway.computers))
        for (const url of [c.cdp, c.proxyLog, c.endConnections]) add("gateway", url);
      for (const source of Object.values(gateway.captureSources ?? {})) add("gateway", source);
      for (const site of p.websites)
        if (site.frontend) add(`${site.name}-frontend`, `http://${site.server.alias}:${site.server.port}`);
      for (const c of p.computers) {
        const proxy = kubernetesSiteProxyConfig(p, c);
        add(`${c.name}-proxy`, proxy.gateway);
        add(`${c.name}-proxy`, `http://${proxy.control.cdp}`);
        add(`${c.name}-browser`, kubernetesBrowserConfig(p, c).proxy);
      }
      for (const from of all) {
        const urls = dials.get(from.name) ?? [];
        const hosts = new Set(urls.map((u) => new URL(u).hostname));
        expect(Object.keys(from.pod.hostAliases).sort(), `${from.name}'s hostAliases`).toEqual([...hosts].sort());
        for (const url of urls) {
          const { hostname, port: given } = new URL(url);
          const port = given === "" ? 80 : Number(given);
          const target = all.find((t) => t.name === from.pod.hostAliases[hostname]);
          expect(target, `${from.name} dials ${url}`).toBeDefined();
          expect(target?.pod.ports.map((x) => x.port)).toContain(port);
          expect(connects(policies, ns, from, target!, port), `${from.name} -> ${url}`).toBe(true);
        }
      }
    }
  });
});

describe("kubernetes NetworkPolicies as a reachability matrix", () => {
  it("begins with a default deny of every ingress and egress of every pod of the namespace", () => {
    expect(kubernetesNetworkPolicies(demoPlan)[0]).toEqual({
      name: "default-deny",
      spec: { podSelector: {}, policyTypes: ["Ingress", "Egress"] },
    });
  });

  it.each([
    ["the demo", demoPlan],
    ["the demo with an offline computer and a site on other ports", widerPlan],
    ["the demo without capture", uncapturedPlan],
    ["the demo with its live site replayed", replayedPlan],
  ])("allows between pods exactly the topology's arrows, on every port any pod listens on (%s)", (_, p) => {
    expect(podMatrix(p)).toEqual(topologyArrows(p));
  });

  it("lets no website reach a proxy or a browser, no site another site, no browser the gateway or a site, no computer another", () => {
    const matrix = podMatrix(widerPlan);
    const pods = kubernetesPods(widerPlan);
    const role = (name: string) => pods.find((p) => p.name === name)!;
    const forbidden = matrix.filter((arrow) => {
      const [from, rest] = arrow.split(" -> ");
      const to = rest.split(":")[0];
      const a = role(from);
      const b = role(to);
      if (a.site !== undefined && b.computer !== undefined) return true;
      if (a.site !== undefined && b.site !== undefined && a.site !== b.site) return true;
      if (a.role === "browser" && (b.role === "gateway" || b.site !== undefined)) return true;
      if (a.computer !== undefined && b.computer !== undefined && a.computer !== b.computer) return true;
      if (a.role === "server") return true; // a server dials no pod
      if (b.role === "gateway" && a.role !== "site-proxy") return true;
      return false;
    });
    expect(forbidden).toEqual([]);
    // Nor does anything reach the gateway's runner listener, or a proxy's control port but the gateway.
    expect(matrix.filter((a) => a.endsWith(`gateway:${widerPlan.gateway.port}`))).toEqual([]);
    expect(matrix.filter((a) => a.endsWith(":9000") && !a.startsWith("gateway -> "))).toEqual([]);
  });

  it("lets no pod of another namespace in, even one carrying the gateway's or a computer's labels", () => {
    const p = widerPlan;
    const policies = kubernetesNetworkPolicies(p);
    const ns = p.kubernetes?.namespace ?? "";
    for (const impostor of kubernetesPods(p)) {
      const from: Endpoint = { name: "impostor", address: "10.244.9.9", namespace: "other", labels: impostor.labels };
      for (const to of podEndpoints(p))
        for (const port of portsOf(p))
          expect(connects(policies, ns, from, to, port), `impostor ${impostor.name} -> ${to.name}:${port}`).toBe(false);
    }
    for (const to of podEndpoints(p))
      for (const address of [...PUBLIC, ...NON_PUBLIC])
        for (const port of portsOf(p))
          expect(connects(policies, ns, outside(address), to, port), `${address} -> ${to.name}:${port}`).toBe(false);
  });

  it("lets a live server and the proxies of reaching computers reach the public web, and no other pod", () => {
    const p = widerPlan;
    const policies = kubernetesNetworkPolicies(p);
    const ns = p.kubernetes?.namespace ?? "";
    const reachesPublic: Record<string, number[]> = {};
    for (const from of podEndpoints(p)) {
      const ports = [22, 80, 443, 5432, 8443].filter((port) =>
        PUBLIC.every((address) => connects(policies, ns, from, outside(address), port)),
      );
      const somewhere = [22, 80, 443, 5432, 8443].some((port) =>
        PUBLIC.some((address) => connects(policies, ns, from, outside(address), port)),
      );
      if (somewhere) reachesPublic[from.name] = ports;
    }
    expect(reachesPublic).toEqual({
      "github-server": [22, 80, 443, 5432, 8443],
      // An allowlist's proxy: the web's ports alone; allow-all: any port, as on Docker.
      "desktop-proxy": [80, 443],
      "open-proxy": [22, 80, 443, 5432, 8443],
    });
    const open = podEndpoints(p).find((e) => e.name === "open-proxy")!;
    expect(connects(policies, ns, open, outside("11.99.0.2"), 443, "UDP")).toBe(true);
    const desktop = podEndpoints(p).find((e) => e.name === "desktop-proxy")!;
    expect(connects(policies, ns, desktop, outside("11.99.0.2"), 443, "UDP")).toBe(false);
  });

  it("never lets a pod reach a non-public address (API server Service, nodes, private, metadata, loopback) but for DNS", () => {
    const p = widerPlan;
    const policies = kubernetesNetworkPolicies(p);
    const ns = p.kubernetes?.namespace ?? "";
    const leaks: string[] = [];
    for (const from of podEndpoints(p))
      for (const address of NON_PUBLIC)
        for (const port of NON_DNS_PORTS)
          for (const protocol of ["TCP", "UDP"] as const)
            if (connects(policies, ns, from, outside(address), port, protocol))
              leaks.push(`${from.name} -> ${address}:${port}/${protocol}`);
    expect(leaks).toEqual([]);
  });

  // The site proxy refuses these itself as cloud metadata or host-agent addresses (src/protocol/address-check.ts);
  // the policies are the wall for a pod whose code is not ours (a live site's server, the task's own image).
  it("never lets a pod reach a metadata address the site proxy itself refuses (Azure's 168.63.129.16 among them)", () => {
    const p = widerPlan;
    const policies = kubernetesNetworkPolicies(p);
    const ns = p.kubernetes?.namespace ?? "";
    const metadata = ["169.254.169.254", "169.254.170.2", "fd00:ec2::254", "100.100.100.200", "168.63.129.16"];
    const check = createAddressCheck({ reach: "allow-all" });
    for (const address of metadata) expect(check(address), address).toBe("a cloud metadata address");
    const leaks: string[] = [];
    for (const from of podEndpoints(p))
      for (const address of metadata)
        for (const port of [80, 443, 32526])
          if (connects(policies, ns, from, outside(address), port)) leaks.push(`${from.name} -> ${address}:${port}`);
    expect(leaks).toEqual([]);
  });

  it("holds one address of every non-public range, and the site proxy refuses each the policies refuse", () => {
    for (const range of [...NON_PUBLIC_IPV4, ...NON_PUBLIC_IPV6])
      expect(
        NON_PUBLIC.some((a) => inCidr(a, range.cidr)),
        `${range.cidr}: the tests hold no address in it`,
      ).toBe(true);
    // Under an allowlist every non-public address is refused; the policies' public web holds none of them either.
    const allowlist = createAddressCheck({ reach: ["a.test"] });
    const webPeers = publicWebPeers();
    for (const address of [...NON_PUBLIC, ...PUBLIC]) {
      const inWeb = webPeers.some((peer) => peerMatches(peer, "ns", outside(address)));
      expect(inWeb, `${address} in the policies' public web`).toBe(PUBLIC.includes(address));
      expect(allowlist(address) === undefined, `${address} dialled under an allowlist`).toBe(
        PUBLIC.includes(address) || address === "64:ff9b::808:808",
      );
    }
  });

  it("gives DNS (port 53, UDP and TCP) to the pods that reach the web alone", () => {
    const p = widerPlan;
    const policies = kubernetesNetworkPolicies(p);
    const ns = p.kubernetes?.namespace ?? "";
    const dns = (protocol: Protocol) =>
      podEndpoints(p)
        .filter((from) => connects(policies, ns, from, outside("10.96.0.10"), 53, protocol))
        .map((e) => e.name)
        .sort();
    expect(dns("UDP")).toEqual(["desktop-proxy", "github-server", "open-proxy"]);
    expect(dns("TCP")).toEqual(["desktop-proxy", "github-server", "open-proxy"]);
    // Never a public resolver: port 53 out to the web would be a channel no allowlist sees.
    const publicDns = podEndpoints(p).filter((from) => from.name !== "open-proxy" && from.name !== "github-server");
    for (const from of publicDns)
      for (const protocol of ["UDP", "TCP"] as Protocol[])
        expect({
          from: from.name,
          protocol,
          reached: connects(policies, ns, from, outside("8.8.8.8"), 53, protocol),
        }).toEqual({ from: from.name, protocol, reached: false });
  });

  it("gives a none computer's proxy, the browsers, the gateway and synthetic sites' pods no ipBlock at all", () => {
    for (const p of [demoPlan, widerPlan]) {
      const policies = kubernetesNetworkPolicies(p);
      for (const pod of kubernetesPods(p)) {
        const reachesWeb =
          (pod.role === "server" && p.websites.find((w) => w.name === pod.site)?.serverOnEgress) ||
          (pod.role === "site-proxy" && p.computers.find((c) => c.name === pod.computer)?.reachesPublicHosts);
        if (reachesWeb) continue;
        const blocks = policies
          .filter((policy) => labelsMatch(policy.spec.podSelector, pod.labels))
          .flatMap((policy) => [
            ...(policy.spec.egress ?? []).flatMap((r) => r.to),
            ...(policy.spec.ingress ?? []).flatMap((r) => r.from),
          ])
          .filter((peer) => "ipBlock" in peer);
        expect(blocks, `${pod.name}'s ipBlocks`).toEqual([]);
      }
    }
  });

  it("keeps every non-public range out of the public web's ipBlocks, as valid CIDRs strictly inside their block", () => {
    const policies = kubernetesNetworkPolicies(demoPlan);
    const webs = policies.filter((p) => p.name.endsWith("-to-web"));
    expect(webs.map((p) => p.name).sort()).toEqual([
      "desktop-proxy-to-web",
      "github-server-to-web",
      "open-proxy-to-web",
    ]);
    for (const web of webs) {
      const blocks = (web.spec.egress ?? []).flatMap((r) => r.to).filter((peer) => "ipBlock" in peer);
      const excepts = blocks.flatMap((b) => ("ipBlock" in b ? (b.ipBlock.except ?? []) : []));
      for (const cidr of [...KUBERNETES_NON_PUBLIC_CIDRS.ipv4, ...KUBERNETES_NON_PUBLIC_CIDRS.ipv6])
        expect(excepts, web.name).toContain(cidr);
      for (const b of blocks) {
        if (!("ipBlock" in b)) continue;
        const [base] = ipaddr.parseCIDR(b.ipBlock.cidr);
        for (const e of b.ipBlock.except ?? []) {
          expect(ipaddr.parseCIDR(e)[0].kind(), `${e} in ${b.ipBlock.cidr}`).toBe(base.kind());
          expect(ipaddr.parseCIDR(e)[1]).toBeGreaterThan(ipaddr.parseCIDR(b.ipBlock.cidr)[1]);
        }
      }
    }
  });
});

describe("kubernetes services' configs", () => {
  it("binds the gateway's runner listener to the pod's loopback alone and its browse listener to the pod's hostname", () => {
    const config = kubernetesGatewayConfig(demoPlan);
    expect(config.listen).toEqual({ host: "127.0.0.1", port: 8080 });
    expect(config.browse).toEqual({ hosts: ["gateway"], port: 8081 });
    expect(parseGatewayConfig(JSON.stringify(config)).listen.host).toBe("127.0.0.1");
  });

  it("reads captures from one capture server per website container when capture is on, never from a captures folder", () => {
    const config = kubernetesGatewayConfig(widerPlan);
    expect(config.captureSources).toEqual({
      "gist-server": "http://gist-server:8090",
      "gist-frontend": "http://gist-frontend:8090",
      "github-server": "http://github-server:8090",
      "notes-server": "http://notes-server:8090",
      "notes-frontend": "http://notes-frontend:8090",
      "shop-server": "http://shop-server:8090",
      "shop-frontend": "http://shop-frontend:8090",
    });
    expect(config).not.toHaveProperty("capturesDir");
    // The gateway itself accepts it (one source for every website container, none for another).
    expect(() => parseGatewayConfig(JSON.stringify(config))).not.toThrow();
  });

  it("has neither captureSources nor capturesDir when capture is off", () => {
    const config = kubernetesGatewayConfig(uncapturedPlan);
    expect(config).not.toHaveProperty("captureSources");
    expect(config).not.toHaveProperty("capturesDir");
    expect(() => parseGatewayConfig(JSON.stringify(config))).not.toThrow();
  });

  it("has each site proxy deny every non-public range, in every reach mode, and listen on its own pod's hostname for both ports", () => {
    for (const c of widerPlan.computers) {
      const config = kubernetesSiteProxyConfig(widerPlan, c);
      expect(config.listen).toEqual({ host: `${c.name}-proxy`, port: 3128 });
      expect(config.control).toMatchObject({ host: `${c.name}-proxy`, port: 9000, cdp: "browser:9222" });
      expect(config.gateway).toBe(`http://gateway-${c.name}:8081`);
      for (const cidr of [...KUBERNETES_NON_PUBLIC_CIDRS.ipv4, ...KUBERNETES_NON_PUBLIC_CIDRS.ipv6])
        expect(config.deny, c.name).toContain(cidr);
      for (const address of NON_PUBLIC)
        expect(
          config.deny?.some((cidr) => inCidr(address, cidr)),
          `${c.name} denies ${address}`,
        ).toBe(true);
      for (const address of PUBLIC)
        expect(
          config.deny?.some((cidr) => inCidr(address, cidr)),
          `${c.name} does not deny ${address}`,
        ).toBe(false);
      const parsed = parseSiteProxyConfig(config);
      expect(parsed.listen.host).toBe(`${c.name}-proxy`);
    }
  });

  it("binds each browser's DevTools relay to its pod's hostname, never every address or loopback", () => {
    for (const c of widerPlan.computers) {
      const config = kubernetesBrowserConfig(widerPlan, c);
      expect(config.cdpHost).toBe(`${c.name}-browser`);
      expect(config.proxy).toBe("http://site-proxy:3128");
      expect(["0.0.0.0", "::", "127.0.0.1", "localhost", "browser"]).not.toContain(config.cdpHost);
      expect(parseBrowserConfig(JSON.stringify(config)).cdpHost).toBe(`${c.name}-browser`);
    }
  });
});

describe("a replayed live site on kubernetes", () => {
  const pods = kubernetesPods(replayedPlan);
  const replay = pods.find((p) => p.name === "github-replay")!;

  it("gets a replay server pod of its own, labelled as Docker's container is, captured as the site's frontend", () => {
    expect(pods.filter((p) => p.site === "github").map((p) => p.name)).toEqual(["github-server", "github-replay"]);
    expect(replay).toMatchObject({
      role: "replay",
      labels: { "multienv.stack": STACK, "multienv.role": "replay", "multienv.site": "github" },
      ports: [
        { name: "http", port: 8070 },
        { name: "control", port: 9000 },
        { name: "captures", port: 8090 },
      ],
      hostAliases: {},
      capture: { site: "github", role: "frontend" },
    });
    const gateway = pods.find((p) => p.name === "gateway")!;
    expect(gateway.hostAliases["github-replay"]).toBe("github-replay");
  });

  it("lets the gateway alone reach it, and it reaches nothing: no pod, no public or non-public address", () => {
    const policies = kubernetesNetworkPolicies(replayedPlan);
    const ns = replayedPlan.kubernetes?.namespace ?? "";
    const matrix = podMatrix(replayedPlan);
    expect(matrix.filter((a) => a.includes("-> github-replay:"))).toEqual([
      "gateway -> github-replay:8070",
      "gateway -> github-replay:8090",
      "gateway -> github-replay:9000",
    ]);
    expect(matrix.filter((a) => a.startsWith("github-replay -> "))).toEqual([]);
    // Neither the replay server nor the site's own server (it is live no more) reaches outside, DNS included.
    for (const name of ["github-replay", "github-server"]) {
      const from = podEndpoints(replayedPlan).find((e) => e.name === name)!;
      for (const address of [...PUBLIC, ...NON_PUBLIC])
        for (const port of [...portsOf(replayedPlan), 53])
          for (const protocol of ["TCP", "UDP"] as const)
            expect(
              connects(policies, ns, from, outside(address), port, protocol),
              `${name} -> ${address}:${port}`,
            ).toBe(false);
    }
  });

  it("has the gateway dial it for the site and its counters, and read its capture as the site's frontend's", () => {
    const config = kubernetesGatewayConfig(replayedPlan);
    expect(config.sites.github).toMatchObject({ frontend: "http://github-replay:8070" });
    expect(config.replays).toEqual({ github: "http://github-replay:9000" });
    expect(config.captureSources?.["github-frontend"]).toBe("http://github-replay:8090");
    expect(() => parseGatewayConfig(JSON.stringify(config))).not.toThrow();
  });

  it("binds both the replay server's listeners to its pod's own hostname, in a config the replay server accepts", () => {
    const site = replayedPlan.websites.find((w) => w.name === "github")!;
    const config = replayServerConfigSchema.parse(kubernetesReplayServerConfig(site));
    expect(config).toMatchObject({
      listen: { host: "github-replay", port: 8070 },
      control: { host: "github-replay", port: 9000 },
      recording: "/var/lib/multienv/recording/recording.har",
      stateDir: "/var/lib/multienv/replay-state",
    });
  });
});

describe("placement of the pods by group", () => {
  it("places a computer's browser and proxy with the computers, every pod of a site (its replay server too) with the sites, the gateway alone", () => {
    const groups = Object.fromEntries(kubernetesPods(replayedPlan).map((p) => [p.name, placementGroupOf(p.role)]));
    expect(groups).toEqual({
      "shop-server": "sites",
      "shop-frontend": "sites",
      "github-server": "sites",
      "github-replay": "sites",
      "gist-server": "sites",
      "gist-frontend": "sites",
      gateway: "gateway",
      "desktop-proxy": "computers",
      "desktop-browser": "computers",
      "open-proxy": "computers",
      "open-browser": "computers",
    });
  });
});
