// npm run bench:e2e
//
// The demo task (stacks/Pulumi.demo.yaml) on the local Docker engine with the real Pulumi engine, beside
// docker-compose running the same containers, in alternating rounds:
//   1. deploy-to-healthy: `pulumi up --yes --skip-preview` (through the Automation API, which streams the engine's
//      events) from start to done; the deploy waits for the gateway to be healthy (every site ready, every capture
//      writing) and for the computers after it. Aim: <= 1.0x compose.
//   2. a no-change `pulumi up` on the deployed stack. Aim: < 2.5 s.
//   3. destroy: `pulumi destroy --yes --skip-preview`, which first collects every capture and proxy log.
//      Aim: <= 1.5x compose down.
//   4. compose: `docker-compose up -d` of a compose file holding the same containers (read back from the
//      deployed stack with docker inspect: images by id, env, networks and aliases, network_mode
//      service:<target> for the capture sidecars, capabilities, mounts, ports, health checks, the gateway
//      started after its sites and the proxies after a healthy gateway), until the gateway is healthy.
//      Debian's docker-compose is 1.29, which has no `up --wait`, so the wait is a poll of the gateway's
//      /healthz, the same check the deploy waits for; `docker-compose down -v` after.
//   5. page loads in Chromium (bench/page-loads.ts), on loopback with processes from this checkout, so they
//      measure this code rather than the images: the sample shop's page with 50 subresources, one with 200, and
//      the time to first byte of a page with none, through the site proxy (TLS from the env CA, HTTP/2) and the
//      gateway, straight from the frontend over HTTP/1.1, through nginx terminating TLS with HTTP/2 in front of
//      the same frontend, and through the gateway alone; the contenders alternate load by load, median of
//      BENCH_LOADS each. Aim: through the env <= 1.0x nginx TLS + HTTP/2.
// After the rounds, the timeline of the last round's deploy, no-change up and destroy from the engine's events
// (src/runner/stack/timeline.ts): the critical path, the longest steps and the stretches with no step under way.
// The last line is one JSON object with every figure.
// Options (env): BENCH_ROUNDS (3), BENCH_LOADS (15), BENCH_STACK (bench-e2e), BENCH_PAGES_ONLY=1 (the page loads
// alone: no deploy, no Docker), BENCH_DEPLOY_ONLY=1 (the deploy rounds alone: no page loads), BENCH_EVENTS=<dir>
// (the last round's engine events, each with the time it arrived, as JSON lines: deploy.jsonl, no-change-up.jsonl,
// destroy.jsonl),
// BENCH_CPU_PROF=<dir> (CPU profiles of the gateway and site proxy during the page loads). Needs nginx and
// Chromium, and for the deploy rounds docker-compose (apt-get install docker-compose) and the Pulumi CLI
// (installed, or scripts/pulumi-toolchain.sh).
import { execFile, execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import path from "node:path";
import YAML from "yaml";
import { composeFileOf, gatewayHealthy } from "./compose";
import { CONTENDERS, isolatedPageLoads, type PageLoadFigures } from "./page-loads";
import { engineSettings, specFromStackFile } from "../src/runner/stack/workspace";
import * as operations from "../src/runner/stack/operations";
import { LocalWorkspace, Stack, type EngineEvent, type StepEventMetadata } from "@pulumi/pulumi/automation";
import {
  dependenciesOf,
  formatTimeline,
  timelineOf,
  timelineSummary,
  type StateResourceDependencies,
  type TimedEvent,
  type Timeline,
} from "../src/runner/stack/timeline";
import { median, useBenchPulumi } from "./kit";

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const LOADS = Number(process.env.BENCH_LOADS ?? 15);
const STACK = process.env.BENCH_STACK ?? "bench-e2e";
const COMPOSE_PROJECT = `${STACK}-compose`;
const PAGES_ONLY = process.env.BENCH_PAGES_ONLY === "1";
const DEPLOY_ONLY = process.env.BENCH_DEPLOY_ONLY === "1";
const EVENTS_DIR = process.env.BENCH_EVENTS;
const REPO = path.resolve(__dirname, "..");
const STACK_FILE = path.join(REPO, "stacks", `Pulumi.${STACK}.yaml`);

const STATE = useBenchPulumi();
const ENV = process.env;

function run(file: string, args: string[], cwd = REPO): Promise<{ seconds: number; stdout: string }> {
  const started = performance.now();
  return new Promise((resolve, reject) =>
    execFile(file, args, { cwd, env: ENV, maxBuffer: 64 * 1024 * 1024 }, (error, stdout, stderr) => {
      if (error)
        return reject(
          new Error(
            `${file} ${args.join(" ")}: ${(stderr || stdout || error.message).trim().split("\n").slice(-8).join("\n")}`,
          ),
        );
      resolve({ seconds: (performance.now() - started) / 1000, stdout });
    }),
  );
}

const pulumi = (...args: string[]) => run("pulumi", [...args, "--stack", STACK, "--non-interactive"]);

/** One engine operation: how long it took, and its events as they arrived. */
interface Operation {
  seconds: number;
  started: number;
  ended: number;
  events: TimedEvent[];
}

let benchStack: Promise<Stack> | undefined;

/**
 * `pulumi up --yes --skip-preview` or `pulumi destroy --yes --skip-preview` on the bench's stack, through the
 * Automation API as the runner runs them (src/runner/stack/operations.ts): the same CLI command, its events streamed
 * to this process as they happen.
 */
async function engineOperation(kind: "up" | "destroy"): Promise<Operation> {
  // With the engine settings the runner gives every operation it starts.
  benchStack ??= LocalWorkspace.create({ workDir: REPO, envVars: engineSettings() }).then((workspace) =>
    Stack.select(STACK, workspace),
  );
  const stack = await benchStack;
  const events: TimedEvent[] = [];
  const onEvent = (event: EngineEvent) => events.push({ at: performance.now(), event });
  if (EVENTS_DIR !== undefined) mkdirSync(EVENTS_DIR, { recursive: true });
  const started = performance.now();
  if (kind === "up") await operations.up(stack, { onEvent });
  else await operations.destroy(stack, { onEvent });
  const ended = performance.now();
  return { seconds: (ended - started) / 1000, started, ended, events };
}

/** What each resource of the deployed stack depends on, from its state. */
async function stateDependencies(): Promise<Map<string, string[]>> {
  const exported = await (await benchStack!).exportStack();
  return dependenciesOf((exported.deployment as { resources?: StateResourceDependencies[] }).resources ?? []);
}

function timelineOfOperation(operation: Operation, dependencies: Map<string, string[]>): Timeline {
  return timelineOf(operation.events, dependencies, operation.started, operation.ended);
}

/**
 * The operation's resource events as JSON lines, each with the milliseconds since the operation started, and of each
 * resource only what a timeline reads (no inputs or outputs: they hold the env's settings and tokens).
 */
function writeEvents(file: string, operation: Operation): void {
  const brief = (meta: StepEventMetadata) => ({
    op: meta.op,
    urn: meta.urn,
    type: meta.type,
    new: meta.new && { custom: meta.new.custom },
    old: meta.old && { custom: meta.old.custom },
  });
  const lines = operation.events.flatMap(({ at, event }) => {
    const key = (["resourcePreEvent", "resOutputsEvent", "resOpFailedEvent"] as const).find((k) => event[k]);
    if (key === undefined) return [];
    const kept = {
      sequence: event.sequence,
      timestamp: event.timestamp,
      [key]: { metadata: brief(event[key]!.metadata) },
    };
    return [JSON.stringify({ at: Math.round(at - operation.started), event: kept })];
  });
  writeFileSync(file, lines.join("\n") + "\n");
}

// --- the rounds ----------------------------------------------------------------------------------------

/** The page-load lines, and their figures with the ratios for the JSON line. */
function reportPages(p: PageLoadFigures): Record<string, unknown> {
  const ratio = (m: Record<string, number>, a: string, b: string) => m[a] / m[b];
  const row = (what: string, m: Record<string, number>) =>
    console.log(
      `  ${what}: env ${m.env.toFixed(0)} ms, direct HTTP/1.1 ${m.direct.toFixed(0)} ms, nginx TLS+h2 ${m.nginx.toFixed(0)} ms, gateway alone ${m.gateway.toFixed(0)} ms; ` +
        `env/nginx ${ratio(m, "env", "nginx").toFixed(2)}x (aim <= 1.0x), env/direct ${ratio(m, "env", "direct").toFixed(2)}x, nginx/direct ${ratio(m, "nginx", "direct").toFixed(2)}x`,
    );
  console.log(`page loads on loopback, median of ${p.loads} each, fresh context each, contenders alternating:`);
  row("page with 50 subresources", p.page50Ms);
  row("page with 200 subresources", p.page200Ms);
  row("time to first byte, a page with no subresource", p.ttfbMs);
  const cpu = p.cpuUsPerRequest;
  const us = (n: number) => `${n.toFixed(0)} us`;
  console.log(
    `  CPU per request (page loads): env site proxy ${us(cpu.env.siteProxy)} + gateway ${us(cpu.env.gateway)}, ` +
      `nginx TLS+h2 ${us(cpu.nginx.nginx)}, gateway alone ${us(cpu.gateway.gateway)} (frontend ${us(cpu.direct.frontend)} ` +
      `direct); env/nginx ${((cpu.env.siteProxy + cpu.env.gateway) / cpu.nginx.nginx).toFixed(1)}x, site proxy/nginx ` +
      `${(cpu.env.siteProxy / cpu.nginx.nginx).toFixed(1)}x`,
  );
  const log = p.requestLog;
  console.log(
    `  the request log on, against off: page loads ${log.page50Ratio.toFixed(2)}x (50) and ${log.page200Ratio.toFixed(2)}x (200) (aim <= 1.05x), ` +
      `site proxy CPU per request ${log.siteProxyCpuRatio.toFixed(2)}x (aim <= 1.3x): ${us(log.cpuUsPerRequest)} more per request, ` +
      `${log.bytesPerRequest.toFixed(0)} bytes of log per request, ${log.cpuMsPerMb.toFixed(1)} ms of CPU per MB logged`,
  );
  if (p.retries.length > 0)
    console.log(`  loads done again after a failure: ${p.retries.length} (${p.retries.slice(0, 3).join("; ")})`);
  const ratios = (m: Record<string, number>) => ({
    envVsNginx: ratio(m, "env", "nginx"),
    envVsDirect: ratio(m, "env", "direct"),
    nginxVsDirect: ratio(m, "nginx", "direct"),
    gatewayVsDirect: ratio(m, "gateway", "direct"),
  });
  return {
    loads: p.loads,
    contenders: CONTENDERS,
    page50Ms: p.page50Ms,
    page200Ms: p.page200Ms,
    ttfbMs: p.ttfbMs,
    cpuUsPerRequest: p.cpuUsPerRequest,
    ratios: {
      page50: ratios(p.page50Ms),
      page200: ratios(p.page200Ms),
      ttfb: ratios(p.ttfbMs),
      cpuEnvVsNginx: (cpu.env.siteProxy + cpu.env.gateway) / cpu.nginx.nginx,
      cpuSiteProxyVsNginx: cpu.env.siteProxy / cpu.nginx.nginx,
    },
    requestLog: p.requestLog,
    aim: { envVsNginx: 1.0, requestLogPageLoads: 1.05, requestLogSiteProxyCpu: 1.3 },
    retries: p.retries,
    samples: p.samples,
  };
}

async function main(): Promise<void> {
  if (PAGES_ONLY) {
    rmSync(STATE, { recursive: true, force: true });
    const pages = reportPages(await isolatedPageLoads(LOADS));
    const load = loadavg().map((l) => Number(l.toFixed(2)));
    console.log(`  load average at the end: ${load.join(" ")} on ${cpus().length} cores`);
    console.log(JSON.stringify({ bench: "e2e", pagesOnly: true, pageLoads: pages, loadAverage: load }));
    return;
  }
  if (!existsSync("/usr/bin/docker-compose"))
    throw new Error("docker-compose is not installed: apt-get install docker-compose");
  // The self-test checks the real github.com and the public web, which this bench does not stand in for.
  const demo = specFromStackFile(path.join(REPO, "stacks/Pulumi.demo.yaml"), STACK, { "multienv:selfTest": false });
  writeFileSync(STACK_FILE, YAML.stringify({ config: demo.config }));
  const composeDir = mkdtempSync(path.join(tmpdir(), "multienv-bench-compose-"));
  const compose = (...args: string[]) =>
    run(
      "docker-compose",
      ["-p", COMPOSE_PROJECT, "-f", path.join(composeDir, "docker-compose.yml"), ...args],
      composeDir,
    );
  const figures = {
    deploy: [] as number[],
    noChangeUp: [] as number[],
    destroy: [] as number[],
    composeUp: [] as number[],
    composeDown: [] as number[],
  };
  let containers = 0;
  let last: { deploy: Timeline; noChangeUp: Timeline; destroy: Timeline } | undefined;
  try {
    await pulumi("stack", "init");
    for (let round = 1; round <= ROUNDS; round++) {
      const deploy = await engineOperation("up");
      figures.deploy.push(deploy.seconds);
      const noChangeUp = await engineOperation("up");
      figures.noChangeUp.push(noChangeUp.seconds);
      const dependencies = await stateDependencies();
      if (round === 1) {
        writeFileSync(path.join(composeDir, "docker-compose.yml"), await composeFileOf(STACK));
        containers = Object.keys(
          YAML.parse(execFileSync("cat", [path.join(composeDir, "docker-compose.yml")], { encoding: "utf8" })).services,
        ).length;
      }
      const destroy = await engineOperation("destroy");
      figures.destroy.push(destroy.seconds);
      last = {
        deploy: timelineOfOperation(deploy, dependencies),
        noChangeUp: timelineOfOperation(noChangeUp, dependencies),
        destroy: timelineOfOperation(destroy, dependencies),
      };
      if (EVENTS_DIR !== undefined && round === ROUNDS) {
        writeEvents(path.join(EVENTS_DIR, "deploy.jsonl"), deploy);
        writeEvents(path.join(EVENTS_DIR, "no-change-up.jsonl"), noChangeUp);
        writeEvents(path.join(EVENTS_DIR, "destroy.jsonl"), destroy);
        writeFileSync(
          path.join(EVENTS_DIR, "dependencies.json"),
          JSON.stringify(Object.fromEntries(dependencies), null, 1) + "\n",
        );
      }
      const composeStarted = performance.now();
      await compose("up", "-d");
      await gatewayHealthy(`${STACK}-gateway`);
      figures.composeUp.push((performance.now() - composeStarted) / 1000);
      figures.composeDown.push((await compose("down", "-v", "-t", "2")).seconds);
      console.log(
        `round ${round}: deploy ${figures.deploy.at(-1)!.toFixed(1)} s, no-change up ${figures.noChangeUp.at(-1)!.toFixed(1)} s, destroy ${figures.destroy.at(-1)!.toFixed(1)} s, compose up ${figures.composeUp.at(-1)!.toFixed(1)} s, compose down ${figures.composeDown.at(-1)!.toFixed(1)} s`,
      );
    }
  } finally {
    await compose("down", "-v", "-t", "1").catch(() => undefined);
    await engineOperation("destroy").catch(() => undefined);
    rmSync(STACK_FILE, { force: true });
    rmSync(STATE, { recursive: true, force: true });
    rmSync(path.join(REPO, "artifacts", STACK), { recursive: true, force: true });
  }
  const m = Object.fromEntries(Object.entries(figures).map(([k, v]) => [k, median(v)])) as Record<
    keyof typeof figures,
    number
  >;
  const deployLoad = loadavg().map((l) => Number(l.toFixed(2)));
  if (last !== undefined) {
    console.log(`the last round's deploy, from the engine's events (seconds from the start of \`pulumi up\`):`);
    for (const line of formatTimeline(last.deploy)) console.log(line);
    console.log(`the last round's no-change up:`);
    for (const line of formatTimeline(last.noChangeUp, 3)) console.log(line);
    console.log(`the last round's destroy:`);
    for (const line of formatTimeline(last.destroy)) console.log(line);
  }
  console.log(`the demo task, ${containers} containers, median of ${ROUNDS} rounds:`);
  console.log(
    `  deploy-to-healthy (pulumi up): ${m.deploy.toFixed(1)} s; docker-compose up -d until healthy: ${m.composeUp.toFixed(1)} s; ratio ${(m.deploy / m.composeUp).toFixed(2)}x (aim <= 1.0x)`,
  );
  console.log(`  no-change pulumi up: ${m.noChangeUp.toFixed(1)} s (aim < 2.5 s)`);
  console.log(
    `  destroy (pulumi destroy, captures collected first): ${m.destroy.toFixed(1)} s; docker-compose down -v: ${m.composeDown.toFixed(1)} s; ratio ${(m.destroy / m.composeDown).toFixed(2)}x (aim <= 1.5x)`,
  );
  console.log(`  load average after the rounds: ${deployLoad.join(" ")} on ${cpus().length} cores`);
  // After the deploy rounds, so the containers they started are gone and the loads have the machine to themselves.
  const pages = DEPLOY_ONLY ? undefined : reportPages(await isolatedPageLoads(LOADS));
  const load = loadavg().map((l) => Number(l.toFixed(2)));
  console.log(`  load average at the end: ${load.join(" ")} on ${cpus().length} cores`);
  console.log(
    JSON.stringify({
      bench: "e2e",
      rounds: ROUNDS,
      containers,
      deploySeconds: m.deploy,
      composeUpSeconds: m.composeUp,
      deployVsCompose: m.deploy / m.composeUp,
      noChangeUpSeconds: m.noChangeUp,
      destroySeconds: m.destroy,
      composeDownSeconds: m.composeDown,
      destroyVsComposeDown: m.destroy / m.composeDown,
      aim: { deployVsCompose: 1.0, noChangeUpSeconds: 2.5, destroyVsComposeDown: 1.5 },
      samples: figures,
      timeline: last && {
        deploy: timelineSummary(last.deploy),
        noChangeUp: timelineSummary(last.noChangeUp),
        destroy: timelineSummary(last.destroy),
      },
      deployLoadAverage: deployLoad,
      ...(pages ? { pageLoads: pages } : {}),
      loadAverage: load,
    }),
  );
}

main().catch((e) => {
  console.error(`bench:e2e: ${(e as Error).message}`);
  process.exit(1);
});
