// npm run bench:kubernetes
//
// Many task envs at once on the kubernetes target (the two-node test cluster of scripts/test-cluster.sh) beside the
// same envs on the docker target (the local engine), in one run, each deployed by the runner's many-stacks path
// (`deployStacks`, at most BENCH_CONCURRENCY deploys under way at once) with the real Pulumi engine, no preview, no
// self-test. The cluster's envs first, then the engine's, each target's envs all destroyed before the other's start:
//   1. deploy-to-healthy, each env's from its own deploy's start (its wait for a slot left out) to done: on both
//      targets the deploy waits for the gateway to be healthy (every site ready, every capture writing) and the
//      computers after it; p50 and p99 over the envs, and the whole batch's wall time.
//   2. memory per idle env, once they have been idle BENCH_IDLE_SECONDS: on the cluster the working set of each
//      env's namespace's pods as the kubelets report it (their stats summaries, through the API server), on Docker
//      the memory of the stack's containers (their cgroups, as `docker stats` reads them). Both count the envs' own
//      processes alone: the cluster's daemons and dockerd are the platform's.
//   3. the API server's requests per env (its `apiserver_request_total`, summed over every label, read from
//      /metrics before and after): for the deploys, and for the destroys. The cluster's own controllers' requests
//      in that time are in it; the idle phase's requests per second say how many that is.
//   4. destroy, which first collects every capture and proxy log, the batch at the same concurrency.
// A deploy that fails is counted and its one line printed; the figures are the others'.
//
// The envs' shape (BENCH_SHAPE): `lite` (the default) is the demo made lighter to fit twenty at once on 2 cores:
// the demo's synthetic shop (server and frontend, captured) and its allowlist computer with the shop as start tab:
// 5 pods an env, one Chromium. `demo` is the demo itself (stacks/Pulumi.demo-kubernetes.yaml, stacks/Pulumi.demo.yaml:
// three sites, a live one among them, two computers; 10 pods an env), which on this machine idles at about 600 MiB
// and a fifth of a core an env: twenty would ask four cores of two before any deploy.
//
// BENCH_ENVS=1 keeps the one-at-a-time figures: one env per target in alternating rounds (BENCH_ROUNDS, 2).
// The last line is one JSON object with every figure. Options (env): BENCH_ENVS (20), BENCH_CONCURRENCY (the
// runner's default, DEFAULT_DEPLOY_CONCURRENCY), BENCH_SHAPE (lite), BENCH_IDLE_SECONDS (20), BENCH_ROUNDS (2).
import { execFileSync } from "node:child_process";
import { existsSync, rmSync } from "node:fs";
import { loadavg } from "node:os";
import path from "node:path";
import {
  DEFAULT_DEPLOY_CONCURRENCY,
  deployStack,
  deployStacks,
  destroyStack,
  specFromStackFile,
  type StackSpec,
} from "../src/runner";
import { settleWithLimit } from "../src/runner/stack/concurrency";
import { machineCacheDir } from "../src/runner/stack/toolchain";
import { engineClient } from "../src/engines/docker";
import { median, percentile, useBenchPulumi } from "./kit";

type Target = "docker" | "kubernetes";
const ENVS = Number(process.env.BENCH_ENVS ?? 20);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? DEFAULT_DEPLOY_CONCURRENCY);
const SHAPE = process.env.BENCH_SHAPE ?? "lite";
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 2);
const IDLE_SECONDS = Number(process.env.BENCH_IDLE_SECONDS ?? 20);
const REPO = path.resolve(__dirname, "..");

if (SHAPE !== "lite" && SHAPE !== "demo") throw new Error(`BENCH_SHAPE ${SHAPE}: write lite or demo`);
const STATE = useBenchPulumi();

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
const load = () => loadavg().map((l) => l.toFixed(1));

/** The lite env: the demo's shop, captured, and its allowlist computer on the shop. */
function liteConfig(target: Target): Record<string, unknown> {
  return {
    "multienv:target": target,
    "multienv:captureTraffic": true,
    "multienv:websites": {
      shop: {
        domains: ["shop.test"],
        server: { image: "multienv/sample-shop-server" },
        frontend: { image: "multienv/sample-shop-frontend" },
        settings: { currency: "USD", products: 12 },
      },
    },
    "multienv:computers": { desktop: { network: ["example.org"], startTabs: ["https://shop.test/"] } },
  };
}

function specOf(target: Target, stack: string): StackSpec {
  if (SHAPE === "lite") return { name: stack, config: liteConfig(target) };
  const file = target === "docker" ? "Pulumi.demo.yaml" : "Pulumi.demo-kubernetes.yaml";
  return specFromStackFile(path.join(REPO, "stacks", file), stack);
}

/** The working set of each namespace's pods, summed, as the nodes' kubelets report it. */
function clusterMemoryMib(namespaces: string[]): Map<string, number> {
  const nodes = JSON.parse(kubectl(["get", "nodes", "-o", "json"])).items.map(
    (n: { metadata: { name: string } }) => n.metadata.name,
  ) as string[];
  const bytes = new Map(namespaces.map((ns) => [ns, 0]));
  for (const node of nodes) {
    const summary = JSON.parse(kubectl(["get", "--raw", `/api/v1/nodes/${node}/proxy/stats/summary`])) as {
      pods: { podRef: { namespace: string }; memory?: { workingSetBytes?: number } }[];
    };
    for (const pod of summary.pods)
      if (bytes.has(pod.podRef.namespace))
        bytes.set(pod.podRef.namespace, bytes.get(pod.podRef.namespace)! + (pod.memory?.workingSetBytes ?? 0));
  }
  return new Map([...bytes].map(([ns, b]) => [ns, b / MIB]));
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

/** The API server's requests so far: `apiserver_request_total` summed over every label, and by verb. */
function apiRequests(): { total: number; byVerb: Record<string, number> } {
  const byVerb: Record<string, number> = {};
  let total = 0;
  for (const line of kubectl(["get", "--raw", "/metrics"]).split("\n")) {
    if (!line.startsWith("apiserver_request_total{")) continue;
    const count = Number(line.slice(line.lastIndexOf(" ") + 1));
    const verb = /verb="([^"]+)"/.exec(line)?.[1] ?? "?";
    byVerb[verb] = (byVerb[verb] ?? 0) + count;
    total += count;
  }
  return { total, byVerb };
}

function requestsBetween(
  before: ReturnType<typeof apiRequests>,
  after: ReturnType<typeof apiRequests>,
): { total: number; byVerb: Record<string, number> } {
  const byVerb: Record<string, number> = {};
  for (const [verb, n] of Object.entries(after.byVerb))
    if (n - (before.byVerb[verb] ?? 0) > 0) byVerb[verb] = n - (before.byVerb[verb] ?? 0);
  return { total: after.total - before.total, byVerb };
}

interface Batch {
  envs: number;
  deployed: number;
  failures: string[];
  /** Each deployed env's deploy, from its own start to done (s). */
  deploySeconds: number[];
  deployP50: number;
  deployP99: number;
  /** From the first deploy's start to the last one's end (s). */
  batchSeconds: number;
  idleMemoryMibPerEnv: number;
  destroySeconds: number;
  destroyFailures: string[];
  load: string[];
  api?: { deployPerEnv: number; destroyPerEnv: number; idlePerSecond: number; deployByVerb: Record<string, number> };
}

/** `target`'s N envs deployed at once through deployStacks, measured idle, and destroyed at the same concurrency. */
async function batch(target: Target): Promise<Batch> {
  const stacks = Array.from({ length: ENVS }, (_, i) => `bench-${target === "docker" ? "dk" : "k8s"}-${i + 1}`);
  const apiStart = target === "kubernetes" ? apiRequests() : undefined;
  const deploySeconds: number[] = [];
  const failures: string[] = [];
  const started = Date.now();
  const results = await deployStacks(
    stacks.map((s) => specOf(target, s)),
    {
      concurrency: CONCURRENCY,
      selfTest: false,
      onSettled: (stack, outcome) => {
        if (outcome.ok) deploySeconds.push(outcome.ms / 1000);
        console.log(
          `${target} ${stack}: ${outcome.ok ? "deployed" : "failed"} in ${(outcome.ms / 1000).toFixed(1)} s (${(outcome.sinceStartMs / 1000).toFixed(1)} s into the batch), load ${load().join(" ")}${outcome.error ? `: ${outcome.error.split("\n")[0]}` : ""}`,
        );
      },
    },
  );
  const batchSeconds = (Date.now() - started) / 1000;
  for (const [i, r] of results.entries())
    if (r.status === "rejected") {
      const line = `${stacks[i]}: ${String((r.reason as Error).message ?? r.reason).split("\n")[0]}`;
      failures.push(line);
      console.log(`${target} failed: ${line}`);
    }
  const deployedStacks = stacks.filter((_, i) => results[i].status === "fulfilled");
  const apiDeployed = target === "kubernetes" ? apiRequests() : undefined;
  const idleStarted = Date.now();
  await sleep(IDLE_SECONDS * 1000);
  const apiIdle = target === "kubernetes" ? apiRequests() : undefined;
  const idleSeconds = (Date.now() - idleStarted) / 1000;
  const memory =
    target === "kubernetes"
      ? [...clusterMemoryMib(deployedStacks).values()]
      : await Promise.all(deployedStacks.map(dockerMemoryMib));
  const loadIdle = load();
  const destroyStarted = Date.now();
  const destroyed = await settleWithLimit(stacks, CONCURRENCY, (s) => destroyStack(s, { remove: true }));
  const destroySeconds = (Date.now() - destroyStarted) / 1000;
  // A spec's stack file is written beside the project's; the bench's go with their stacks.
  for (const s of stacks) rmSync(path.join(REPO, "stacks", `Pulumi.${s}.yaml`), { force: true });
  const destroyFailures = destroyed.flatMap((r, i) =>
    r.status === "rejected" ? [`${stacks[i]}: ${String((r.reason as Error).message).split("\n")[0]}`] : [],
  );
  const apiEnd = target === "kubernetes" ? apiRequests() : undefined;
  const result: Batch = {
    envs: ENVS,
    deployed: deployedStacks.length,
    failures,
    deploySeconds,
    deployP50: deploySeconds.length ? percentile(deploySeconds, 50) : Number.NaN,
    deployP99: deploySeconds.length ? percentile(deploySeconds, 99) : Number.NaN,
    batchSeconds,
    idleMemoryMibPerEnv: memory.length ? memory.reduce((a, b) => a + b, 0) / memory.length : Number.NaN,
    destroySeconds,
    destroyFailures,
    load: loadIdle,
    ...(apiStart && apiDeployed && apiIdle && apiEnd
      ? {
          api: {
            deployPerEnv: requestsBetween(apiStart, apiDeployed).total / ENVS,
            destroyPerEnv: requestsBetween(apiIdle, apiEnd).total / ENVS,
            idlePerSecond: requestsBetween(apiDeployed, apiIdle).total / idleSeconds,
            deployByVerb: Object.fromEntries(
              Object.entries(requestsBetween(apiStart, apiDeployed).byVerb).map(([v, n]) => [v, n / ENVS]),
            ),
          },
        }
      : {}),
  };
  console.log(
    `${target}: ${result.deployed}/${ENVS} deployed (${CONCURRENCY} at once) in ${batchSeconds.toFixed(1)} s; deploy-to-healthy p50 ${result.deployP50.toFixed(1)} s, p99 ${result.deployP99.toFixed(1)} s; idle env ${result.idleMemoryMibPerEnv.toFixed(0)} MiB; destroy of all ${destroySeconds.toFixed(1)} s${destroyFailures.length ? ` (${destroyFailures.length} failed: ${destroyFailures.join("; ")})` : ""}${result.api ? `; API requests per env ${result.api.deployPerEnv.toFixed(0)} to deploy, ${result.api.destroyPerEnv.toFixed(0)} to destroy, ${result.api.idlePerSecond.toFixed(1)}/s idle` : ""}; load ${loadIdle.join(" ")}`,
  );
  return result;
}

/** Namespaces an earlier run of this bench left (a killed run): deleted, so the deploys do not meet them. */
function sweepLeftNamespaces(): void {
  const left = kubectl(["get", "namespaces", "-o", "name"])
    .split("\n")
    .filter((n) => /^namespace\/bench-k8s-\d+$/.test(n));
  if (left.length > 0) kubectl(["delete", "--wait=true", ...left]);
}

async function many(): Promise<void> {
  console.log(
    `bench:kubernetes: ${ENVS} ${SHAPE} envs at once a target, ${CONCURRENCY} deploys under way at once; load ${load().join(" ")}`,
  );
  sweepLeftNamespaces();
  const kubernetes = await batch("kubernetes");
  const docker = await batch("docker");
  const ratio = (key: "deployP50" | "deployP99" | "batchSeconds" | "idleMemoryMibPerEnv" | "destroySeconds") =>
    kubernetes[key] / docker[key];
  console.log(
    `${ENVS} envs: deployed kubernetes ${kubernetes.deployed}, docker ${docker.deployed}; deploy-to-healthy p50 ${kubernetes.deployP50.toFixed(1)} s vs ${docker.deployP50.toFixed(1)} s (${ratio("deployP50").toFixed(2)}x), p99 ${kubernetes.deployP99.toFixed(1)} s vs ${docker.deployP99.toFixed(1)} s (${ratio("deployP99").toFixed(2)}x); all deployed in ${kubernetes.batchSeconds.toFixed(1)} s vs ${docker.batchSeconds.toFixed(1)} s (${ratio("batchSeconds").toFixed(2)}x); idle env ${kubernetes.idleMemoryMibPerEnv.toFixed(0)} MiB vs ${docker.idleMemoryMibPerEnv.toFixed(0)} MiB (${ratio("idleMemoryMibPerEnv").toFixed(2)}x); destroy ${kubernetes.destroySeconds.toFixed(1)} s vs ${docker.destroySeconds.toFixed(1)} s (${ratio("destroySeconds").toFixed(2)}x)`,
  );
  console.log(
    JSON.stringify({
      bench: "kubernetes",
      envs: ENVS,
      shape: SHAPE,
      concurrency: CONCURRENCY,
      idleSeconds: IDLE_SECONDS,
      kubernetes,
      docker,
      ratios: {
        deployP50: ratio("deployP50"),
        deployP99: ratio("deployP99"),
        batch: ratio("batchSeconds"),
        idleMemory: ratio("idleMemoryMibPerEnv"),
        destroy: ratio("destroySeconds"),
      },
    }),
  );
  if (kubernetes.deployed < ENVS || docker.deployed < ENVS) process.exitCode = 1;
}

interface Round {
  deploySeconds: number;
  idleMemoryMib: number;
  destroySeconds: number;
}

async function round(target: Target, i: number): Promise<Round> {
  const stack = `bench-${target === "docker" ? "dk" : "k8s"}-${i}`;
  const started = Date.now();
  await deployStack(specOf(target, stack), { selfTest: false, log: () => undefined });
  const deploySeconds = (Date.now() - started) / 1000;
  await sleep(IDLE_SECONDS * 1000);
  const idleMemoryMib =
    target === "docker" ? await dockerMemoryMib(stack) : (clusterMemoryMib([stack]).get(stack) ?? 0);
  const destroyStarted = Date.now();
  await destroyStack(stack, { log: () => undefined });
  const destroySeconds = (Date.now() - destroyStarted) / 1000;
  rmSync(path.join(REPO, "stacks", `Pulumi.${stack}.yaml`), { force: true });
  console.log(
    `${target} round ${i + 1}: deploy-to-healthy ${deploySeconds.toFixed(1)} s, idle env ${idleMemoryMib.toFixed(0)} MiB, destroy ${destroySeconds.toFixed(1)} s`,
  );
  return { deploySeconds, idleMemoryMib, destroySeconds };
}

async function oneAtATime(): Promise<void> {
  const rounds: Record<Target, Round[]> = { docker: [], kubernetes: [] };
  for (let i = 0; i < ROUNDS; i++)
    for (const target of i % 2 === 0 ? (["kubernetes", "docker"] as const) : (["docker", "kubernetes"] as const))
      rounds[target].push(await round(target, i));
  const figure = (target: Target, key: keyof Round) => median(rounds[target].map((r) => r[key]));
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
      envs: 1,
      shape: SHAPE,
      rounds: ROUNDS,
      idleSeconds: IDLE_SECONDS,
      ...summary,
      ratios: { deploy: ratio("deploySeconds"), idleMemory: ratio("idleMemoryMib"), destroy: ratio("destroySeconds") },
      all: rounds,
    }),
  );
}

(ENVS === 1 ? oneAtATime() : many())
  .then(() => rmSync(STATE, { recursive: true, force: true }))
  .catch((error: unknown) => {
    console.error(`bench:kubernetes: ${error instanceof Error ? error.message : String(error)}`);
    process.exit(1);
  });
