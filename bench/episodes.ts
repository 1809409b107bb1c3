// npm run bench:episodes
//
// Graded episodes of the demo's shop task (stacks/Pulumi.demo.yaml, its self-test off: its live checks need the real
// github.com), M episodes by K workers, three contenders in one run, each episode the scripted agent
// (examples/runner/shop-agent.ts) ordering in the desktop browser through the handles it was given and graded from the
// shop's data plane:
//   1. a warm pool: `multienv serve` in this process, each worker claiming over HTTP, driving, grading, releasing
//      (the release's reset runs in the service while the worker claims again);
//   2. `multienv up` / `down` per episode (deployStack, destroyStack), a stack per worker;
//   3. docker-compose up / down per episode of the same containers (bench/compose.ts), a project per worker: the
//      per-trial way of most harnesses.
// It prints each contender's episodes per hour and their ratios, the claim-to-ready p50 and p99 (POST /v1/claims to
// its 201), the release-to-ready p50 (DELETE to the env ready again), where a reset's time goes (its phases, from the
// reset's own log), each contender's drive alone (the agent's episode and its grade, p50: the part of an episode no env
// work can save), and one JSON line with every figure.
// Options (env): BENCH_EPISODES (4), BENCH_WORKERS (2), BENCH_POOL (the workers' count and one: a released env
// resets while its worker claims the spare). A contender that fails says why and the others still run; its figures
// are null in the JSON line. BENCH_CONTENDERS (warm,updown,compose) runs some of them. Needs the Pulumi CLI,
// docker-compose and the project's images.
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import path from "node:path";
import { chromium } from "playwright-core";
import YAML from "yaml";
import { gradeShopEpisode, runShopEpisode, SHOP_URL } from "../examples/runner/shop-agent";
import { engineClient } from "../src/engines/docker";
import { GatewayClient } from "../src/protocol/gateway-client";
import {
  deployStack,
  destroyStack,
  gatewayAccess,
  readStackState,
  resetStack,
  specFromStackFile,
  type StackState,
} from "../src/runner";
import { openPoolStore, poolOf, servePools, warmPool } from "../src/runner/pools";
import { closeComposeApi, composeFileOf, gatewayHealthy } from "./compose";
import { median, percentile, useBenchPulumi } from "./kit";

const EPISODES = Number(process.env.BENCH_EPISODES ?? 4);
const WORKERS = Number(process.env.BENCH_WORKERS ?? 2);
const POOL = Number(process.env.BENCH_POOL ?? WORKERS + 1);
/** Which contenders run (BENCH_CONTENDERS, comma-separated: warm, updown, compose; default all three). */
const CONTENDERS = new Set((process.env.BENCH_CONTENDERS ?? "warm,updown,compose").split(",").map((c) => c.trim()));
const REPO = path.resolve(__dirname, "..");
const TASK = "bench-episodes";
const DEMO = path.join(REPO, "stacks/Pulumi.demo.yaml");
const api = engineClient();

const STATE = useBenchPulumi();

const seconds = (from: number) => (performance.now() - from) / 1000;

function run(file: string, args: string[], cwd: string): Promise<void> {
  return new Promise((resolve, reject) =>
    execFile(file, args, { cwd, maxBuffer: 16 * 1024 * 1024 }, (error, _o, stderr) =>
      error
        ? reject(new Error(`${file} ${args.join(" ")}: ${stderr.trim().split("\n").slice(-3).join(" ")}`))
        : resolve(),
    ),
  );
}

/**
 * Each contender's drives (the scripted agent's episode and its grade), in seconds: what an episode costs with no
 * env work at all, so the ratios can be read against it (compose per episode pays its up and down on top of it).
 */
const driveSeconds: Record<string, number[]> = { warm: [], updown: [], compose: [] };

/** One episode: the scripted agent orders in the desktop browser opened at `cdpUrl` with `token`; the grade. */
async function drive(
  contender: keyof typeof driveSeconds,
  cdpUrl: string,
  token: string,
  grade: () => Promise<unknown>,
): Promise<boolean> {
  const started = performance.now();
  try {
    return await driveOnce(cdpUrl, token, grade);
  } finally {
    driveSeconds[contender].push(seconds(started));
  }
}

async function driveOnce(cdpUrl: string, token: string, grade: () => Promise<unknown>): Promise<boolean> {
  const browser = await chromium.connectOverCDP(cdpUrl, { headers: { authorization: `Bearer ${token}` } });
  try {
    await runShopEpisode(await browser.contexts()[0].newPage(), SHOP_URL);
  } finally {
    await browser.close();
  }
  const graded = gradeShopEpisode(await grade());
  if (!graded.passed) throw new Error(`the episode failed its grade: ${graded.reason}`);
  return graded.passed;
}

/** The shop's data plane through the gateway, as the grader reads it (the operator's control token). */
async function shopData(gatewayUrl: string, controlToken: string): Promise<unknown> {
  return new GatewayClient(gatewayUrl, controlToken).siteJson("shop", "/data");
}

/** Runs `episode` EPISODES times over WORKERS workers (worker w gets its own index); the wall time in seconds. */
async function contend(episode: (worker: number) => Promise<void>): Promise<number> {
  let left = EPISODES;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: WORKERS }, async (_, worker) => {
      while (left > 0) {
        left--;
        await episode(worker).catch((error: unknown) => {
          console.error(`worker ${worker + 1}: an episode failed: ${(error as Error).message}`);
          throw error;
        });
      }
    }),
  );
  return seconds(started);
}

interface Figures {
  episodesPerHour: number;
  wallSeconds: number;
}

async function warmContender(): Promise<
  Figures & {
    warmSeconds: number;
    claimSeconds: number[];
    releaseToReadySeconds: number[];
    resetPhases: Record<string, number>;
  }
> {
  const warmStarted = performance.now();
  await warmPool(TASK, POOL, { projectDir: REPO, log: (l) => console.log(`  ${l}`) }).catch(async (error: unknown) => {
    // Members already deployed are not left behind.
    await warmPool(TASK, 0, { projectDir: REPO }).catch((e: Error) => console.log(`drain: ${e.message}`));
    throw error;
  });
  const warmSeconds = seconds(warmStarted);
  console.log(`warm pool of ${POOL}: ready in ${warmSeconds.toFixed(1)} s`);
  const service = await servePools({ projectDir: REPO, port: 0, log: (l) => console.log(`  serve: ${l}`) });
  const store = await openPoolStore({ projectDir: REPO });
  const token = readFileSync(service.tokenFile, "utf8").trim();
  const call = async (method: string, route: string, body?: unknown) => {
    const res = await fetch(`${service.url}${route}`, {
      method,
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    if (!res.ok) throw new Error(`${method} ${route}: ${res.status} ${await res.text()}`);
    return res.json() as Promise<any>;
  };
  // The grader reads the shop's data with each member's control token: read before the timed run, since a harness's
  // grader is not the pool's cost (and reading it is a Pulumi CLI call per member).
  const controlTokens = new Map<string, { gatewayUrl: string; controlToken: string }>();
  const claimSeconds: number[] = [];
  /** Claims not yet released: released without collection when an episode fails, so the drain is not kept waiting. */
  const held = new Set<string>();
  const releaseToReadySeconds: number[] = [];
  const readyWaits: Promise<void>[] = [];
  try {
    for (const member of await store.accounts(poolOf(TASK))) {
      const access = await gatewayAccess(member.name, { projectDir: REPO });
      controlTokens.set(member.name, { gatewayUrl: access.gatewayUrl, controlToken: access.controlToken });
      await access.close();
    }
    const wallSeconds = await contend(async () => {
      const asked = performance.now();
      const claim = await call("POST", "/v1/claims", { task: TASK, ttlSeconds: 600, waitSeconds: 300 });
      claimSeconds.push(seconds(asked));
      held.add(claim.id);
      if (!controlTokens.has(claim.stack)) {
        const access = await gatewayAccess(claim.stack, { projectDir: REPO });
        controlTokens.set(claim.stack, { gatewayUrl: access.gatewayUrl, controlToken: access.controlToken });
        await access.close();
      }
      const grader = controlTokens.get(claim.stack)!;
      const desktop = claim.computers.desktop;
      await drive("warm", desktop.cdpUrl, desktop.agentToken, () => shopData(grader.gatewayUrl, grader.controlToken));
      const released = performance.now();
      await call("DELETE", `/v1/claims/${encodeURIComponent(claim.id)}`);
      held.delete(claim.id);
      readyWaits.push(
        (async () => {
          for (;;) {
            const row = (await store.accounts(poolOf(TASK))).find((r) => r.name === claim.stack);
            if (row?.state === "ready") return void releaseToReadySeconds.push(seconds(released));
            if (row?.state === "failed") throw new Error(`${claim.stack} failed its reset`);
            await new Promise((r) => setTimeout(r, 20));
          }
        })(),
      );
    });
    await Promise.all(readyWaits);

    // Where a reset's time goes: a claimed member reset with the episode collected, its phases from the reset's log.
    const phases: Record<string, number[]> = {};
    const states = new Map<string, StackState>();
    for (let round = 0; round < 3; round++) {
      const claim = await call("POST", "/v1/claims", { task: TASK, ttlSeconds: 600, waitSeconds: 300 });
      held.add(claim.id);
      const grader = controlTokens.get(claim.stack) ?? (await gatewayAccess(claim.stack, { projectDir: REPO }));
      await drive("warm", claim.computers.desktop.cdpUrl, claim.computers.desktop.agentToken, () =>
        shopData(grader.gatewayUrl, grader.controlToken),
      );
      let last = 0;
      // As a pool's reset runs: the member's state read once per deploy (members.ts), not by each reset.
      if (!states.has(claim.stack)) states.set(claim.stack, await readStackState(claim.stack, { projectDir: REPO }));
      await resetStack(claim.stack, {
        projectDir: REPO,
        state: states.get(claim.stack),
        collect: true,
        log: (line) => {
          const phase = / reset: (.*) \((\d+\.\d) s\)$/.exec(line);
          if (!phase) return;
          const name = phase[1].replace(/episode \d+ /, "episode ");
          (phases[name] ??= []).push(Number(phase[2]) - last);
          last = Number(phase[2]);
        },
      });
      (phases.total ??= []).push(last);
      await call("DELETE", `/v1/claims/${encodeURIComponent(claim.id)}?collect=false`);
      held.delete(claim.id);
    }
    const resetPhases = Object.fromEntries(Object.entries(phases).map(([k, v]) => [k, median(v)]));
    return {
      episodesPerHour: (EPISODES / wallSeconds) * 3600,
      wallSeconds,
      warmSeconds,
      claimSeconds,
      releaseToReadySeconds,
      resetPhases,
    };
  } finally {
    for (const id of held)
      await call("DELETE", `/v1/claims/${encodeURIComponent(id)}?collect=false`).catch(() => undefined);
    await service.close();
    await store.close();
    await warmPool(TASK, 0, { projectDir: REPO }).catch((e: Error) => console.log(`drain: ${e.message}`));
  }
}

async function upDownContender(): Promise<Figures & { upSeconds: number[]; downSeconds: number[] }> {
  const upSeconds: number[] = [];
  const downSeconds: number[] = [];
  const stacks = Array.from({ length: WORKERS }, (_, w) => `bench-episodes-up-${w + 1}`);
  try {
    const wallSeconds = await contend(async (worker) => {
      const stack = stacks[worker];
      let started = performance.now();
      await deployStack(specFromStackFile(DEMO, stack, { "multienv:selfTest": false }), { projectDir: REPO });
      upSeconds.push(seconds(started));
      const access = await gatewayAccess(stack, { projectDir: REPO });
      try {
        await drive("updown", `${access.gatewayUrl}/computers/desktop/cdp`, access.agentTokens!.desktop, () =>
          shopData(access.gatewayUrl, access.controlToken),
        );
      } finally {
        await access.close();
      }
      started = performance.now();
      await destroyStack(stack, { projectDir: REPO });
      downSeconds.push(seconds(started));
    });
    return { episodesPerHour: (EPISODES / wallSeconds) * 3600, wallSeconds, upSeconds, downSeconds };
  } finally {
    for (const stack of stacks) {
      await destroyStack(stack, { projectDir: REPO, remove: true }).catch(() => undefined);
      rmSync(path.join(REPO, "stacks", `Pulumi.${stack}.yaml`), { force: true });
      rmSync(path.join(REPO, "artifacts", stack), { recursive: true, force: true });
    }
  }
}

async function composeContender(): Promise<Figures & { upSeconds: number[]; downSeconds: number[] }> {
  const dir = mkdtempSync(path.join(tmpdir(), "multienv-bench-episodes-"));
  const stacks = Array.from({ length: WORKERS }, (_, w) => `bench-episodes-compose-${w + 1}`);
  const tokens = new Map<string, { controlToken: string; agentToken: string }>();
  const compose = (stack: string, args: string[]) =>
    run("docker-compose", ["-p", `${stack}-compose`, "-f", `${stack}.yml`, ...args], dir);
  const upSeconds: number[] = [];
  const downSeconds: number[] = [];
  try {
    // Each worker's compose file: the same containers as a deployed stack, read back from the engine.
    await Promise.all(
      stacks.map(async (stack) => {
        await deployStack(specFromStackFile(DEMO, stack, { "multienv:selfTest": false }), { projectDir: REPO });
        const access = await gatewayAccess(stack, { projectDir: REPO });
        tokens.set(stack, { controlToken: access.controlToken, agentToken: access.agentTokens!.desktop });
        await access.close();
        writeFileSync(path.join(dir, `${stack}.yml`), await composeFileOf(stack));
        await destroyStack(stack, { projectDir: REPO, remove: true });
      }),
    );
    const wallSeconds = await contend(async (worker) => {
      const stack = stacks[worker];
      let started = performance.now();
      await compose(stack, ["up", "-d"]);
      await gatewayHealthy(`${stack}-gateway`, 300_000);
      upSeconds.push(seconds(started));
      const info = await api.getContainer(`${stack}-gateway`).inspect();
      const gatewayUrl = `http://127.0.0.1:${info.NetworkSettings.Ports["8080/tcp"]![0].HostPort}`;
      const { controlToken, agentToken } = tokens.get(stack)!;
      // The browser answers DevTools once Chromium runs behind its proxy.
      for (const deadline = Date.now() + 120_000; ;) {
        if (await new GatewayClient(gatewayUrl, agentToken).devtoolsAnswers("desktop")) break;
        if (Date.now() > deadline) throw new Error(`${stack}: the desktop's DevTools did not answer`);
        await new Promise((r) => setTimeout(r, 100));
      }
      await drive("compose", `${gatewayUrl}/computers/desktop/cdp`, agentToken, () =>
        shopData(gatewayUrl, controlToken),
      );
      started = performance.now();
      await compose(stack, ["down", "-v", "-t", "1"]);
      downSeconds.push(seconds(started));
    });
    return { episodesPerHour: (EPISODES / wallSeconds) * 3600, wallSeconds, upSeconds, downSeconds };
  } finally {
    for (const stack of stacks) {
      await compose(stack, ["down", "-v", "-t", "1"]).catch(() => undefined);
      await destroyStack(stack, { projectDir: REPO, remove: true }).catch(() => undefined);
      rmSync(path.join(REPO, "stacks", `Pulumi.${stack}.yaml`), { force: true });
      rmSync(path.join(REPO, "artifacts", stack), { recursive: true, force: true });
    }
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Why each contender that failed did: the others' figures still come out. */
const failed: Record<string, string> = {};

async function attempt<T>(name: string, key: string, contender: () => Promise<T>): Promise<T | undefined> {
  if (!CONTENDERS.has(key)) return undefined;
  try {
    return await contender();
  } catch (error) {
    failed[name] = (error as Error).message.split("\n")[0];
    console.log(`${name}: failed, no figures: ${failed[name]}`);
    process.exitCode = 1;
    return undefined;
  }
}

async function main(): Promise<void> {
  // The task: the demo's stack file, its self-test off.
  const taskFile = path.join(REPO, "stacks", `Pulumi.${TASK}.yaml`);
  const demo = YAML.parse(readFileSync(DEMO, "utf8")) as { config: Record<string, unknown> };
  writeFileSync(taskFile, YAML.stringify({ config: { ...demo.config, "multienv:selfTest": false } }));
  try {
    console.log(`${EPISODES} episodes of the demo's shop task by ${WORKERS} workers, three ways`);
    const warm = await attempt("warm pool", "warm", warmContender);
    if (warm)
      console.log(
        `warm pool: ${warm.episodesPerHour.toFixed(0)} episodes/hour (${warm.wallSeconds.toFixed(1)} s); claim p50 ${(percentile(warm.claimSeconds, 50) * 1000).toFixed(0)} ms, p99 ${(percentile(warm.claimSeconds, 99) * 1000).toFixed(0)} ms; release-to-ready p50 ${median(warm.releaseToReadySeconds).toFixed(2)} s`,
      );
    if (warm)
      console.log(
        `a reset, the episode collected (median of 3): ${Object.entries(warm.resetPhases)
          .map(([k, v]) => `${k} ${v.toFixed(2)} s`)
          .join(", ")}`,
      );
    const upDown = await attempt("multienv up/down", "updown", upDownContender);
    if (upDown)
      console.log(
        `multienv up/down per episode: ${upDown.episodesPerHour.toFixed(0)} episodes/hour (${upDown.wallSeconds.toFixed(1)} s); up p50 ${median(upDown.upSeconds).toFixed(1)} s, down p50 ${median(upDown.downSeconds).toFixed(1)} s`,
      );
    const compose = await attempt("docker-compose up/down", "compose", composeContender);
    if (compose)
      console.log(
        `docker-compose up/down per episode: ${compose.episodesPerHour.toFixed(0)} episodes/hour (${compose.wallSeconds.toFixed(1)} s); up p50 ${median(compose.upSeconds).toFixed(1)} s, down p50 ${median(compose.downSeconds).toFixed(1)} s`,
      );
    const ratio = (a?: Figures, b?: Figures) => (a && b ? a.episodesPerHour / b.episodesPerHour : null);
    const ratios = {
      warmPerUpDown: ratio(warm, upDown),
      warmPerCompose: ratio(warm, compose),
      composePerUpDown: ratio(compose, upDown),
    };
    console.log(
      `the drive alone (the agent's episode and its grade), p50: ${Object.entries(driveSeconds)
        .filter(([, v]) => v.length > 0)
        .map(([k, v]) => `${k} ${median(v).toFixed(1)} s`)
        .join(", ")}`,
    );
    const x = (r: number | null) => (r === null ? "n/a" : `${r.toFixed(1)}x`);
    console.log(
      `ratios: warm pool ${x(ratios.warmPerCompose)} compose per episode, ${x(ratios.warmPerUpDown)} up/down per episode; compose ${x(ratios.composePerUpDown)} up/down`,
    );
    console.log(
      JSON.stringify({
        bench: "episodes",
        episodes: EPISODES,
        workers: WORKERS,
        pool: POOL,
        cpus: cpus().length,
        loadavg: loadavg()[0],
        episodesPerHour: {
          warmPool: warm?.episodesPerHour ?? null,
          upDown: upDown?.episodesPerHour ?? null,
          compose: compose?.episodesPerHour ?? null,
        },
        ratios,
        driveSecondsP50: Object.fromEntries(
          Object.entries(driveSeconds).map(([k, v]) => [k, v.length > 0 ? median(v) : null]),
        ),
        claimSeconds: warm
          ? {
              p50: percentile(warm.claimSeconds, 50),
              p99: percentile(warm.claimSeconds, 99),
              all: warm.claimSeconds,
            }
          : null,
        releaseToReadySeconds: warm
          ? { p50: median(warm.releaseToReadySeconds), all: warm.releaseToReadySeconds }
          : null,
        resetPhasesSeconds: warm?.resetPhases ?? null,
        warmSeconds: warm?.warmSeconds ?? null,
        wallSeconds: {
          warmPool: warm?.wallSeconds ?? null,
          upDown: upDown?.wallSeconds ?? null,
          compose: compose?.wallSeconds ?? null,
        },
        upDownSeconds: upDown ? { up: upDown.upSeconds, down: upDown.downSeconds } : null,
        composeSeconds: compose ? { up: compose.upSeconds, down: compose.downSeconds } : null,
        failed,
      }),
    );
  } finally {
    rmSync(taskFile, { force: true });
    for (let n = 1; n <= POOL; n++) rmSync(path.join(REPO, "stacks", `Pulumi.${TASK}-w${n}.yaml`), { force: true });
    rmSync(path.join(REPO, "artifacts", TASK), { recursive: true, force: true });
    for (let n = 1; n <= POOL; n++)
      rmSync(path.join(REPO, "artifacts", `${TASK}-w${n}`), { recursive: true, force: true });
    rmSync(STATE, { recursive: true, force: true });
    closeComposeApi();
  }
}

main().catch((error: unknown) => {
  console.error(`bench:episodes: ${(error as Error).message}`);
  process.exitCode = 1;
});
