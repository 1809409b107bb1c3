// One env spread over the test cluster's two nodes (scripts/test-cluster.sh: node a and node b, each its own netns,
// kubelet, containerd, kube-proxy and kube-router, the routes between their pod networks announced over BGP): its
// computer and gateway on node a, its sites on node b, by the kubernetes target's placement. Then, from inside the
// pods, as the one-node tier does: every wall holds across the nodes, where a packet leaves one node's netns for the
// other's (the policies are kept by each node's kube-router for its own pods), the browser reaches the sites through
// its proxy, the gateway reaches each site and its capture server on the other node, the captures collected are
// whole pcaps holding the episode's packets, the request log holds the exchange, reset recreates pods where they
// were placed. Then node b is lost (its kubelet stopped, as when a kubelet dies): status names the sites on it as gone
// with it, down collects the computer's evidence from node a, names what it lost and leaves no pod or namespace, and
// once node b is back its kubelet ends the containers left there.
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { chromium } from "playwright-core";
import { deployStack, destroyStack, gatewayAccess, resetStack, stackStatus, type StackSpec } from "../../src/runner";
import { connectProbeScript, e2eStack, REPO, specOf, stackFileOf, throughProxyScript } from "./helpers/env";
import { until } from "../helpers/until";
import {
  getJson,
  kubectl,
  namespaceGone,
  nodeInPod,
  nodeKubelet,
  nodeReady,
  PREREQUISITES_TIMEOUT_MS,
  testCluster,
  type TestCluster,
} from "./helpers/kubernetes";

const STACK = e2eStack("k8s-nodes");
const ARTIFACTS = path.resolve(__dirname, "../../artifacts", STACK);
/** The label scripts/test-cluster.sh gives each node: a (the control plane's) or b. */
const NODE_LABEL = "multienv.test/node";
const SITE_PODS = ["shop-server", "shop-frontend", "gist-server", "gist-frontend"];
const NODE_A_PODS = ["gateway", "desk-proxy", "desk-browser"];

let cluster: TestCluster;
let spec: StackSpec | undefined;
let access: { gatewayUrl: string; controlToken: string; close?: () => Promise<void> };
/** Node name -> its label's value (a or b). */
let nodeLetter: Record<string, string> = {};
/** Set while node b's kubelet is stopped (afterAll starts it again). */
let nodeBStopped = false;

const pod = (name: string) => getJson(cluster, STACK, "pod", name);
const podIp = (name: string): string => pod(name).status.podIP;
const serviceIp = (name: string): string => getJson(cluster, STACK, "service", name).spec.clusterIP;
/** A site pod's own port (its Service's `http`): 8000 for the sample shop's server, its frontend's own. */
const httpPort = (name: string): number =>
  (getJson(cluster, STACK, "service", name).spec.ports as { name: string; port: number }[]).find(
    (p) => p.name === "http",
  )!.port;
const probe = (from: string, container: string, targets: Record<string, [string, number]>) =>
  JSON.parse(nodeInPod(cluster, STACK, from, container, connectProbeScript(targets))) as Record<string, string>;
const connected = (results: Record<string, string>) => Object.keys(results).filter((k) => results[k] === "connected");
const gateway = (p: string) =>
  fetch(access.gatewayUrl + p, { headers: { authorization: `Bearer ${access.controlToken}` } });
/** The node (a or b) each of the stack's pods runs on. */
const placed = (): Record<string, string> =>
  Object.fromEntries(
    (JSON.parse(kubectl(cluster, ["get", "pods", "-n", STACK, "-o", "json"])).items as any[]).map((p) => [
      p.metadata.name as string,
      nodeLetter[p.spec.nodeName as string] ?? `unscheduled (${p.status.phase})`,
    ]),
  );

/** The packets of a pcap file, as tcpdump reads them; tcpdump fails on a file that is not whole. */
function packetsOf(file: string): string[] {
  return execFileSync("tcpdump", ["-nn", "-r", file], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] })
    .split("\n")
    .filter((l) => l.trim() !== "");
}

beforeAll(async () => {
  cluster = testCluster();
  process.env.KUBECONFIG = cluster.kubeconfig;
  const nodes = JSON.parse(kubectl(cluster, ["get", "nodes", "-o", "json"])).items as any[];
  nodeLetter = Object.fromEntries(nodes.map((n) => [n.metadata.name, n.metadata.labels?.[NODE_LABEL]]));
  fs.rmSync(ARTIFACTS, { recursive: true, force: true });
  const base = specOf(STACK, path.join(REPO, "stacks/Pulumi.demo-kubernetes.yaml"));
  const websites = base.config["multienv:websites"] as Record<string, unknown>;
  spec = {
    ...base,
    config: {
      ...base.config,
      // Two synthetic sites, each a server and a frontend, and one computer: every arrow of the topology, no web.
      "multienv:websites": {
        shop: websites.shop,
        gist: { ...(websites.gist as object), settings: { declareReset: false } },
      },
      "multienv:computers": { desk: { network: "none", startTabs: ["https://shop.test/"] } },
      "multienv:kubernetes": {
        placement: {
          computers: { nodeSelector: { [NODE_LABEL]: "a" } },
          // The gateway apart from the sites: its reach of them and of their capture servers crosses the nodes.
          gateway: { nodeSelector: { [NODE_LABEL]: "a" } },
          sites: { nodeSelector: { [NODE_LABEL]: "b" } },
        },
      },
    },
  };
  await deployStack(spec, { selfTest: false });
  access = await gatewayAccess(STACK);
}, PREREQUISITES_TIMEOUT_MS + 900_000);

afterAll(async () => {
  await access?.close?.().catch(() => undefined);
  // The cluster whole again for whatever runs next, whether or not the test that lost node b got as far as this.
  if (nodeBStopped) nodeKubelet("b", "start");
  if (spec) await destroyStack(STACK).catch(() => undefined);
  fs.rmSync(stackFileOf(STACK), { force: true });
}, 300_000);

describe("one env over two nodes: the computer and the gateway on node a, the sites on node b", () => {
  it("runs each pod on the node its placement names", async () => {
    expect(Object.values(nodeLetter).sort()).toEqual(["a", "b"]);
    const where = placed();
    expect(where).toEqual(Object.fromEntries([...NODE_A_PODS.map((p) => [p, "a"]), ...SITE_PODS.map((p) => [p, "b"])]));
    expect((await gateway("/healthz")).status).toBe(200);
  });

  it("lets the gateway reach each site and its capture server on the other node, and nothing else there", () => {
    const targets: Record<string, [string, number]> = {};
    for (const site of SITE_PODS) {
      targets[`${site}@pod:http`] = [podIp(site), httpPort(site)];
      targets[`${site}@service:http`] = [serviceIp(site), httpPort(site)];
      targets[`${site}@pod:8090`] = [podIp(site), 8090];
      targets[`${site}@pod:22`] = [podIp(site), 22];
    }
    const results = probe("gateway", "gateway", targets);
    const allowed = Object.keys(targets).filter((k) => !k.endsWith(":22"));
    // Connections across the nodes go through: the refusals below are the walls, not a broken route.
    expect(connected(results).sort()).toEqual(allowed.sort());
  });

  it("keeps every wall across the nodes: a browser reaches no site pod, a site pod no other site, no browser, no proxy, no gateway", () => {
    const fromBrowser: Record<string, [string, number]> = {
      ownProxy: [serviceIp("desk-proxy"), 3128],
      gatewayRunner: [podIp("gateway"), 8080],
      gatewayBrowse: [podIp("gateway"), 8081],
    };
    for (const site of SITE_PODS) {
      fromBrowser[`${site}@pod`] = [podIp(site), httpPort(site)];
      fromBrowser[`${site}@service`] = [serviceIp(site), httpPort(site)];
      fromBrowser[`${site}@captures`] = [podIp(site), 8090];
    }
    const browser = probe("desk-browser", "browser", fromBrowser);
    expect(connected(browser)).toEqual(["ownProxy"]);

    const fromSite = (own: string): Record<string, [string, number]> => ({
      ...Object.fromEntries(
        SITE_PODS.filter((p) => !p.startsWith(own)).flatMap((p) => [
          [`${p}@pod`, [podIp(p), httpPort(p)]],
          [`${p}@service`, [serviceIp(p), httpPort(p)]],
        ]),
      ),
      browser: [podIp("desk-browser"), 9222],
      proxy: [podIp("desk-proxy"), 3128],
      proxyControl: [podIp("desk-proxy"), 9000],
      proxyService: [serviceIp("desk-proxy"), 3128],
      gatewayRunner: [podIp("gateway"), 8080],
      gatewayBrowse: [podIp("gateway"), 8081],
    });
    for (const site of ["shop", "gist"]) {
      const fromServer = probe(`${site}-server`, "server", fromSite(site));
      expect({ site, connected: connected(fromServer) }).toEqual({ site, connected: [] });
      // A frontend reaches its own server (a wall on the same node, the one arrow it has) and nothing else.
      const fromFrontend = probe(`${site}-frontend`, "frontend", {
        ...fromSite(site),
        ownServer: [podIp(`${site}-server`), httpPort(`${site}-server`)],
      });
      expect({ site, connected: connected(fromFrontend) }).toEqual({ site, connected: ["ownServer"] });
    }
    // The proxy on node a reaches the gateway's browse port alone, never its runner port (bound to its loopback).
    const proxy = probe("desk-proxy", "site-proxy", {
      gatewayBrowse: [podIp("gateway"), 8081],
      gatewayRunner: [podIp("gateway"), 8080],
      shopServer: [podIp("shop-server"), httpPort("shop-server")],
    });
    expect(connected(proxy)).toEqual(["gatewayBrowse"]);
  });

  it("lets the browser reach the sites on the other node through its proxy, and refuses the site pods there", () => {
    const answers = JSON.parse(
      nodeInPod(
        cluster,
        STACK,
        "desk-browser",
        "browser",
        throughProxyScript({
          shop: { method: "GET", target: "http://shop.test/" },
          gist: { method: "GET", target: "http://gist.github.com/" },
          sitePod: { method: "GET", target: `http://${podIp("shop-server")}:${httpPort("shop-server")}/` },
          siteService: { method: "GET", target: `http://${serviceIp("gist-server")}:${httpPort("gist-server")}/` },
        }),
      ),
    ) as Record<string, { status: number }>;
    expect({
      shop: answers.shop.status,
      gist: answers.gist.status,
      sitePod: answers.sitePod.status,
      siteService: answers.siteService.status,
    }).toEqual({ shop: 200, gist: 200, sitePod: 403, siteService: 403 });
  });

  it("logs the browser's exchange with a site on the other node, collects whole captures of it, and resets in place", async () => {
    const browser = await chromium.connectOverCDP(`${access.gatewayUrl}/computers/desk/cdp`, {
      headers: { authorization: `Bearer ${access.controlToken}` },
      timeout: 30_000,
    });
    const page = await browser.contexts()[0].newPage();
    try {
      const answer = await page.goto("https://shop.test/", { timeout: 60_000, waitUntil: "domcontentloaded" });
      expect(answer?.status()).toBe(200);
    } finally {
      await page.close().catch(() => undefined);
      void browser.close().catch(() => undefined);
    }
    const gistUid = pod("gist-server").metadata.uid;
    const result = await resetStack(STACK, { collect: true });
    expect(result.sites).toMatchObject({ shop: "reset", gist: "restarted" });
    expect(pod("gist-server").metadata.uid).not.toBe(gistUid);
    // Recreated from their own specs: where they were placed.
    expect(placed()).toEqual(
      Object.fromEntries([...NODE_A_PODS.map((p) => [p, "a"]), ...SITE_PODS.map((p) => [p, "b"])]),
    );
    await until("the gateway healthy after the reset", async () => (await gateway("/healthz")).status === 200, 120_000);

    // The episode's request log: the page load through the proxy on node a to the site on node b.
    const har = JSON.parse(fs.readFileSync(path.join(ARTIFACTS, "episodes/1/requests/desk.har"), "utf8")) as {
      log: { entries: { request: { url: string }; response: { status: number } }[] };
    };
    expect(har.log.entries.find((e) => e.request.url === "https://shop.test/")?.response.status).toBe(200);

    // The episode's captures, read from the capture servers on node b by the gateway on node a: every site's, whole,
    // and the frontend's holds the gateway's connections to it (from node a's pod network to node b's).
    const traffic = path.join(ARTIFACTS, "episodes/1/traffic");
    const files = fs.readdirSync(traffic);
    for (const c of SITE_PODS)
      expect({ c, stored: files.some((f) => f.startsWith(`${c}.`)) }).toEqual({ c, stored: true });
    const frontend = files
      .filter((f) => f.startsWith("shop-frontend."))
      .flatMap((f) => packetsOf(path.join(traffic, f)));
    const fromGateway = `${podIp("gateway")}.`;
    const toFrontend = new RegExp(`^\\S+ > 10\\.244\\.1\\.\\d+\\.${httpPort("shop-frontend")}:`);
    expect(
      frontend.some((l) => {
        const flow = l.split(" IP ")[1] ?? "";
        return flow.startsWith(fromGateway) && toFrontend.test(flow);
      }),
    ).toBe(true);
    for (const f of files.filter((f) => /\.pcap/.test(f))) expect(() => packetsOf(path.join(traffic, f))).not.toThrow();
  }, 300_000);
});

describe("node b lost mid-episode (its kubelet stopped): the sites' node", () => {
  const nodeB = () => Object.keys(nodeLetter).find((n) => nodeLetter[n] === "b")!;

  it("status names each site part on node b as gone with it, the node by name, and the env is not healthy", async () => {
    // The cluster is shared (a benchmark, another suite): node b is lost only while no other env is on it.
    const others = () =>
      (JSON.parse(kubectl(cluster, ["get", "namespaces", "-l", "multienv.stack", "-o", "json"])).items as any[])
        .map((n) => n.metadata.name as string)
        .filter((n) => n !== STACK);
    await until("no other env on the cluster before node b is lost", async () => others().length === 0, 120_000, 2000);
    nodeKubelet("b", "stop");
    nodeBStopped = true;
    // The API server marks it once the controller manager's node-monitor-grace-period (50 s) has passed.
    await until(`node ${nodeB()} not Ready`, async () => nodeReady(cluster, nodeB()) !== "True", 180_000, 1000);
    const status = await stackStatus(STACK);
    expect(status.healthy).toBe(false);
    const gone = (p: string) => status.problems.find((line) => line.startsWith(`pod ${p} (`));
    for (const p of SITE_PODS) {
      const [site, role] = p.split("-");
      expect({ p, line: gone(p) }).toEqual({
        p,
        line: expect.stringMatching(
          new RegExp(
            `^pod ${p} \\(site ${site}'s ${role}, with its capture\\): gone with its node ${nodeB()}, which is not Ready: Ready is Unknown`,
          ),
        ),
      });
    }
    for (const p of NODE_A_PODS) expect({ p, line: gone(p) }).toEqual({ p, line: undefined });
    expect(status.containers.find((c) => c.name === "gateway")).toMatchObject({ node: expect.any(String) });
  }, 300_000);

  it("goes down collecting the computer's evidence from node a, naming what it lost, leaving no pod or namespace", async () => {
    await access.close?.();
    fs.rmSync(path.join(ARTIFACTS, "proxy-logs"), { recursive: true, force: true });
    const lines: string[] = [];
    await destroyStack(STACK, { log: (line) => lines.push(line) });
    spec = undefined;
    await namespaceGone(cluster, STACK);
    const left = (JSON.parse(kubectl(cluster, ["get", "pods", "-A", "-o", "json"])).items as any[]).filter(
      (p) => p.metadata.namespace === STACK,
    );
    expect(left).toEqual([]);
    for (const p of SITE_PODS) {
      // One line each: what was lost and what of it is not collected, and its pod force-deleted.
      expect({ p, lost: lines.filter((l) => l.includes(`pod ${p} (`) && l.includes("is lost")).length }).toEqual({
        p,
        lost: 1,
      });
      expect(lines.find((l) => l.includes(`pod ${p} (`)) ?? "").toMatch(/its captures not collected$/);
      expect({ p, forced: lines.some((l) => l.includes(`pod ${p} in namespace ${STACK} force-deleted`)) }).toEqual({
        p,
        forced: true,
      });
    }
    // The computer, on node a, gave its evidence; the captures, all on node b, were not collected and say so.
    const run = JSON.parse(fs.readFileSync(path.join(ARTIFACTS, "run.json"), "utf8"));
    expect(run.evidence.desk).toMatchObject({ log: "proxy-logs/desk.jsonl" });
    expect(run.evidence.desk.error).toBeUndefined();
    expect(fs.existsSync(path.join(ARTIFACTS, "proxy-logs/desk.jsonl"))).toBe(true);
    expect((run.lostParts as { name: string; node: string }[]).map((p) => [p.name, p.node]).sort()).toEqual(
      SITE_PODS.map((p) => [p, nodeB()]).sort(),
    );
    expect(run.captureErrors.length).toBeGreaterThan(0);
  }, 300_000);

  it("starts node b again, whose kubelet ends the containers the lost pods left there", async () => {
    nodeKubelet("b", "start");
    nodeBStopped = false;
    expect(nodeReady(cluster, nodeB())).toBe("True");
    const containersOf = (sock: string) =>
      execFileSync(
        "ctr",
        ["-n", "k8s.io", "--address", sock, "containers", "ls", "-q", `labels."io.kubernetes.pod.namespace"==${STACK}`],
        { encoding: "utf8" },
      ).trim();
    // Once each kubelet has ended and collected them (its garbage collection runs each minute).
    for (const sock of cluster.containerdSockets)
      await until(`no container of the stack in ${sock}`, async () => containersOf(sock) === "", 180_000, 1000);
  }, 300_000);
});
