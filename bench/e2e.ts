// npm run bench:e2e
//
// The demo task (stacks/Pulumi.demo.yaml) on the local Docker engine with the real Pulumi engine, beside
// docker-compose running the same containers, in alternating rounds:
//   1. deploy-to-healthy: `pulumi up --yes --skip-preview` from start to done; the deploy waits for the
//      gateway to be healthy (every site ready, every capture writing) and for the computers after it.
//      Aim: < 20 s and <= 2x compose.
//   2. a no-change `pulumi up` on the deployed stack. Aim: < 5 s.
//   3. destroy: `pulumi destroy --yes --skip-preview`, which first collects every capture and proxy log.
//   4. compose: `docker-compose up -d` of a compose file holding the same containers (read back from the
//      deployed stack with docker inspect: images by id, env, networks and aliases, network_mode
//      service:<target> for the capture sidecars, capabilities, mounts, ports, health checks, the gateway
//      started after its sites and the proxies after a healthy gateway), until the gateway is healthy.
//      Debian's docker-compose is 1.29, which has no `up --wait`, so the wait is a poll of the gateway's
//      /healthz, the same check the deploy waits for; `docker-compose down -v` after.
//   5. a page with 50 subresources (the sample shop's /bench?n=50), loaded by Chromium through the computer's
//      site proxy and the gateway, and straight from the site container (median of BENCH_LOADS each).
// The last line is one JSON object with every figure.
// Options (env): BENCH_ROUNDS (3), BENCH_LOADS (15), BENCH_STACK (bench-e2e). Needs docker-compose
// (apt-get install docker-compose) and the Pulumi CLI (installed, or scripts/pulumi-toolchain.sh).
import { execFile, execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import path from "node:path";
import { chromium, type Browser } from "playwright-core";
import YAML from "yaml";
import { dockerApi } from "../src/providers/docker-api";
import { composeFileOf, gatewayHealthy } from "./compose";

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const LOADS = Number(process.env.BENCH_LOADS ?? 15);
const STACK = process.env.BENCH_STACK ?? "bench-e2e";
const COMPOSE_PROJECT = `${STACK}-compose`;
const SUBRESOURCES = 50;
const REPO = path.resolve(__dirname, "..");
const STACK_FILE = path.join(REPO, "stacks", `Pulumi.${STACK}.yaml`);
const api = dockerApi();

const built = path.join(REPO, ".cache/pulumi/current/bin");
if (!(process.env.PATH ?? "").split(":").some((d) => existsSync(path.join(d, "pulumi"))) && existsSync(path.join(built, "pulumi"))) {
  process.env.PATH = `${built}:${process.env.PATH}`;
}
const STATE = mkdtempSync(path.join(tmpdir(), "multienv-bench-state-"));
const ENV = {
  ...process.env,
  PULUMI_BACKEND_URL: `file://${STATE}`,
  PULUMI_CONFIG_PASSPHRASE: "bench",
  PULUMI_SKIP_UPDATE_CHECK: "true",
  PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION: "true",
};

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

function run(file: string, args: string[], cwd = REPO): Promise<{ seconds: number; stdout: string }> {
  const started = performance.now();
  return new Promise((resolve, reject) =>
    execFile(file, args, { cwd, env: ENV, maxBuffer: 64 * 1024 * 1024 }, (error, stdout, stderr) => {
      if (error) return reject(new Error(`${file} ${args.join(" ")}: ${(stderr || stdout || error.message).trim().split("\n").slice(-8).join("\n")}`));
      resolve({ seconds: (performance.now() - started) / 1000, stdout });
    }),
  );
}

const pulumi = (...args: string[]) => run("pulumi", [...args, "--stack", STACK, "--non-interactive"]);

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

// --- page loads --------------------------------------------------------------------------------------

async function loadOnce(browser: Browser, url: string, proxy?: string): Promise<number> {
  const context = await browser.newContext({ ignoreHTTPSErrors: true, ...(proxy ? { proxy: { server: proxy } } : {}) });
  const page = await context.newPage();
  let loaded = 0;
  page.on("requestfinished", () => loaded++);
  const started = performance.now();
  const response = await page.goto(url, { waitUntil: "load" });
  const ms = performance.now() - started;
  if (response?.status() !== 200 || loaded < SUBRESOURCES + 1) throw new Error(`${url}: status ${response?.status()}, ${loaded} requests finished`);
  await context.close();
  return ms;
}

async function pageLoads(gatewayUrl: string): Promise<Record<string, number>> {
  const egress = `${STACK}-egress`;
  const frontend = `${STACK}-shop-frontend`;
  await api.request("POST", `/networks/${egress}/connect`, { Container: frontend });
  const proxyContainer = `${STACK}-desktop-proxy`;
  await api.request("POST", `/networks/${egress}/connect`, { Container: proxyContainer }).catch(() => undefined);
  const ipOn = async (container: string) => (await api.request("GET", `/containers/${container}/json`)).NetworkSettings.Networks[egress].IPAddress as string;
  const proxy = `http://${await ipOn(proxyContainer)}:3128`;
  const direct = `http://${await ipOn(frontend)}/bench?n=${SUBRESOURCES}`;
  const proxied = `https://shop.test/bench?n=${SUBRESOURCES}`;
  const viaGateway = `${gatewayUrl}/website/shop/bench?n=${SUBRESOURCES}`;
  // Playwright's proxy option needs a launch-wide proxy to be overridable per context.
  const browser = await chromium.launch({ executablePath: "/usr/bin/chromium", args: ["--no-sandbox", "--disable-gpu"], proxy: { server: "per-context" } });
  try {
    for (let attempt = 0; ; attempt++) {
      try {
        await loadOnce(browser, proxied, proxy);
        break;
      } catch (e) {
        if (attempt > 40) throw e;
        await sleep(250);
      }
    }
    await loadOnce(browser, direct);
    const a: number[] = [];
    const b: number[] = [];
    const c: number[] = [];
    for (let i = 0; i < LOADS; i++) {
      a.push(await loadOnce(browser, proxied, proxy));
      b.push(await loadOnce(browser, direct));
      c.push(await loadOnce(browser, viaGateway));
    }
    return { proxiedMs: median(a), directMs: median(b), gatewayOnlyMs: median(c) };
  } finally {
    await browser.close();
  }
}

// --- the rounds ----------------------------------------------------------------------------------------

async function main(): Promise<void> {
  if (!existsSync("/usr/bin/docker-compose")) throw new Error("docker-compose is not installed: apt-get install docker-compose");
  const demo = YAML.parse(execFileSync("cat", [path.join(REPO, "stacks/Pulumi.demo.yaml")], { encoding: "utf8" }));
  writeFileSync(STACK_FILE, YAML.stringify(demo));
  const composeDir = mkdtempSync(path.join(tmpdir(), "multienv-bench-compose-"));
  const compose = (...args: string[]) => run("docker-compose", ["-p", COMPOSE_PROJECT, "-f", path.join(composeDir, "docker-compose.yml"), ...args], composeDir);
  const figures = { deploy: [] as number[], noChangeUp: [] as number[], destroy: [] as number[], composeUp: [] as number[], composeDown: [] as number[] };
  let loads: Record<string, number> | undefined;
  let containers = 0;
  try {
    await pulumi("stack", "init");
    for (let round = 1; round <= ROUNDS; round++) {
      figures.deploy.push((await pulumi("up", "--yes", "--skip-preview")).seconds);
      figures.noChangeUp.push((await pulumi("up", "--yes", "--skip-preview")).seconds);
      if (round === 1) {
        const gatewayUrl = JSON.parse((await pulumi("stack", "output", "gatewayUrl", "--json")).stdout) as string;
        writeFileSync(path.join(composeDir, "docker-compose.yml"), await composeFileOf(STACK));
        containers = Object.keys(YAML.parse(execFileSync("cat", [path.join(composeDir, "docker-compose.yml")], { encoding: "utf8" })).services).length;
        loads = await pageLoads(gatewayUrl);
      }
      figures.destroy.push((await pulumi("destroy", "--yes", "--skip-preview")).seconds);
      const composeStarted = performance.now();
      await compose("up", "-d");
      await gatewayHealthy(`${STACK}-gateway`);
      figures.composeUp.push((performance.now() - composeStarted) / 1000);
      figures.composeDown.push((await compose("down", "-v", "-t", "2")).seconds);
      console.log(`round ${round}: deploy ${figures.deploy.at(-1)!.toFixed(1)} s, no-change up ${figures.noChangeUp.at(-1)!.toFixed(1)} s, destroy ${figures.destroy.at(-1)!.toFixed(1)} s, compose up ${figures.composeUp.at(-1)!.toFixed(1)} s, compose down ${figures.composeDown.at(-1)!.toFixed(1)} s`);
    }
  } finally {
    await compose("down", "-v", "-t", "1").catch(() => undefined);
    await pulumi("destroy", "--yes", "--skip-preview").catch(() => undefined);
    rmSync(STACK_FILE, { force: true });
    rmSync(STATE, { recursive: true, force: true });
    rmSync(path.join(REPO, "artifacts", STACK), { recursive: true, force: true });
  }
  const m = Object.fromEntries(Object.entries(figures).map(([k, v]) => [k, median(v)])) as Record<keyof typeof figures, number>;
  console.log(`the demo task, ${containers} containers, median of ${ROUNDS} rounds:`);
  console.log(`  deploy-to-healthy (pulumi up): ${m.deploy.toFixed(1)} s (aim < 20 s); docker-compose up -d until healthy: ${m.composeUp.toFixed(1)} s; ratio ${(m.deploy / m.composeUp).toFixed(2)}x (aim <= 2x)`);
  console.log(`  no-change pulumi up: ${m.noChangeUp.toFixed(1)} s (aim < 5 s)`);
  console.log(`  destroy (pulumi destroy, captures collected first): ${m.destroy.toFixed(1)} s; docker-compose down -v: ${m.composeDown.toFixed(1)} s`);
  if (loads) {
    console.log(`  a page with ${SUBRESOURCES} subresources, median of ${LOADS} loads: through site proxy + gateway ${loads.proxiedMs.toFixed(0)} ms, straight from the site ${loads.directMs.toFixed(0)} ms (${(loads.proxiedMs / loads.directMs).toFixed(2)}x), gateway alone ${loads.gatewayOnlyMs.toFixed(0)} ms`);
  }
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
      samples: figures,
      ...(loads ? { pageLoads: { subresources: SUBRESOURCES, loads: LOADS, ...loads, proxiedVsDirect: loads.proxiedMs / loads.directMs } } : {}),
      loadAverage: load,
    }),
  );
}

main().catch((e) => {
  console.error(`bench:e2e: ${(e as Error).message}`);
  process.exit(1);
});
