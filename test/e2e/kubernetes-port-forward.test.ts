// The runner's way to a pod on a real cluster (the one-node test cluster of scripts/test-cluster.sh):
// a port-forward through the API server to a server bound to the pod's loopback, as the gateway's runner listener
// is; a pod recreated from its own spec; the namespace deleted and seen gone. A namespace of its own, removed after.
import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { coreApi, loadKubeConfig } from "../../src/engines/kubernetes";
import { deleteNamespace, labelledNamespaces, namespaceGone } from "../../src/runner/targets/kubernetes/namespaces";
import { podStates, recreatePod } from "../../src/runner/targets/kubernetes/pods";
import { openGatewayPortForward } from "../../src/engines/port-forward";
import { testCluster } from "./helpers/kubernetes";

// The test cluster, brought up if it is not (seconds once setup.sh has built its binaries).
const cluster0 = testCluster();
const env = { KUBECONFIG: cluster0.kubeconfig, MULTIENV_TEST_KUBECTL: cluster0.kubectl };
const NAMESPACE = `multienv-pf-${randomBytes(3).toString("hex")}`;
const POD = "loopback";
// Bound to the pod's loopback, as the gateway's runner listener is: only a port-forward reaches it.
const SERVER = `require("http").createServer((q, s) => { let n = 0; q.on("data", (c) => (n += c.length)); q.on("end", () => s.end("pod " + q.method + " " + q.url + " " + n)); }).listen(8080, "127.0.0.1")`;

// Run inside the pod, on its loopback (where the server is bound and kubelet's own TCP probe does not look).
const READY_PROBE = {
  exec: {
    command: [
      "node",
      "-e",
      `require("net").connect(8080, "127.0.0.1").on("connect", () => process.exit(0)).on("error", () => process.exit(1))`,
    ],
  },
  periodSeconds: 1,
};

function kubectl(args: string[]): string {
  return execFileSync(env.MULTIENV_TEST_KUBECTL || "kubectl", ["--kubeconfig", env.KUBECONFIG, ...args], {
    encoding: "utf8",
    timeout: 180_000,
  });
}

describe("a port-forward to a pod on the test cluster", () => {
  const cluster = () => loadKubeConfig({ kubeconfig: env.KUBECONFIG });

  beforeAll(() => {
    kubectl(["create", "namespace", NAMESPACE]);
    kubectl(["label", "namespace", NAMESPACE, `multienv.stack=${NAMESPACE}`]);
    kubectl([
      "run",
      POD,
      "-n",
      NAMESPACE,
      "--image=multienv/node-base",
      "--image-pull-policy=Never",
      "--restart=Never",
      "--labels=multienv.role=gateway",
      // Ready once it listens, as the gateway's own probe makes it: without a probe a pod is Ready when its process
      // starts, before the server binds, and a forward at once is refused.
      "--override-type=strategic",
      `--overrides=${JSON.stringify({ spec: { containers: [{ name: POD, readinessProbe: READY_PROBE }] } })}`,
      "--command",
      "--",
      "node",
      "-e",
      SERVER,
    ]);
    kubectl(["wait", "-n", NAMESPACE, "--for=condition=Ready", `pod/${POD}`, "--timeout=120s"]);
  }, 200_000);

  afterAll(() => {
    kubectl(["delete", "namespace", NAMESPACE, "--ignore-not-found", "--wait=false"]);
  });

  it("reaches the pod's loopback from 127.0.0.1, a stream per connection, bodies both ways", async () => {
    const forward = await openGatewayPortForward({
      kubeconfig: env.KUBECONFIG,
      namespace: NAMESPACE,
      pod: POD,
      port: 8080,
    });
    try {
      const answers = await Promise.all(
        Array.from({ length: 8 }, async (_, i) => (await fetch(`${forward.url}/n/${i}`)).text()),
      );
      expect(answers).toEqual(Array.from({ length: 8 }, (_, i) => `pod GET /n/${i} 0`));
      const body = Buffer.alloc(4 * 1024 * 1024, 7);
      const posted = await fetch(`${forward.url}/upload`, { method: "POST", body });
      expect(await posted.text()).toBe(`pod POST /upload ${body.length}`);
    } finally {
      await forward.close();
    }
    await expect(fetch(`${forward.url}/after-close`)).rejects.toThrow();
  });

  it("names the pod and namespace when the pod is not there", async () => {
    await expect(
      openGatewayPortForward({ kubeconfig: env.KUBECONFIG, namespace: NAMESPACE, pod: "gateway", port: 8080 }),
    ).rejects.toThrow(`pod gateway is not in namespace ${NAMESPACE}`);
  });

  it("recreates the pod from its own spec: a new pod of the same name, Ready, reached again", async () => {
    const core = coreApi(cluster());
    const before = (await core.readNamespacedPod({ name: POD, namespace: NAMESPACE })).metadata!.uid;
    await recreatePod(core, NAMESPACE, POD);
    const after = await core.readNamespacedPod({ name: POD, namespace: NAMESPACE });
    expect(after.metadata!.uid).not.toBe(before);
    expect(after.spec!.containers[0].readinessProbe).toMatchObject(READY_PROBE);
    const [state] = await podStates(core, [{ name: POD, namespace: NAMESPACE, role: "gateway" }]);
    expect(state).toMatchObject({ phase: "Running", ready: true, restarts: 0 });
    const forward = await openGatewayPortForward({
      kubeconfig: env.KUBECONFIG,
      namespace: NAMESPACE,
      pod: POD,
      port: 8080,
    });
    try {
      expect(await (await fetch(`${forward.url}/again`)).text()).toBe("pod GET /again 0");
    } finally {
      await forward.close();
    }
  }, 240_000);

  it("finds the namespace by its stack label, deletes it and sees it gone", async () => {
    const core = coreApi(cluster());
    expect((await labelledNamespaces(core)).map((n) => n.name)).toContain(NAMESPACE);
    await deleteNamespace(core, NAMESPACE);
    expect(await namespaceGone(core, NAMESPACE, { timeoutMs: 120_000 })).toBeUndefined();
  }, 180_000);
});
