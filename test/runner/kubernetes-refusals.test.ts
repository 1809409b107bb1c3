// What a cluster refuses a deploy, read from what the API server reports (the pods' conditions, the namespace's
// Warning events, the engine's error for a create refused outright) and said in one line naming what ran out and
// what to do; and the watch that ends a deploy only once a pod has stayed blocked, against a real HTTP server that
// answers the pod and event listings the way the API server does. The texts are the test cluster's (v1.37).
import http from "node:http";
import type { CoreV1Event, V1Pod } from "@kubernetes/client-node";
import { afterAll, describe, expect, it } from "vitest";
import { coreApi, loadKubeConfig } from "../../src/engines/kubernetes";
import { engineRefusal, podBlocks, watchRefusals } from "../../src/runner/targets/kubernetes/refusals";
import { until } from "../helpers/until";
import { cleanup, tempDir } from "../helpers/processes";
import { writeFileSync } from "node:fs";
import { join } from "node:path";

afterAll(cleanup);

const UNSCHEDULABLE =
  "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector. preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.";
const NO_ADDRESS =
  'Failed to create pod sandbox: rpc error: code = Unknown desc = failed to setup network for sandbox "5d1c": plugin type="bridge" name="kubernetes" failed (add): failed to allocate for range 0: no IP addresses available in range set: 10.244.1.1-10.244.1.254';

function pending(name: string, conditions: NonNullable<V1Pod["status"]>["conditions"] = [], nodeName?: string): V1Pod {
  return {
    metadata: { name, namespace: "task" },
    spec: { containers: [], ...(nodeName ? { nodeName } : {}) },
    status: { phase: "Pending", conditions },
  };
}

function warning(pod: string, reason: string, message: string): CoreV1Event {
  return {
    metadata: { name: `${pod}.1` },
    involvedObject: { kind: "Pod", name: pod, namespace: "task" },
    type: "Warning",
    reason,
    message,
    source: { component: "kubelet", host: "multienv-k8s-2" },
  };
}

const unschedulable = (message: string) => [
  { type: "PodScheduled", status: "False", reason: "Unschedulable", message },
];

describe("a pod the cluster cannot run", () => {
  it("is one no node takes: the scheduler's reason without its preemption half, and the fix for that reason", () => {
    const cases: [string, RegExp][] = [
      [UNSCHEDULABLE, /fix kubernetes\.nodeSelector or placement, or label a node$/],
      [
        "0/2 nodes are available: 2 Too many pods. preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod.",
        /every node runs its most pods already/,
      ],
      [
        "0/2 nodes are available: 1 Insufficient memory, 1 node(s) had untolerated taint {node.kubernetes.io/unreachable: }.",
        /no room left for its requests/,
      ],
      [
        "0/2 nodes are available: 2 node(s) had untolerated taint {node.kubernetes.io/unreachable: }.",
        /add kubernetes\.tolerations, or bring the nodes back/,
      ],
    ];
    for (const [message, advice] of cases) {
      const [block] = podBlocks([pending("shop-server", unschedulable(message))], [], "task");
      expect(block.kind).toBe("unschedulable");
      expect(block.line).toMatch(/^pod shop-server fits on no node of the cluster \(0\/2 nodes are available: .*\): /);
      expect(block.line).not.toContain("preemption");
      expect(block.line).toMatch(advice);
    }
  });

  it("is one whose node has no pod address left, from the CNI's words in the namespace's Warning events", () => {
    const blocks = podBlocks(
      [pending("gateway", [{ type: "PodScheduled", status: "True" }], "multienv-k8s-2"), pending("shop-server")],
      [warning("gateway", "FailedCreatePodSandBox", NO_ADDRESS), warning("shop-server", "BackOff", "Back-off pulling")],
      "task",
    );
    expect(blocks).toEqual([
      {
        pod: "gateway",
        kind: "no-address",
        line: "pod gateway gets no address: the pod range of node multienv-k8s-2 (10.244.1.1-10.244.1.254) is used up; deploy fewer envs at once, take others down, or give the nodes larger pod CIDRs",
      },
    ]);
  });

  it("is none for a pod that runs, one being deleted, or a sandbox that failed for another reason", () => {
    const running: V1Pod = { ...pending("a", unschedulable(UNSCHEDULABLE)), status: { phase: "Running" } };
    const deleting: V1Pod = {
      ...pending("b", unschedulable(UNSCHEDULABLE)),
      metadata: { name: "b", deletionTimestamp: new Date() },
    };
    const otherSandbox = warning(
      "c",
      "FailedCreatePodSandBox",
      "failed to setup network for sandbox: context deadline exceeded",
    );
    expect(podBlocks([running, deleting, pending("c")], [otherSandbox], "task")).toEqual([]);
  });
});

describe("a create the API server refuses", () => {
  it("names the ResourceQuota, the pod, the figures and the fix", () => {
    const error =
      'kubernetes:core/v1:Pod (task-gateway): error: resource task/gateway was not created: pods "gateway" is forbidden: exceeded quota: no-pods, requested: pods=1, used: pods=0, limited: pods=0';
    expect(engineRefusal(error, "task")).toBe(
      "stack task: the cluster's ResourceQuota no-pods in namespace task refuses pod gateway (requested pods=1, used pods=0, limited to pods=0): raise the quota (`kubectl -n task edit resourcequota no-pods`) or deploy a smaller env",
    );
    expect(
      engineRefusal(
        'pods "shop-server" is forbidden: exceeded quota: mem, requested: requests.memory=64Mi, used: requests.memory=1Gi, limited: requests.memory=1Gi',
        "task",
      ),
    ).toContain(
      "refuses pod shop-server (requested requests.memory=64Mi, used requests.memory=1Gi, limited to requests.memory=1Gi)",
    );
  });

  it("says a quota not counted yet, and requests refused as too many, each with what to do", () => {
    expect(
      engineRefusal('pods "gateway" is forbidden: status unknown for quota: no-pods, resource: pods', "task"),
    ).toMatch(/ResourceQuota no-pods in namespace task is not counted yet.*deploy again in a moment$/);
    expect(
      engineRefusal(
        "the server has received too many requests and has asked us to try again later (post pods)",
        "task",
      ),
    ).toMatch(/429 Too Many Requests\): deploy fewer envs at once/);
  });

  it("is none for any other error", () => {
    expect(
      engineRefusal('pods "gateway" is forbidden: violates PodSecurity "baseline:latest"', "task"),
    ).toBeUndefined();
    expect(engineRefusal("container failed to be in healthy state", "task")).toBeUndefined();
  });
});

describe("the watch of a deploying namespace", () => {
  /** An HTTP server answering the namespace's pod and Warning event listings as the API server does. */
  async function apiServer(pods: () => V1Pod[], events: () => CoreV1Event[]) {
    const asked: string[] = [];
    const server = http.createServer((req, res) => {
      asked.push(req.url ?? "");
      const url = new URL(req.url ?? "/", "http://x");
      res.setHeader("content-type", "application/json");
      if (url.pathname === "/api/v1/namespaces/task/pods")
        return res.end(JSON.stringify({ apiVersion: "v1", kind: "PodList", metadata: {}, items: pods() }));
      if (url.pathname === "/api/v1/namespaces/task/events" && url.searchParams.get("fieldSelector") === "type=Warning")
        return res.end(JSON.stringify({ apiVersion: "v1", kind: "EventList", metadata: {}, items: events() }));
      res.statusCode = 404;
      res.end(JSON.stringify({ kind: "Status", status: "Failure", code: 404, message: "not found" }));
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const dir = tempDir("refusals-");
    const file = join(dir, "kubeconfig");
    const port = (server.address() as { port: number }).port;
    writeFileSync(
      file,
      `apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: "http://127.0.0.1:${port}", insecure-skip-tls-verify: true}}]\nusers: [{name: u, user: {token: t}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n`,
    );
    return { core: coreApi(loadKubeConfig({ kubeconfig: file })), asked, close: () => server.close() };
  }

  it("says the refusal once a pod stays blocked for the hold, and not for a block that clears before it", async () => {
    let pods = [pending("shop-server", unschedulable(UNSCHEDULABLE))];
    const api = await apiServer(
      () => pods,
      () => [],
    );
    const lines: string[] = [];
    const stop = watchRefusals(api.core, "task", (line) => lines.push(line), { pollMs: 20, holdMs: 300 });
    try {
      // The block clears (the pod is scheduled) before the hold: nothing said.
      await until("looked twice", async () => api.asked.length >= 4, 5_000, 10);
      pods = [pending("shop-server", [{ type: "PodScheduled", status: "True" }], "multienv-k8s")];
      await new Promise((r) => setTimeout(r, 500));
      expect(lines).toEqual([]);
      // It comes back and stays: said once, with the stack's name first.
      pods = [pending("shop-server", unschedulable(UNSCHEDULABLE))];
      await until("refusal said", async () => lines.length > 0, 5_000, 10);
      await new Promise((r) => setTimeout(r, 200));
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(/^stack task: pod shop-server fits on no node of the cluster/);
    } finally {
      stop();
      api.close();
    }
  });

  it("sees no block in a namespace the API server does not have yet, and stops looking when stopped", async () => {
    const api = await apiServer(
      () => [],
      () => [],
    );
    const lines: string[] = [];
    const stop = watchRefusals(api.core, "other", (line) => lines.push(line), { pollMs: 20, holdMs: 0 });
    await until("looked", async () => api.asked.length >= 4, 5_000, 10);
    stop();
    const asked = api.asked.length;
    await new Promise((r) => setTimeout(r, 200));
    expect(api.asked.length).toBeLessThanOrEqual(asked + 2);
    expect(lines).toEqual([]);
    api.close();
  });
});
