// npm run bench:reset
//
// The next episode on the demo task (stacks/Pulumi.demo.yaml, local Docker engine, real Pulumi engine; the
// self-test off, since its live checks need the real github.com), four ways, the first three in alternating rounds:
//   1. `reset`: resetStack(), the episode let go (sites emptied, captures and browsers started over);
//   2. `reset --collect`: the same, the finished episode collected into episodes/<n>/ first;
//   3. down + up: destroyStack() (which collects) then deployStack(), the redeploy a reset replaces;
//   4. `docker restart` of every container of the stack at once, until the gateway's /healthz answers 200: the
//      plain engine's way to start an env's containers over (it keeps each container's files, so it empties
//      nothing a site keeps on disk, and the browsers keep their profiles: less than a reset does).
// Before each reset the episode leaves traces (a record in every site's data plane, a page in the browser), so
// there is work to undo. The last line is one JSON object with every figure.
// Options (env): BENCH_ROUNDS (3), BENCH_STACK (bench-reset), BENCH_STACK_FILE (stacks/Pulumi.demo.yaml; another
// task's file, e.g. test/e2e/fixtures/Pulumi.pool-shop.yaml, whose shop.test is what the episode orders from),
// BENCH_RESET_ONLY=1 (the resets alone, from the state read once as a warm pool's keeper does: no down + up, no
// docker restart), BENCH_BROWSER_IMAGE (every computer's browser image, e.g. one built from a checkout's launcher under
// a tag of its own, so a launcher's change is measured without replacing multienv/browser:latest, which others use).
// Each reset's phases (cumulative seconds, from its own log) are printed.
// Needs the Pulumi CLI (installed, or scripts/pulumi-toolchain.sh) and the project's images (npm run images).
import { rmSync } from "node:fs";
import { cpus, loadavg } from "node:os";
import path from "node:path";
import { chromium } from "playwright-core";
import { runShopEpisode } from "../examples/runner/shop-agent";
import { GatewayClient, gatewayClient } from "../src/protocol/gateway-client";
import { LABELS, ROLES } from "../src/protocol/labels";
import { engineClient } from "../src/engines/docker";
import {
  deployStack,
  destroyStack,
  gatewayAccess,
  readStackState,
  resetStack,
  specFromStackFile,
  type StackState,
} from "../src/runner";
import { median, useBenchPulumi } from "./kit";

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const STACK = process.env.BENCH_STACK ?? "bench-reset";
const REPO = path.resolve(__dirname, "..");
const STACK_FILE = path.resolve(REPO, process.env.BENCH_STACK_FILE ?? "stacks/Pulumi.demo.yaml");
const RESET_ONLY = process.env.BENCH_RESET_ONLY === "1";
const BROWSER_IMAGE = process.env.BENCH_BROWSER_IMAGE;
const api = engineClient();

const STATE = useBenchPulumi();

async function timed(what: () => Promise<unknown>): Promise<number> {
  const started = performance.now();
  await what();
  return (performance.now() - started) / 1000;
}

/**
 * What an episode leaves behind: a record in the live site's data plane (the demo's github) and an order in each shop
 * (shop.test, and the demo's gist.github.com), placed in the first computer's browser the way an agent would.
 */
async function leaveTraces(state: StackState): Promise<void> {
  const outputs = Object.fromEntries(Object.entries(state.outputs).map(([key, output]) => [key, output.value])) as {
    websites: Record<string, unknown>;
    computers: Record<string, unknown>;
  };
  const gateway = gatewayClient(await gatewayAccess(STACK));
  if ("github" in outputs.websites)
    await gateway.siteJson("github", "/data", { method: "POST", json: { left: "github" } });
  const browser = await chromium.connectOverCDP(gateway.cdpUrl(Object.keys(outputs.computers)[0]), {
    headers: { Authorization: gateway.authorization() },
  });
  try {
    for (const shop of ["https://shop.test/", ...("gist" in outputs.websites ? ["https://gist.github.com/"] : [])])
      await runShopEpisode(await browser.contexts()[0].newPage(), shop);
  } finally {
    await browser.close();
  }
}

/** Each phase of a reset, as its log names them (`stack <s>: reset: <phase> (<seconds> s)`), cumulative seconds. */
type Phases = Record<string, number>;

/** A reset from the kept state, its phases recorded. */
async function timedReset(state: StackState, collect: boolean, phases: Phases[]): Promise<number> {
  const seen: Phases = {};
  const seconds = await timed(() =>
    resetStack(STACK, {
      state,
      collect,
      log: (line) => {
        const match = /: reset: (.*) \(([0-9.]+) s\)$/.exec(line);
        if (match) seen[match[1].replace(/^episode \d+ /, "episode ")] = Number(match[2]);
      },
    }),
  );
  phases.push(seen);
  console.log(
    `  ${Object.entries(seen)
      .map(([phase, s]) => `${phase} ${s.toFixed(1)}`)
      .join(", ")}`,
  );
  return seconds;
}

/** `docker restart` of every container of the stack, then a poll of the gateway's /healthz on its published port. */
async function dockerRestart(): Promise<void> {
  const list = await api.listContainers({ filters: { label: [`multienv.stack=${STACK}`] } });
  // A capture sidecar joins its site container's network namespace, so it can only start once that one runs.
  const isCapture = (c: { Labels: Record<string, string> }) => c.Labels[LABELS.role] === ROLES.capture;
  const restart = (c: { Id: string }) => api.getContainer(c.Id).restart({ t: 1 });
  await Promise.all(list.filter((c) => !isCapture(c)).map(restart));
  await Promise.all(list.filter(isCapture).map(restart));
  const info = await api.getContainer(`${STACK}-gateway`).inspect();
  const port = info.NetworkSettings.Ports["8080/tcp"]?.[0]?.HostPort;
  const deadline = Date.now() + 120_000;
  while (
    !(await new GatewayClient(`http://127.0.0.1:${port}`, "").health().then(
      (health) => health.ok,
      () => false,
    ))
  ) {
    if (Date.now() > deadline) throw new Error("the gateway was not healthy 120 s after docker restart");
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function main(): Promise<void> {
  const spec = specFromStackFile(STACK_FILE, STACK);
  if (BROWSER_IMAGE !== undefined)
    for (const computer of Object.values(spec.config["multienv:computers"] as Record<string, { image?: string }>))
      computer.image = BROWSER_IMAGE;
  const phases: Phases[] = [];
  const figures = {
    reset: [] as number[],
    resetCollect: [] as number[],
    downUp: [] as number[],
    dockerRestart: [] as number[],
  };
  let containers: number;
  try {
    await deployStack(spec, { selfTest: false });
    containers = (await api.listContainers({ filters: { label: [`multienv.stack=${STACK}`] } })).length;
    let state = await readStackState(STACK);
    for (let round = 1; round <= ROUNDS; round++) {
      await leaveTraces(state);
      figures.reset.push(await timedReset(state, false, phases));
      await leaveTraces(state);
      figures.resetCollect.push(await timedReset(state, true, phases));
      if (RESET_ONLY) {
        console.log(
          `round ${round}: reset ${figures.reset.at(-1)!.toFixed(1)} s, reset --collect ${figures.resetCollect.at(-1)!.toFixed(1)} s`,
        );
        continue;
      }
      await leaveTraces(state);
      figures.downUp.push(
        await timed(async () => {
          await destroyStack(STACK);
          await deployStack(spec, { selfTest: false });
        }),
      );
      state = await readStackState(STACK);
      console.log(
        `round ${round}: reset ${figures.reset.at(-1)!.toFixed(1)} s, reset --collect ${figures.resetCollect.at(-1)!.toFixed(1)} s, down + up ${figures.downUp.at(-1)!.toFixed(1)} s`,
      );
    }
    // Last, not alternated: a restarted gateway may be published on another host port than the stack's outputs
    // say, so nothing that reads the outputs can follow it.
    for (let round = 1; round <= (RESET_ONLY ? 0 : ROUNDS); round++) {
      figures.dockerRestart.push(await timed(dockerRestart));
      console.log(`docker restart ${round}: ${figures.dockerRestart.at(-1)!.toFixed(1)} s`);
    }
  } finally {
    await destroyStack(STACK, { remove: true }).catch(() => undefined);
    rmSync(path.join(REPO, "stacks", `Pulumi.${STACK}.yaml`), { force: true });
    rmSync(STATE, { recursive: true, force: true });
    rmSync(path.join(REPO, "artifacts", STACK), { recursive: true, force: true });
  }
  const m = Object.fromEntries(Object.entries(figures).map(([k, v]) => [k, median(v)])) as Record<
    keyof typeof figures,
    number
  >;
  console.log(`the demo task, ${containers} containers, median of ${ROUNDS} rounds:`);
  console.log(`  reset: ${m.reset.toFixed(1)} s; with the episode collected first: ${m.resetCollect.toFixed(1)} s`);
  console.log(`  down + up: ${m.downUp.toFixed(1)} s, ${(m.downUp / m.reset).toFixed(1)}x a reset`);
  console.log(
    `  docker restart of every container until healthy: ${m.dockerRestart.toFixed(1)} s, ${(m.dockerRestart / m.reset).toFixed(1)}x a reset`,
  );
  console.log(
    JSON.stringify({
      bench: "reset",
      rounds: ROUNDS,
      containers,
      cpus: cpus().length,
      loadavg: loadavg()[0],
      medianSeconds: m,
      ratios: { downUpPerReset: m.downUp / m.reset, dockerRestartPerReset: m.dockerRestart / m.reset },
      seconds: figures,
    }),
  );
}

main().catch((error: unknown) => {
  console.error(`bench:reset: ${(error as Error).message}`);
  process.exitCode = 1;
});
