// npm run bench:scale
//
// How many task envs one engine holds: for N = 1, 2, 4 and 8 demo stacks (stacks/Pulumi.demo.yaml, self-test
// off: it needs the web stand-in), deployed at once from one runner process:
//   - deploy: from the first `up` starting to the last one done (each waits for its gateway healthy);
//   - docker-compose: the same containers (bench/compose.ts) of all N envs started at once, until every
//     gateway's /healthz answers, the engine's own tool beside the deploy;
// - memory per env once idle (the sum of its containers' memory as the engine reports it, less page cache), and the
// engine's
//     own (dockerd and containerd resident memory);
//   - idle CPU per env: its containers' CPU time over BENCH_IDLE_SECONDS with nothing driving them, as a
//     share of one core.
// The last line is one JSON object with every figure. Options (env): BENCH_SCALE ("1,2,4,8"),
// BENCH_IDLE_SECONDS (20). Needs docker-compose and the Pulumi CLI (installed, or scripts/pulumi-toolchain.sh).
import { execFile, execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { cpus, freemem, loadavg, tmpdir, totalmem } from "node:os";
import path from "node:path";
import { engineClient } from "../src/engines/docker";
import { deployStack, destroyStack, specFromStackFile, type StackSpec } from "../src/runner";
import { closeComposeApi, composeFileOf, gatewayHealthy } from "./compose";
import { useBenchPulumi } from "./kit";

const SCALE = (process.env.BENCH_SCALE ?? "1,2,4,8").split(",").map(Number);
const IDLE_SECONDS = Number(process.env.BENCH_IDLE_SECONDS ?? 20);
const REPO = path.resolve(__dirname, "..");
const api = engineClient();
const MiB = 1024 * 1024;

const STATE = useBenchPulumi();

/** A demo stack; its self-test would check the real github.com and the web, which this bench does not stand in for. */
function spec(name: string): StackSpec {
  return specFromStackFile(path.join(REPO, "stacks/Pulumi.demo.yaml"), name, { "multienv:selfTest": false });
}

async function containerIds(stack: string): Promise<string[]> {
  return (await api.listContainers({ filters: { label: [`multienv.stack=${stack}`] } })).map((c) => c.Id);
}

/** A container's memory in use less page cache, and its CPU time so far (ns), from the engine's stats. */
async function usageOf(id: string): Promise<{ memory: number; cpuNanos: number }> {
  const stats = (await api
    .getContainer(id)
    .stats({ stream: false, "one-shot": true } as { stream: false })) as unknown as {
    memory_stats: { usage?: number; stats?: Record<string, number> };
    cpu_stats: { cpu_usage: { total_usage: number } };
  };
  const cache =
    stats.memory_stats.stats?.total_inactive_file ??
    stats.memory_stats.stats?.inactive_file ??
    stats.memory_stats.stats?.cache ??
    0;
  return { memory: (stats.memory_stats.usage ?? 0) - cache, cpuNanos: stats.cpu_stats.cpu_usage.total_usage };
}

async function usages(ids: string[]): Promise<Record<string, { memory: number; cpuNanos: number }>> {
  return Object.fromEntries(await Promise.all(ids.map(async (id) => [id, await usageOf(id)] as const)));
}

function residentOf(processName: string): number {
  let total = 0;
  for (const pid of readdirSync("/proc").filter((p) => /^\d+$/.test(p))) {
    try {
      if (readFileSync(`/proc/${pid}/comm`, "utf8").trim() !== processName) continue;
      total += Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))![1]) * 1024;
    } catch {
      // gone
    }
  }
  return total;
}

function run(file: string, args: string[], cwd: string): Promise<void> {
  return new Promise((resolve, reject) =>
    execFile(file, args, { cwd, maxBuffer: 16 * 1024 * 1024 }, (error, _o, stderr) =>
      error
        ? reject(new Error(`${file} ${args.join(" ")}: ${stderr.trim().split("\n").slice(-5).join("\n")}`))
        : resolve(),
    ),
  );
}

interface Round {
  envs: number;
  deploySeconds: number;
  composeSeconds: number;
  memoryMiBPerEnv: number;
  idleCpuPercentPerEnv: number;
  engineMiB: number;
  hostFreeMiB: number;
}

async function round(n: number): Promise<Round> {
  const stacks = Array.from({ length: n }, (_, i) => `bench-scale-${n}-${i + 1}`);
  const composeDir = mkdtempSync(path.join(tmpdir(), "multienv-bench-scale-"));
  try {
    const started = performance.now();
    await Promise.all(stacks.map((s) => deployStack(spec(s))));
    const deploySeconds = (performance.now() - started) / 1000;
    // Said at once: compose, run after, may fail where the deploy did not.
    console.log(`${n} env(s) at once: deployed in ${deploySeconds.toFixed(1)} s`);
    // Idle: nothing drives the envs; the first seconds after a deploy still settle (Chromium's start tabs).
    await new Promise((r) => setTimeout(r, 10_000));
    const ids = Object.fromEntries(await Promise.all(stacks.map(async (s) => [s, await containerIds(s)] as const)));
    const before = await usages(Object.values(ids).flat());
    await new Promise((r) => setTimeout(r, IDLE_SECONDS * 1000));
    const after = await usages(Object.values(ids).flat());
    const perEnv = stacks.map((s) => ({
      memory: ids[s].reduce((sum, id) => sum + after[id].memory, 0),
      cpu: ids[s].reduce((sum, id) => sum + after[id].cpuNanos - before[id].cpuNanos, 0) / (IDLE_SECONDS * 1e9),
    }));
    const engineMiB = (residentOf("dockerd") + residentOf("containerd")) / MiB;
    const hostFreeMiB = freemem() / MiB;
    for (const s of stacks) writeFileSync(path.join(composeDir, `${s}.yml`), await composeFileOf(s));
    await Promise.all(stacks.map((s) => destroyStack(s, { remove: true })));
    // docker-compose: the same containers of all N envs at once, until every gateway answers /healthz.
    const composeStarted = performance.now();
    await Promise.all(
      stacks.map(async (s) => {
        await run("docker-compose", ["-p", `${s}-compose`, "-f", `${s}.yml`, "up", "-d"], composeDir);
        await gatewayHealthy(`${s}-gateway`, 300_000);
      }),
    );
    const composeSeconds = (performance.now() - composeStarted) / 1000;
    await Promise.all(
      stacks.map((s) =>
        run("docker-compose", ["-p", `${s}-compose`, "-f", `${s}.yml`, "down", "-v", "-t", "1"], composeDir),
      ),
    );
    const avg = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
    return {
      envs: n,
      deploySeconds,
      composeSeconds,
      memoryMiBPerEnv: avg(perEnv.map((e) => e.memory)) / MiB,
      idleCpuPercentPerEnv: avg(perEnv.map((e) => e.cpu)) * 100,
      engineMiB,
      hostFreeMiB,
    };
  } finally {
    for (const s of stacks) {
      await destroyStack(s, { remove: true }).catch(() => undefined);
      rmSync(path.join(REPO, "stacks", `Pulumi.${s}.yaml`), { force: true });
      rmSync(path.join(REPO, "artifacts", s), { recursive: true, force: true });
      if (existsSync(path.join(composeDir, `${s}.yml`)))
        execFileSync(
          "docker-compose",
          ["-p", `${s}-compose`, "-f", path.join(composeDir, `${s}.yml`), "down", "-v", "-t", "1"],
          { stdio: "ignore" },
        );
    }
    rmSync(composeDir, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  if (!existsSync("/usr/bin/docker-compose"))
    throw new Error("docker-compose is not installed: apt-get install docker-compose");
  const rounds: Round[] = [];
  try {
    for (const n of SCALE) {
      const r = await round(n);
      rounds.push(r);
      console.log(
        `${n} env(s) at once: deploy ${r.deploySeconds.toFixed(1)} s (docker-compose ${r.composeSeconds.toFixed(1)} s, ratio ${(r.deploySeconds / r.composeSeconds).toFixed(2)}x); idle: ${r.memoryMiBPerEnv.toFixed(0)} MiB and ${r.idleCpuPercentPerEnv.toFixed(2)}% of a core per env; engine ${r.engineMiB.toFixed(0)} MiB; host free ${r.hostFreeMiB.toFixed(0)} MiB`,
      );
    }
  } finally {
    rmSync(STATE, { recursive: true, force: true });
    closeComposeApi();
  }
  const perEnvSeconds = rounds.map((r) => r.deploySeconds / r.envs);
  console.log(
    `deploy seconds per env: ${rounds.map((r, i) => `${r.envs}: ${perEnvSeconds[i].toFixed(1)}`).join(", ")} (${cpus().length} cores, ${(totalmem() / MiB / 1024).toFixed(0)} GiB)`,
  );
  console.log(
    JSON.stringify({
      bench: "scale",
      cpus: cpus().length,
      totalMiB: totalmem() / MiB,
      loadavg: loadavg()[0],
      idleSeconds: IDLE_SECONDS,
      rounds,
    }),
  );
}

main().catch((error: unknown) => {
  console.error(`bench:scale: ${(error as Error).message}`);
  process.exitCode = 1;
});
