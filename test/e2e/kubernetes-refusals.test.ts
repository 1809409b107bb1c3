// What the test cluster refuses a deploy, said by `up` in one line naming what ran out and what to do, long before
// the provider's 10-minute wait for a pod that never runs: a pod no node takes (its sites placed on a node label no
// node has, so the scheduler marks them Unschedulable and they stay Pending), and a ResourceQuota of the stack's
// namespace that allows no pod (the API server refuses the pod's create). Each deploy is cancelled, its state kept,
// and `down` then removes what it had created.
import fs from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { deployStack, destroyStack, RunnerError, type StackSpec } from "../../src/runner";
import { until } from "../helpers/until";
import { e2eStack, REPO, stackFileOf } from "./helpers/env";
import { kubectl, namespaceGone, PREREQUISITES_TIMEOUT_MS, testCluster, type TestCluster } from "./helpers/kubernetes";

const UNPLACEABLE = e2eStack("k8s-noroom");
const QUOTA = e2eStack("k8s-quota");
let cluster: TestCluster;

/** The sample shop and one computer; `kubernetes` is the target's section. */
function task(name: string, kubernetes: Record<string, unknown> = {}): StackSpec {
  return {
    name,
    config: {
      "multienv:target": "kubernetes",
      "multienv:selfTest": false,
      "multienv:kubernetes": kubernetes,
      "multienv:websites": {
        shop: {
          domains: ["shop.test"],
          server: { image: "multienv/sample-shop-server" },
          frontend: { image: "multienv/sample-shop-frontend" },
        },
      },
      "multienv:computers": { agent: { network: "none", startTabs: ["https://shop.test/"] } },
    },
  };
}

async function refusalOf(deploy: Promise<unknown>): Promise<RunnerError> {
  const error = await deploy.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(RunnerError);
  return error as RunnerError;
}

async function removeStack(stack: string): Promise<void> {
  await destroyStack(stack, { remove: true }).catch(() => undefined);
  kubectl(cluster, ["delete", "namespace", stack, "--ignore-not-found", "--wait=false"]);
  fs.rmSync(path.join(REPO, "artifacts", stack), { recursive: true, force: true });
  fs.rmSync(stackFileOf(stack), { force: true });
}

beforeAll(async () => {
  cluster = testCluster();
  process.env.KUBECONFIG = cluster.kubeconfig;
  for (const stack of [UNPLACEABLE, QUOTA]) await removeStack(stack);
}, PREREQUISITES_TIMEOUT_MS);

afterAll(async () => {
  if (cluster) for (const stack of [UNPLACEABLE, QUOTA]) await removeStack(stack);
}, 600_000);

describe("a deploy the test cluster refuses", () => {
  // The test's own timeout is under the provider's 10 minutes of waiting for a pod: the old deploy waited that out.
  it("says in one line which pod no node takes and why, and down removes what it created", async () => {
    const error = await refusalOf(
      deployStack(task(UNPLACEABLE, { placement: { sites: { nodeSelector: { "multienv.test/node": "c" } } } })),
    );
    expect(error.message.split("\n")).toHaveLength(1);
    expect(error.message).toMatch(new RegExp(`^stack ${UNPLACEABLE}: pod shop-(server|frontend) fits on no node`));
    expect(error.message).toMatch(/didn't match Pod's node affinity\/selector/);
    expect(error.message).toContain("fix kubernetes.nodeSelector or placement, or label a node");
    expect(error.message).toContain(`\`multienv down ${UNPLACEABLE}\``);
    expect(error.message).not.toMatch(/\n\s+at /);

    await destroyStack(UNPLACEABLE, { remove: true });
    await namespaceGone(cluster, UNPLACEABLE);
  }, 480_000);

  it("says in one line which ResourceQuota refuses a pod, with the figures and the fix", async () => {
    const deploy = refusalOf(deployStack(task(QUOTA)));
    // The quota is put in the namespace as soon as the deploy creates it: no pod at all. The gateway's pod is
    // created only after the site pods are ready, so whatever the race with the sites' pods, one create is refused.
    await until(
      `namespace ${QUOTA} created`,
      async () => {
        try {
          kubectl(cluster, ["get", "namespace", QUOTA]);
          return true;
        } catch {
          return false;
        }
      },
      300_000,
      100,
    );
    kubectl(
      cluster,
      ["apply", "-f", "-"],
      JSON.stringify({
        apiVersion: "v1",
        kind: "ResourceQuota",
        metadata: { name: "no-pods", namespace: QUOTA },
        spec: { hard: { pods: "0" } },
      }),
    );
    const error = await deploy;
    expect(error.message.split("\n")).toHaveLength(1);
    expect(error.message).toMatch(
      new RegExp(
        `^stack ${QUOTA}: the cluster's ResourceQuota no-pods in namespace ${QUOTA} (refuses pod \\S+ \\(requested pods=1, used pods=\\d+, limited to pods=0\\)|is not counted yet)`,
      ),
    );
    expect(error.message).toContain(`\`multienv down ${QUOTA}\``);

    await destroyStack(QUOTA, { remove: true });
    await namespaceGone(cluster, QUOTA);
  }, 480_000);
});
