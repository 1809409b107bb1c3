// The runner's side of the kubernetes target without a cluster: which kubeconfig and context it uses (kubectl's
// order) and what it says when it cannot; the outputs' pod-naming URLs put on the port-forward's local end; the spec a
// recreated pod is created from; the pods and the cluster a state names; and the port-forward itself, against a
// stand-in API server that speaks the port-forward WebSocket protocol to a local HTTP server.
import http from "node:http";
import net from "node:net";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { V1Node, V1Pod } from "@kubernetes/client-node";
import { WebSocketServer } from "ws";
import { afterAll, describe, expect, it } from "vitest";
import { kubeconfigFiles, loadKubeConfig } from "../../src/engines/kubernetes";
import { openGatewayPortForward } from "../../src/engines/port-forward";
import { podStateOf, podStates, recreateSpec, stuckPods } from "../../src/runner/targets/kubernetes/pods";
import { lostPartLine, lostParts } from "../../src/runner/lifecycle/down";
import { coreApi } from "../../src/engines/kubernetes";
import { statusProblems } from "../../src/runner/operator/operator";
import { asContainerState, podsToStartOver } from "../../src/runner/targets/kubernetes/runtime";
import {
  clusterTargetOf,
  isKubernetesState,
  stackNamespaces,
  stackPods,
} from "../../src/runner/targets/kubernetes/state";
import { containerProblem } from "../../src/runner/targets/env-runtime";
import { localOutputs, openGatewayAccess, rebaseUrl, readOutputs } from "../../src/runner/stack/outputs";
import { portForwardUrl } from "../../src/protocol/port-forward";
import { cleanup, tempDir } from "../helpers/processes";

afterAll(cleanup);

function kubeconfig(contexts: string[], current?: string, server = "https://127.0.0.1:6443"): string {
  return [
    "apiVersion: v1",
    "kind: Config",
    `clusters: [${contexts.map((c) => `{name: ${c}-cluster, cluster: {server: "${server}"${server.startsWith("http:") ? ", insecure-skip-tls-verify: true" : ""}}}`).join(", ")}]`,
    `users: [${contexts.map((c) => `{name: ${c}-user, user: {token: t-${c}}}`).join(", ")}]`,
    `contexts: [${contexts.map((c) => `{name: ${c}, context: {cluster: ${c}-cluster, user: ${c}-user}}`).join(", ")}]`,
    ...(current ? [`current-context: ${current}`] : []),
    "",
  ].join("\n");
}

function write(dir: string, name: string, text: string): string {
  const file = join(dir, name);
  writeFileSync(file, text);
  return file;
}

describe("kubeconfig, as kubectl finds it", () => {
  const dir = tempDir("kube-");
  const home = join(dir, "home");
  mkdirSync(join(home, ".kube"), { recursive: true });
  const homeConfig = write(join(home, ".kube"), "config", kubeconfig(["home"], "home"));
  const a = write(dir, "a.yaml", kubeconfig(["a", "shared"], "a"));
  const b = write(dir, "b.yaml", kubeconfig(["b", "shared"], "b"));

  it("takes the stack's file first, then KUBECONFIG's list, then ~/.kube/config", () => {
    expect(kubeconfigFiles(a, { KUBECONFIG: b }, home).files).toEqual([a]);
    expect(kubeconfigFiles(undefined, { KUBECONFIG: `${a}:${join(dir, "none")}:${b}` }, home)).toEqual({
      files: [a, b],
      from: "KUBECONFIG",
    });
    expect(kubeconfigFiles(undefined, {}, home).files).toEqual([homeConfig]);
    expect(kubeconfigFiles("~/.kube/config", {}, home).files).toEqual([homeConfig]);
  });

  it("names the file and the fix when there is none", () => {
    expect(() => kubeconfigFiles(join(dir, "gone.yaml"), {}, home)).toThrow(
      `kubeconfig ${join(dir, "gone.yaml")} (the stack's kubeconfig) does not exist; point the stack's kubeconfig`,
    );
    expect(() => kubeconfigFiles(undefined, { KUBECONFIG: join(dir, "none") }, home)).toThrow(
      `KUBECONFIG (${join(dir, "none")}) names no file that exists`,
    );
    expect(() => kubeconfigFiles(undefined, {}, join(dir, "nohome"))).toThrow(
      `no kubeconfig: ${join(dir, "nohome", ".kube", "config")} does not exist and KUBECONFIG is not set`,
    );
  });

  it("uses the current context unless the stack names one, and merges a list with the first file winning", () => {
    expect(loadKubeConfig({ kubeconfig: a }).context).toBe("a");
    expect(loadKubeConfig({ kubeconfig: a, context: "shared" }).context).toBe("shared");
    const merged = loadKubeConfig({}, { KUBECONFIG: `${a}:${b}`, HOME: home });
    expect(merged.context).toBe("a");
    expect(merged.config.getContexts().map((c) => c.name)).toEqual(["a", "shared", "b"]);
    expect(
      loadKubeConfig({ context: "b" }, { KUBECONFIG: `${a}:${b}`, HOME: home }).config.getCurrentUser()?.name,
    ).toBe("b-user");
  });

  it("names the context and the file's contexts when the context is not there", () => {
    expect(() => loadKubeConfig({ kubeconfig: a, context: "prod" })).toThrow(
      `kubeconfig ${a} has no context prod (its contexts: a, shared); set the stack's context to one of them`,
    );
    const none = write(dir, "none-current.yaml", kubeconfig(["x"]));
    expect(() => loadKubeConfig({ kubeconfig: none })).toThrow(
      `kubeconfig ${none} has no current context; choose one with \`kubectl config use-context <name>\` (its contexts: x)`,
    );
    const broken = write(dir, "broken.yaml", "clusters: [");
    expect(() => loadKubeConfig({ kubeconfig: broken })).toThrow(`kubeconfig ${broken} could not be read: `);
  });
});

describe("the outputs on the port-forward's local end", () => {
  const gatewayUrl = portForwardUrl({ namespace: "task-1", pod: "gateway", port: 8080 });
  const local = "http://127.0.0.1:40123";

  it("rebases a URL under the gateway's, keeping its path and query, and leaves any other", () => {
    expect(gatewayUrl).toBe("kubernetes://task-1/gateway:8080");
    expect(rebaseUrl(`${gatewayUrl}/svc/shop/`, gatewayUrl, local)).toBe(`${local}/svc/shop/`);
    expect(rebaseUrl(`${gatewayUrl}/computers/a%20b/cdp?x=1`, gatewayUrl, `${local}/`)).toBe(
      `${local}/computers/a%20b/cdp?x=1`,
    );
    expect(rebaseUrl(gatewayUrl, `${gatewayUrl}/`, local)).toBe(local);
    expect(rebaseUrl("kubernetes://task-1/gateway:80800/x", gatewayUrl, local)).toBe(
      "kubernetes://task-1/gateway:80800/x",
    );
    expect(rebaseUrl("https://shop.test/", gatewayUrl, local)).toBe("https://shop.test/");
  });

  it("puts every site's and computer's URL on it", () => {
    const outputs = readOutputs({
      gatewayUrl: { value: gatewayUrl, secret: false },
      websites: {
        value: {
          shop: {
            live: false,
            domains: ["shop.test"],
            svcUrl: `${gatewayUrl}/svc/shop/`,
            browseUrl: `${gatewayUrl}/website/shop/`,
          },
          gh: { live: true, domains: ["github.com"], svcUrl: `${gatewayUrl}/svc/gh/` },
        },
        secret: false,
      },
      computers: { value: { agent: { cdpUrl: `${gatewayUrl}/computers/agent/cdp` } }, secret: false },
    });
    const rebased = localOutputs(outputs, local);
    expect(rebased.gatewayUrl).toBe(local);
    expect(rebased.websites.shop).toMatchObject({ svcUrl: `${local}/svc/shop/`, browseUrl: `${local}/website/shop/` });
    expect(rebased.websites.gh).toEqual({ live: true, domains: ["github.com"], svcUrl: `${local}/svc/gh/` });
    expect(rebased.computers.agent.cdpUrl).toBe(`${local}/computers/agent/cdp`);
  });
});

const LIVE_POD: V1Pod = {
  apiVersion: "v1",
  kind: "Pod",
  metadata: {
    name: "shop-server",
    namespace: "task-1",
    labels: { "multienv.stack": "task-1", "multienv.role": "server", "multienv.site": "shop" },
    annotations: { "multienv.io/note": "kept" },
    uid: "0b6f-uid",
    resourceVersion: "4242",
    creationTimestamp: new Date("2026-01-01T00:00:00Z"),
    generation: 1,
    managedFields: [{ manager: "pulumi-kubernetes" }],
  },
  spec: {
    nodeName: "node-1",
    priority: 0,
    preemptionPolicy: "PreemptLowerPriority",
    restartPolicy: "Always",
    initContainers: [
      {
        name: "capture",
        image: "multienv/capture",
        restartPolicy: "Always",
        volumeMounts: [
          { name: "captures", mountPath: "/captures" },
          { name: "kube-api-access-x7k2p", mountPath: "/var/run/secrets/kubernetes.io/serviceaccount" },
        ],
      },
    ],
    containers: [
      {
        name: "server",
        image: "shop-server:1",
        volumeMounts: [{ name: "kube-api-access-x7k2p", mountPath: "/var/run/secrets/kubernetes.io/serviceaccount" }],
      },
    ],
    volumes: [
      { name: "captures", emptyDir: {} },
      { name: "kube-api-access-x7k2p", projected: { sources: [] } },
    ],
  },
  status: { phase: "Running", podIP: "10.1.0.7" },
};

describe("a recreated pod's spec", () => {
  it("is the pod's own, less what the cluster set on it", () => {
    const spec = recreateSpec(LIVE_POD);
    expect(spec).toEqual({
      apiVersion: "v1",
      kind: "Pod",
      metadata: {
        name: "shop-server",
        namespace: "task-1",
        labels: { "multienv.stack": "task-1", "multienv.role": "server", "multienv.site": "shop" },
        annotations: { "multienv.io/note": "kept" },
      },
      spec: {
        restartPolicy: "Always",
        initContainers: [
          {
            name: "capture",
            image: "multienv/capture",
            restartPolicy: "Always",
            volumeMounts: [{ name: "captures", mountPath: "/captures" }],
          },
        ],
        containers: [{ name: "server", image: "shop-server:1", volumeMounts: [] }],
        volumes: [{ name: "captures", emptyDir: {} }],
      },
    });
    // The pod read is left as it was.
    expect(LIVE_POD.metadata!.uid).toBe("0b6f-uid");
    expect(LIVE_POD.spec!.volumes).toHaveLength(2);
  });

  it("keeps a volume of the pod's own that only looks like the token's", () => {
    const own = structuredClone(LIVE_POD);
    own.spec!.volumes = [{ name: "kube-api-access-mine", emptyDir: {} }];
    expect(recreateSpec(own).spec!.volumes).toEqual([{ name: "kube-api-access-mine", emptyDir: {} }]);
  });
});

describe("a kubernetes stack's state", () => {
  const podResource = (name: string, labels: Record<string, string>) => ({
    urn: `urn:pulumi:task-1::multienv::kubernetes:core/v1:Pod::${name}`,
    type: "kubernetes:core/v1:Pod",
    outputs: { metadata: { name, namespace: "task-1", labels: { "multienv.stack": "task-1", ...labels } } },
  });
  const resources = [
    { type: "pulumi:providers:kubernetes", inputs: { kubeconfig: "/k/config", context: "kind" } },
    { type: "kubernetes:core/v1:Namespace", outputs: { metadata: { name: "task-1" } } },
    podResource("gateway", { "multienv.role": "gateway" }),
    podResource("shop-server", { "multienv.role": "server", "multienv.site": "shop" }),
    podResource("shop-frontend", { "multienv.role": "frontend", "multienv.site": "shop" }),
    podResource("notes-server", { "multienv.role": "server", "multienv.site": "notes" }),
    podResource("notes-replay", { "multienv.role": "replay", "multienv.site": "notes" }),
    podResource("agent-browser", { "multienv.role": "browser", "multienv.computer": "agent" }),
    podResource("agent-proxy", { "multienv.role": "site-proxy", "multienv.computer": "agent" }),
  ];

  it("names its pods, namespace and cluster", () => {
    expect(isKubernetesState(resources)).toBe(true);
    expect(isKubernetesState([{ type: "docker:index/container:Container" }])).toBe(false);
    expect(stackNamespaces(resources)).toEqual(["task-1"]);
    expect(stackPods(resources)[1]).toEqual({ name: "shop-server", namespace: "task-1", role: "server", site: "shop" });
    expect(stackPods(resources)[4]).toEqual({
      name: "notes-replay",
      namespace: "task-1",
      role: "replay",
      site: "notes",
    });
    expect(stackPods(resources)[5]).toMatchObject({ name: "agent-browser", computer: "agent" });
    expect(clusterTargetOf(resources)).toEqual({ kubeconfig: "/k/config", context: "kind" });
    // The output wins over the provider's inputs; a kubeconfig's text is not a path.
    expect(clusterTargetOf(resources, { gatewayPortForward: { namespace: "task-1", context: "other" } })).toEqual({
      context: "other",
    });
    expect(
      clusterTargetOf([{ type: "pulumi:providers:kubernetes", inputs: { kubeconfig: "apiVersion: v1\n" } }]),
    ).toEqual({});
  });

  it("starts over a site without a reset operation by its server pod, and every website pod for the captures (a replay server's among them)", () => {
    const pods = stackPods(resources);
    expect(podsToStartOver(pods, ["notes"], false).map((p) => p.name)).toEqual(["notes-server"]);
    expect(podsToStartOver(pods, [], true).map((p) => p.name)).toEqual([
      "shop-server",
      "shop-frontend",
      "notes-server",
      "notes-replay",
    ]);
    expect(podsToStartOver(pods, [], false)).toEqual([]);
    expect(() => podsToStartOver(pods, ["wiki"], false)).toThrow(
      "site wiki declares no reset operation and its server pod is not in the stack's state",
    );
  });

  it("shows a pod's phase, readiness, restarts and why it waits, as status shows containers", () => {
    const pod = stackPods(resources)[1];
    const waiting = podStateOf(pod, {
      status: {
        phase: "Pending",
        conditions: [{ type: "Ready", status: "False" }],
        initContainerStatuses: [
          { name: "capture", image: "", imageID: "", ready: false, restartCount: 2, state: { running: {} } },
        ],
        containerStatuses: [
          {
            name: "server",
            image: "",
            imageID: "",
            ready: false,
            restartCount: 1,
            state: { waiting: { reason: "ErrImageNeverPull" } },
          },
        ],
      },
    });
    expect(waiting).toMatchObject({ phase: "Pending", ready: false, restarts: 3, reason: "ErrImageNeverPull" });
    const shown = asContainerState(waiting, "kind");
    expect(shown).toMatchObject({ kind: "pod", state: "pending", health: "not ready", engine: "kind/task-1" });
    expect(containerProblem(shown)).toBe("pending (ErrImageNeverPull)");
    const ready = asContainerState(
      podStateOf(pod, { status: { phase: "Running", conditions: [{ type: "Ready", status: "True" }] } }),
      "kind",
    );
    expect(containerProblem(ready)).toBeUndefined();
    expect(containerProblem(asContainerState(podStateOf(pod, undefined), "kind"))).toBe(
      "not on its cluster (kind/task-1)",
    );
  });
});

describe("a pod on a node that is lost", () => {
  const node = (name: string, ready: "True" | "False" | "Unknown"): V1Node => ({
    metadata: { name },
    status: {
      conditions: [
        {
          type: "Ready",
          status: ready,
          ...(ready === "True"
            ? {}
            : {
                reason: "NodeStatusUnknown",
                message: "Kubelet stopped posting node status.",
                lastTransitionTime: new Date("2026-12-07T18:50:00Z"),
              }),
        },
      ],
    },
  });
  const nodes = new Map([
    ["node-a", node("node-a", "True")],
    ["node-b", node("node-b", "Unknown")],
  ]);
  // What the API server still says of a pod whose kubelet stopped: Running, even Ready until the controller marks it.
  const running = (nodeName: string, capture: boolean): V1Pod => ({
    spec: {
      nodeName,
      containers: [{ name: "server" }],
      ...(capture ? { initContainers: [{ name: "capture" }, { name: "capture-server" }] } : {}),
    },
    status: { phase: "Running", conditions: [{ type: "Ready", status: "True" }] },
  });

  it("is named in status, one line per part with its node and why the node is not Ready, and the env is not healthy", () => {
    const on = (name: string, labels: Record<string, string>, nodeName: string, capture = false) =>
      asContainerState(podStateOf({ name, namespace: "task-1", ...labels }, running(nodeName, capture), nodes), "c");
    const containers = [
      on("gateway", { role: "gateway" }, "node-a"),
      on("desk-browser", { role: "browser", computer: "desk" }, "node-a"),
      on("shop-server", { role: "server", site: "shop" }, "node-b", true),
      on("desk-proxy", { role: "site-proxy", computer: "desk" }, "node-b"),
      // A node that left the cluster altogether.
      on("gist-frontend", { role: "frontend", site: "gist" }, "node-c", true),
    ];
    const problems = statusProblems({
      stack: "task-1",
      containers,
      gateway: { url: "u", healthz: { ok: true, status: 200 } },
      computers: {},
      selfTest: { skipped: true },
      evidence: { captureTraffic: true, proxyLogs: {} },
    });
    expect(problems).toEqual([
      "pod shop-server (site shop's server, with its capture): gone with its node node-b, which is not Ready: Ready is Unknown since 2026-12-07T18:50:00.000Z (NodeStatusUnknown: Kubelet stopped posting node status.)",
      "pod desk-proxy (computer desk's site proxy): gone with its node node-b, which is not Ready: Ready is Unknown since 2026-12-07T18:50:00.000Z (NodeStatusUnknown: Kubelet stopped posting node status.)",
      "pod gist-frontend (site gist's frontend, with its capture): gone with its node node-c, which is not Ready: it is no longer in the cluster",
    ]);
    expect(containers[0]).toMatchObject({ node: "node-a", health: "ready" });
    expect(containers[0].nodeNotReady).toBeUndefined();
  });

  it("is recorded at down with what it held that cannot be collected, and a part on a Ready node is not", () => {
    const on = (name: string, labels: Record<string, string>, nodeName: string, capture = false) =>
      asContainerState(podStateOf({ name, namespace: "task-1", ...labels }, running(nodeName, capture), nodes), "c");
    const lost = lostParts(
      [
        on("gateway", { role: "gateway" }, "node-a"),
        on("shop-server", { role: "server", site: "shop" }, "node-b", true),
        on("desk-proxy", { role: "site-proxy", computer: "desk" }, "node-b"),
        on("desk-browser", { role: "browser", computer: "desk" }, "node-b"),
      ],
      "t",
    );
    const why =
      "its node node-b is not Ready: Ready is Unknown since 2026-12-07T18:50:00.000Z (NodeStatusUnknown: Kubelet stopped posting node status.)";
    expect(lost).toEqual([
      {
        name: "shop-server",
        part: "site shop's server, with its capture",
        node: "node-b",
        why,
        notCollected: ["its captures"],
        at: "t",
      },
      {
        name: "desk-proxy",
        part: "computer desk's site proxy",
        node: "node-b",
        why,
        notCollected: ["computer desk's site-proxy log and request log"],
        at: "t",
      },
      { name: "desk-browser", part: "computer desk's browser", node: "node-b", why, notCollected: [], at: "t" },
    ]);
    expect(lostPartLine("task-1", lost[0])).toBe(
      `stack task-1: pod shop-server (site shop's server, with its capture) is lost, since ${why}: its captures not collected`,
    );
  });

  it("is force-deleted once terminating, as is a pod still terminating well past its grace period anywhere", () => {
    const now = Date.parse("2026-12-07T19:00:00Z");
    const terminating = (name: string, nodeName: string, deadline: string): V1Pod => ({
      metadata: { name, namespace: "task-1", deletionTimestamp: new Date(deadline) },
      spec: { nodeName, containers: [{ name: "server" }] },
    });
    const stuck = stuckPods(
      [
        // On the lost node: its kubelet alone would confirm it stopped, so it never goes; forced at once.
        terminating("shop-server", "node-b", "2026-12-07T18:59:59Z"),
        // On a Ready node, within its grace period and the wait after it: left to its kubelet.
        terminating("gateway", "node-a", "2026-12-07T18:59:50Z"),
        // On a Ready node, 40 s past its deadline (a node lost moments ago, not yet marked): forced.
        terminating("desk-proxy", "node-a", "2026-12-07T18:59:20Z"),
        // Not terminating: never touched, even on the lost node.
        { metadata: { name: "gist-server", namespace: "task-1" }, spec: { nodeName: "node-b", containers: [] } },
      ],
      nodes,
      now,
      30_000,
    );
    expect(stuck).toEqual([
      {
        namespace: "task-1",
        name: "shop-server",
        node: "node-b",
        why: "its node node-b is not Ready: Ready is Unknown since 2026-12-07T18:50:00.000Z (NodeStatusUnknown: Kubelet stopped posting node status.)",
      },
      {
        namespace: "task-1",
        name: "desk-proxy",
        node: "node-a",
        why: "it was still terminating 40 s past its grace period on node node-a",
      },
    ]);
  });

  it("is asked of an API server that does not answer for a bounded time, naming what did not answer", async () => {
    // An API server that takes every request and never answers one (a control plane stuck, a proxy in the way).
    const held: http.ServerResponse[] = [];
    const server = http.createServer((_req, res) => void held.push(res));
    await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
    const url = `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`;
    try {
      const dir = tempDir("k8s-silent-");
      const file = write(dir, "config", kubeconfig(["silent"], "silent", url));
      const core = coreApi(loadKubeConfig({ kubeconfig: file }, {}));
      const states = await podStates(core, [{ name: "shop-server", namespace: "task-1" }], { timeoutMs: 500 });
      expect(states).toEqual([
        {
          name: "shop-server",
          namespace: "task-1",
          phase: "Unknown",
          ready: false,
          restarts: 0,
          error: "listing the pods of namespace task-1: no answer within 0.5 s",
        },
      ]);
      expect(held.length).toBeGreaterThan(0);
    } finally {
      for (const res of held) res.destroy();
      server.closeAllConnections();
      server.close();
    }
  });
});

/**
 * A stand-in API server: GET of a pod answers its phase (404 when unknown); a port-forward WebSocket to it is carried
 * to `backendPort` on loopback, in the channel protocol the API server speaks (a byte of channel per frame, the first
 * frame of each channel the port).
 */
async function startApiServer(
  pods: Record<string, string>,
  backendPort: number,
): Promise<{ url: string; close(): void }> {
  const server = http.createServer((req, res) => {
    const match = /^\/api\/v1\/namespaces\/([^/]+)\/pods\/([^/?]+)$/.exec(req.url ?? "");
    const phase = match ? pods[`${match[1]}/${match[2]}`] : undefined;
    res.setHeader("Content-Type", "application/json");
    if (phase === undefined) {
      res.statusCode = 404;
      res.end(JSON.stringify({ kind: "Status", status: "Failure", message: "pods not found", code: 404 }));
      return;
    }
    res.end(JSON.stringify({ kind: "Pod", apiVersion: "v1", metadata: { name: match![2] }, status: { phase } }));
  });
  const wss = new WebSocketServer({ noServer: true, handleProtocols: () => "v4.channel.k8s.io" });
  server.on("upgrade", (req, socket, head) => {
    if (!/\/portforward\?ports=\d+$/.test(req.url ?? "")) return socket.destroy();
    wss.handleUpgrade(req, socket, head, (ws) => {
      const port = Buffer.alloc(2);
      port.writeUInt16LE(backendPort);
      const backend = net.connect(backendPort, "127.0.0.1");
      ws.send(Buffer.concat([Buffer.from([0]), port]));
      ws.send(Buffer.concat([Buffer.from([1]), port]));
      backend.on("data", (data) => ws.send(Buffer.concat([Buffer.from([0]), data])));
      backend.on("end", () => ws.close());
      backend.on("error", () => ws.close());
      ws.on("message", (data: Buffer) => {
        if (data[0] === 0) backend.write(data.subarray(1));
      });
      ws.on("close", () => backend.end());
    });
  });
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
  return {
    url: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`,
    close: () => {
      for (const ws of wss.clients) ws.terminate();
      server.closeAllConnections();
      server.close();
    },
  };
}

describe("the port-forward to the gateway's pod", () => {
  it("carries each connection to the pod's port through the API server, and closes", async () => {
    const backend = http.createServer((req, res) => res.end(`gateway saw ${req.method} ${req.url}`));
    await new Promise<void>((done) => backend.listen(0, "127.0.0.1", done));
    const backendPort = (backend.address() as net.AddressInfo).port;
    const api = await startApiServer({ "task-1/gateway": "Running", "task-1/starting": "Pending" }, backendPort);
    const file = write(tempDir("kube-"), "config", kubeconfig(["test"], "test", api.url));
    const said: string[] = [];
    try {
      const forward = await openGatewayPortForward({
        kubeconfig: file,
        namespace: "task-1",
        pod: "gateway",
        port: 8080,
      });
      expect(forward.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      const answers = await Promise.all(
        ["/healthz", "/svc/shop/ready"].map(async (path) => (await fetch(forward.url + path)).text()),
      );
      expect(answers).toEqual(["gateway saw GET /healthz", "gateway saw GET /svc/shop/ready"]);
      expect(said).toEqual([]);
      await forward.close();
      await expect(fetch(`${forward.url}/healthz`)).rejects.toThrow();

      // The runner's access: the output's URL names the pod, the access holds the local one.
      const access = await openGatewayAccess(
        {
          gatewayUrl: { value: "kubernetes://task-1/gateway:8080", secret: false },
          controlToken: { value: "t", secret: true },
          gatewayPortForward: {
            value: { kubeconfig: file, namespace: "task-1", pod: "gateway", port: 8080 },
            secret: false,
          },
        },
        "task-1",
      );
      expect(access.gatewayUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      expect(await (await fetch(`${access.gatewayUrl}/x`)).text()).toBe("gateway saw GET /x");
      await access.close();

      await expect(
        openGatewayPortForward({ kubeconfig: file, namespace: "task-1", pod: "gone", port: 8080 }),
      ).rejects.toThrow(
        "pod gone is not in namespace task-1 (context test): the gateway is gone; `multienv status task-1` shows the env's pods",
      );
      await expect(
        openGatewayPortForward({ kubeconfig: file, namespace: "task-1", pod: "starting", port: 8080 }),
      ).rejects.toThrow(
        "pod starting in namespace task-1 (context test) is Pending, not running; `multienv status task-1`",
      );
    } finally {
      api.close();
      backend.close();
    }
  });
});
