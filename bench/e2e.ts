// npm run bench:e2e
//
// The demo topology (stacks/Pulumi.demo.yaml) on the local Docker engine, images prebuilt
// (`npm run images`):
//   1. deploy-to-healthy: from running the program to the last resource created, the gateway
//      healthy (every site ready, every capture writing). Target: < 30 s.
//   2. a page with 50 subresources (the sample shop's /bench?n=50), loaded by Chromium
//      (a) through the computer's site proxy and the gateway: https://shop.test/bench?n=50, the
//          path a computer's browser takes (proxy terminates TLS with the env CA, then gateway, then
//          the frontend), and
//      (b) straight from the site container: http://<frontend>/bench?n=50.
//      Target: (a) <= 1.3x (b).
// Both loads use the same Chromium (this machine's, /usr/bin/chromium, headless) with a fresh
// context per load (no cache, new connections). The host reaches the proxy and the frontend on
// the stack's egress network; the frontend is attached to it for the bench only (it is on the
// internal env network otherwise). Loads alternate (a)/(b); each figure is the median.
// Options (env): BENCH_LOADS per path (15), BENCH_STACK (bench-e2e).
import { chromium, type Browser } from "playwright-core";
import { cpus, loadavg } from "node:os";
import path from "node:path";
import { dockerApi } from "../src/runner/docker-api";
import { deployStack, sweepStack } from "../src/runner/engine-deploy";

const LOADS = Number(process.env.BENCH_LOADS ?? 15);
const STACK = process.env.BENCH_STACK ?? "bench-e2e";
const SUBRESOURCES = 50;

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

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

async function main(): Promise<void> {
  const api = dockerApi();
  const egress = `${STACK}-egress`;
  try {
    const deployment = await deployStack({ stack: STACK, stackFile: path.join(__dirname, "../stacks/Pulumi.demo.yaml"), api });
    console.log(`deploy-to-healthy: ${deployment.seconds.toFixed(1)} s (${deployment.resources.filter((r) => r.type.startsWith("docker:index/container")).length} containers; target < 30 s)`);

    const frontend = `${STACK}-shop-frontend`;
    await api.request("POST", `/networks/${egress}/connect`, { Container: frontend });
    const ipOn = async (container: string) => (await api.request("GET", `/containers/${container}/json`)).NetworkSettings.Networks[egress].IPAddress as string;
    const proxy = `http://${await ipOn(`${STACK}-desktop-proxy`)}:3128`;
    const direct = `http://${await ipOn(frontend)}/bench?n=${SUBRESOURCES}`;
    const proxied = `https://shop.test/bench?n=${SUBRESOURCES}`;

    // Playwright's proxy option needs a launch-wide proxy to be overridable per context.
    const browser = await chromium.launch({ executablePath: "/usr/bin/chromium", args: ["--no-sandbox", "--disable-gpu"], proxy: { server: "per-context" } });
    try {
      // The proxy starts listening a moment after its container starts: warm up until it answers.
      for (let attempt = 0; ; attempt++) {
        try {
          await loadOnce(browser, proxied, proxy);
          break;
        } catch (e) {
          if (attempt > 40) throw e;
          await new Promise((r) => setTimeout(r, 250));
        }
      }
      await loadOnce(browser, direct);
      const a: number[] = [];
      const b: number[] = [];
      const c: number[] = [];
      // Where the time goes: the gateway alone (its /website/ route, plain HTTP from this machine).
      const viaGateway = `${deployment.outputs.gatewayUrl}/website/shop/bench?n=${SUBRESOURCES}`;
      for (let i = 0; i < LOADS; i++) {
        a.push(await loadOnce(browser, proxied, proxy));
        b.push(await loadOnce(browser, direct));
        c.push(await loadOnce(browser, viaGateway));
      }
      const ma = median(a);
      const mb = median(b);
      console.log(`page with ${SUBRESOURCES} subresources, median of ${LOADS} loads each:`);
      console.log(`  through site proxy + gateway (${proxied}): ${ma.toFixed(0)} ms`);
      console.log(`  straight from the site container (${direct}): ${mb.toFixed(0)} ms`);
      console.log(`  ratio: ${(ma / mb).toFixed(2)}x (target <= 1.3x)`);
      console.log(`  for reference, through the gateway alone (${viaGateway}): ${median(c).toFixed(0)} ms`);
      console.log(`  load average while measuring: ${loadavg().map((l) => l.toFixed(1)).join(" ")} on ${cpus().length} cores (the 4 processes of the proxied path suffer most from a busy machine)`);
    } finally {
      await browser.close();
    }
  } finally {
    await sweepStack(api, STACK);
  }
}

main().catch((e) => {
  console.error(`bench:e2e: ${(e as Error).message}`);
  process.exit(1);
});
