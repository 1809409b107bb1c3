// npm run bench:kubernetes
//
// The demo task on the kubernetes target (stacks/Pulumi.demo-kubernetes.yaml, on the one-node test cluster of
// scripts/test-cluster.sh) beside the same task on the docker target (stacks/Pulumi.demo.yaml, the local engine),
// deployed by the runner with the real Pulumi engine, in alternating rounds:
//   1. deploy-to-healthy: `deployStack` (no preview, no self-test) from start to done; on both targets the deploy
//      waits for the gateway to be healthy (every site ready, every capture writing) and the computers after it.
//   2. memory per idle env, once the env has been idle BENCH_IDLE_SECONDS: on the cluster the working set of the
//      namespace's pods as the kubelet reports it (its stats summary, through the API server), on Docker the
//      memory of the stack's containers (their cgroups, as `docker stats` reads them). Both count the env's own
//      processes alone: the cluster's daemons (about 850 MiB on one node) and dockerd are the platform's.
//   3. destroy, which first collects every capture and proxy log.
// The last line is one JSON object with every figure. Options (env): BENCH_ROUNDS (2), BENCH_IDLE_SECONDS (20).
import { execFileSync } from "node:child_process";
import { machineCacheDir } from "../src/runner/stack/toolchain";
import { existsSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { deployStack, destroyStack } from "../src/runner";
import { engineClient } from "../src/engines/docker";
import { specFromStackFile } from "../src/runner/stack/workspace";
import { median, useBuiltPulumi } from "./kit";

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 2);
const IDLE_SECONDS = Number(process.env.BENCH_IDLE_SECONDS ?? 20);
const REPO = path.resolve(__dirname, "..");

// The built CLI, and a state backend of the bench's own unless one is given.
useBuiltPulumi();
process.env.PULUMI_BACKEND_URL ??= `file://${mkdtempSync(path.join(tmpdir(), "multienv-bench-state-"))}`;
process.env.PULUMI_CONFIG_PASSPHRASE ??= "bench";
process.env.PULUMI_SKIP_UPDATE_CHECK = "true";
process.env.PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION = "true";

const CLUSTER_SCRIPT = path.join(REPO, "scripts/test-cluster.sh");
const kubeconfig = execFileSync("bash", [CLUSTER_SCRIPT, "up"], {
  encoding: "utf8",
  stdio: ["ignore", "pipe", "inherit"],
})
  .trim()
  .split("\n")
  .at(-1) as string;
process.env.KUBECONFIG = kubeconfig;
const kubectlPath = path.join(machineCacheDir(), "test-cluster/v1.37.2/bin/kubectl");
const kubectl = (args: string[]) =>
  execFileSync(existsSync(kubectlPath) ? kubectlPath : "kubectl", ["--kubeconfig", kubeconfig, ...args], {
    encoding: "utf8",
    maxBuffer: 64 * 1024 * 1024,
  });

const MIB = 1024 * 1024;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The working set of the namespace's pods, summed, as the kubelet reports it. */
function clusterMemoryMib(namespace: string): number {
  const node = JSON.parse(kubectl(["get", "nodes", "-o", "json"])).items[0].metadata.name as string;
  const summary = JSON.parse(kubectl(["get", "--raw", `/api/v1/nodes/${node}/proxy/stats/summary`])) as {
    pods: { podRef: { namespace: string }; memory?: { workingSetBytes?: number } }[];
  };
  const bytes = summary.pods
    .filter((p) => p.podRef.namespace === namespace)
    .reduce((sum, p) => sum + (p.memory?.workingSetBytes ?? 0), 0);
  return bytes / MIB;
}

/** The memory of the stack's containers (usage less the page cache, as `docker stats` shows it), summed. */
async function dockerMemoryMib(stack: string): Promise<number> {
  const api = engineClient();
  const containers = await api.listContainers({ filters: { label: [`multienv.stack=${stack}`] } });
  let bytes = 0;
  for (const c of containers) {
    const stats = (await api.getContainer(c.Id).stats({ stream: false })) as {
      memory_stats: { usage?: number; stats?: { total_inactive_file?: number; inactive_file?: number } };
    };
    const usage = stats.memory_stats.usage ?? 0;
    bytes += usage - (stats.memory_stats.stats?.total_inactive_file ?? stats.memory_stats.stats?.inactive_file ?? 0);
  }
  return bytes / MIB;
}

interface Round {
  deploySeconds: number;
  idleMemoryMib: number;
  destroySeconds: number;
}

async function round(target: "docker" | "kubernetes", i: number): Promise<Round> {
  const stack = `bench-${target === "docker" ? "dk" : "k8s"}-${i}`;
  const file = path.join(REPO, "stacks", target === "docker" ? "Pulumi.demo.yaml" : "Pulumi.demo-kubernetes.yaml");
  const spec = specFromStackFile(file, stack);
  const started = Date.now();
  await deployStack(spec, { selfTest: false, log: () => undefined });
  const deploySeconds = (Date.now() - started) / 1000;
  await sleep(IDLE_SECONDS * 1000);
  const idleMemoryMib = target === "docker" ? await dockerMemoryMib(stack) : clusterMemoryMib(stack);
  const destroyStarted = Date.now();
  await destroyStack(stack, { log: () => undefined });
  const destroySeconds = (Date.now() - destroyStarted) / 1000;
  console.log(
    `${target} round ${i + 1}: deploy-to-healthy ${deploySeconds.toFixed(1)} s, idle env ${idleMemoryMib.toFixed(0)} MiB, destroy ${destroySeconds.toFixed(1)} s`,
  );
  return { deploySeconds, idleMemoryMib, destroySeconds };
}

async function main(): Promise<void> {
  const rounds: Record<"docker" | "kubernetes", Round[]> = { docker: [], kubernetes: [] };
  for (let i = 0; i < ROUNDS; i++)
    for (const target of i % 2 === 0 ? (["kubernetes", "docker"] as const) : (["docker", "kubernetes"] as const))
      rounds[target].push(await round(target, i));
  const figure = (target: "docker" | "kubernetes", key: keyof Round) => median(rounds[target].map((r) => r[key]));
  const summary = {
    kubernetes: {
      deploySeconds: figure("kubernetes", "deploySeconds"),
      idleMemoryMib: figure("kubernetes", "idleMemoryMib"),
      destroySeconds: figure("kubernetes", "destroySeconds"),
    },
    docker: {
      deploySeconds: figure("docker", "deploySeconds"),
      idleMemoryMib: figure("docker", "idleMemoryMib"),
      destroySeconds: figure("docker", "destroySeconds"),
    },
  };
  const ratio = (key: keyof Round) => summary.kubernetes[key] / summary.docker[key];
  console.log(
    `median of ${ROUNDS}: deploy-to-healthy kubernetes ${summary.kubernetes.deploySeconds.toFixed(1)} s vs docker ${summary.docker.deploySeconds.toFixed(1)} s (${ratio("deploySeconds").toFixed(2)}x); idle env ${summary.kubernetes.idleMemoryMib.toFixed(0)} MiB vs ${summary.docker.idleMemoryMib.toFixed(0)} MiB (${ratio("idleMemoryMib").toFixed(2)}x); destroy ${summary.kubernetes.destroySeconds.toFixed(1)} s vs ${summary.docker.destroySeconds.toFixed(1)} s`,
  );
  console.log(
    JSON.stringify({
      bench: "kubernetes",
      rounds: ROUNDS,
      idleSeconds: IDLE_SECONDS,
      ...summary,
      ratios: { deploy: ratio("deploySeconds"), idleMemory: ratio("idleMemoryMib"), destroy: ratio("destroySeconds") },
      all: rounds,
    }),
  );
}

main().catch((error: unknown) => {
  console.error(`bench:kubernetes: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
});
