// Page loads in this machine's Chromium, on loopback, every contender a process started here from this checkout:
//   env     https://shop.test/ through the site proxy (CONNECT, TLS from the env CA, HTTP/2) and the gateway;
//   direct  the sample shop frontend itself over plain HTTP/1.1;
//   nginx   nginx (Debian's) terminating TLS with HTTP/2 in front of the same frontend, a leaf from a test CA;
//   gateway the gateway alone over plain HTTP/1.1 (its /website/shop/);
//   logged  what env is, through a second site proxy that keeps a request log (every exchange a HAR entry on disk),
//           so the log's cost is read beside the log off: its page loads and its CPU per request against env's, and
//           its CPU per MB of log written.
// Each figure is the median of BENCH_LOADS loads, each in a fresh browser context, the contenders alternating
// load by load, each round in an order turned by one: a page with 50 subresources, one with 200, and the time to
// first byte of a page with none (navigation start to the first byte of the answer, connection set-up included).
// Beside them, the CPU time each serving process spent per request of each contender's page loads (/proc, summed
// over every load).
// With BENCH_CPU_PROF=<dir> the gateway (one worker) and the site proxy write CPU profiles there (node --cpu-prof).
// `isolatedPageLoads` runs all of it in a network namespace of its own with loopback alone (unshare -n, as root):
// Chromium drops every load under way when an interface comes or goes, which a Docker engine busy with other
// stacks does all the time. Run as a script, this file does the loads and prints their figures as one JSON line.
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { chmodSync, mkdtempSync, readdirSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium, type Browser } from "playwright-core";
import {
  cpuSeconds,
  freePort,
  processTree,
  siteProxyOnLoopback,
  startGateway,
  startNginxTlsH2,
  startNode,
  startSiteProxy,
  testCertificate,
  waitForPort,
} from "./loopback";
import { cpuProfileArgs, CPU_PROFILE_DIR, median, stopServices } from "./kit";

const REPO = join(__dirname, "..");
const CONTROL_TOKEN = "bench-control-token-0123456789abcdef";

export type Contender = "env" | "direct" | "nginx" | "gateway" | "logged";
export const CONTENDERS: Contender[] = ["env", "direct", "nginx", "gateway", "logged"];
/** The processes serving the loads, whose CPU time is counted. */
export type Served = "siteProxy" | "gateway" | "nginx" | "frontend";
const SERVED: Served[] = ["siteProxy", "gateway", "nginx", "frontend"];

export interface PageLoadFigures {
  loads: number;
  /** Medians in ms, per contender. */
  page50Ms: Record<Contender, number>;
  page200Ms: Record<Contender, number>;
  ttfbMs: Record<Contender, number>;
  /**
   * CPU time (us) each process spent per request of each contender's page loads (50 and 200 subresources, 10 ms
   * ticks summed over every load): what the path costs, less moved by a busy machine than its latency.
   */
  cpuUsPerRequest: Record<Contender, Record<Served, number>>;
  samples: Record<"page50" | "page200" | "ttfb", Record<Contender, number[]>>;
  /** Loads done again after a failure (Chromium gives up a load when the machine's interfaces change). */
  retries: string[];
  /** The request log's cost: `logged` against `env` (the same path, the log on and off). */
  requestLog: {
    /** Median page load with the log on over the median with it off (aim: at most 1.05). */
    page50Ratio: number;
    page200Ratio: number;
    /** The site proxy's CPU per request with the log on over with it off (aim: at most 1.3). */
    siteProxyCpuRatio: number;
    /** The site proxy's CPU the log adds per request (us). */
    cpuUsPerRequest: number;
    /** Bytes the log wrote per request (an entry), and the CPU the log cost per MB written (ms). */
    bytesPerRequest: number;
    cpuMsPerMb: number;
  };
}

/** One load in a fresh context: ms to the load event, or to the first byte of the answer when `ttfb`. */
async function loadOnce(
  browser: Browser,
  url: string,
  expected: number,
  proxy?: string,
  ttfb = false,
): Promise<number> {
  const context = await browser.newContext({
    ignoreHTTPSErrors: true,
    ...(proxy ? { proxy: { server: proxy } } : {}),
    // The gateway alone, on its published listener: the runner's token, in the gateway's own header.
    ...(url.includes("/website/") ? { extraHTTPHeaders: { "X-Multienv-Token": CONTROL_TOKEN } } : {}),
  });
  try {
    const page = await context.newPage();
    let loaded = 0;
    let failed = 0;
    page.on("requestfinished", () => loaded++);
    page.on("response", (r) => r.status() !== 200 && !r.url().endsWith("/favicon.ico") && failed++);
    const started = performance.now();
    const response = await page.goto(url, { waitUntil: "load" });
    const ms = performance.now() - started;
    if (response?.status() !== 200 || loaded < expected || failed > 0)
      throw new Error(
        `${url}${proxy ? ` via ${proxy}` : ""}: status ${response?.status()}, ${loaded} requests finished, ${failed} not 200`,
      );
    if (!ttfb) return ms;
    return (await page.evaluate(
      '(() => { const nav = performance.getEntriesByType("navigation")[0]; return nav.responseStart - nav.startTime; })()',
    )) as number;
  } finally {
    await context.close();
  }
}

/** `loadOnce`, tried up to three times: another process adding a network interface fails Chromium's loads. */
export async function load(
  browser: Browser,
  url: string,
  expected: number,
  retries: string[],
  proxy?: string,
  ttfb = false,
): Promise<number> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await loadOnce(browser, url, expected, proxy, ttfb);
    } catch (err) {
      if (attempt === 3) throw err;
      retries.push(`${url}${proxy ? " via the site proxy" : ""}: ${(err as Error).message.split("\n")[0]}`);
    }
  }
}

export async function loopbackPageLoads(
  loads: number,
  log: (line: string) => void = console.log,
): Promise<PageLoadFigures> {
  const dir = mkdtempSync(join(tmpdir(), "multienv-bench-pages-"));
  const children: ChildProcess[] = [];
  let browser: Browser | undefined;
  try {
    chmodSync(dir, 0o755);
    const frontendPort = await freePort();
    const frontend = await startNode<{ port: number }>(
      ["--require", "tsx/cjs", join(REPO, "examples/sites/shop-frontend/server.ts")],
      { PORT: String(frontendPort) },
      '"startup"',
    );
    children.push(frontend.child);
    const site = `http://127.0.0.1:${frontendPort}`;
    // The site proxies reach the gateway's browse listener, as a computer's do; the published one wants the token.
    const browsePort = await freePort();
    const gateway = await startGateway(
      {
        listen: { host: "127.0.0.1", port: 0 },
        browse: { hosts: ["127.0.0.1"], port: browsePort },
        sites: { shop: { server: site, frontend: site } },
        ...(CPU_PROFILE_DIR ? { workers: 1 } : {}),
      },
      CONTROL_TOKEN,
      cpuProfileArgs("gateway"),
    );
    children.push(gateway.child);
    const sites = { shop: ["shop.test"] };
    const proxy = await startSiteProxy(
      siteProxyOnLoopback(`http://127.0.0.1:${browsePort}`, sites, join(dir, "site-proxy.log")),
      cpuProfileArgs("site-proxy"),
    );
    children.push(proxy.child);
    const requestLogDir = join(dir, "requests");
    const loggedProxy = await startSiteProxy(
      siteProxyOnLoopback(`http://127.0.0.1:${browsePort}`, sites, join(dir, "logged-site-proxy.log"), {
        requestLog: { dir: requestLogDir, computer: "bench" },
      }),
      cpuProfileArgs("site-proxy"),
    );
    children.push(loggedProxy.child);
    const { cert, key } = testCertificate(dir);
    const nginxPort = await freePort();
    const nginx = startNginxTlsH2(dir, {
      port: nginxPort,
      upstreamPort: frontendPort,
      cert,
      key,
      keepalive: 64,
      buffering: true,
    });
    children.push(nginx);
    await waitForPort(nginxPort);
    log(
      `page loads on loopback: frontend :${frontendPort}, gateway :${gateway.port} (${gateway.workers} workers), site proxy :${proxy.port}, nginx TLS+h2 :${nginxPort}`,
    );

    const bases: Record<Contender, { base: string; proxy?: string }> = {
      env: { base: "https://shop.test", proxy: `http://127.0.0.1:${proxy.port}` },
      direct: { base: site },
      nginx: { base: `https://127.0.0.1:${nginxPort}` },
      gateway: { base: `http://127.0.0.1:${gateway.port}/website/shop` },
      logged: { base: "https://shop.test", proxy: `http://127.0.0.1:${loggedProxy.port}` },
    };
    browser = await chromium.launch({
      executablePath: "/usr/bin/chromium",
      args: ["--no-sandbox", "--disable-gpu"],
      proxy: { server: "per-context" },
    });
    const kinds = [
      { kind: "page50" as const, path: "/bench?n=50", expected: 51, ttfb: false },
      { kind: "page200" as const, path: "/bench?n=200", expected: 201, ttfb: false },
      // A page the frontend serves alone (its home page asks its server for products; this bench runs no server).
      { kind: "ttfb" as const, path: "/bench?n=0", expected: 1, ttfb: true },
    ];
    const samples = Object.fromEntries(
      kinds.map((k) => [k.kind, Object.fromEntries(CONTENDERS.map((c) => [c, [] as number[]]))]),
    ) as PageLoadFigures["samples"];
    const retries: string[] = [];
    // The CPU each process spent on each contender's page loads (50 and 200 subresources), and their requests.
    const processes: Record<Served, number[]> = {
      siteProxy: processTree(proxy.child.pid!),
      gateway: processTree(gateway.child.pid!),
      nginx: processTree(nginx.pid!),
      frontend: processTree(frontend.child.pid!),
    };
    // The logged contender's site proxy is its own process.
    const loggedProxyPids = processTree(loggedProxy.child.pid!);
    const pidsOf = (c: Contender, p: Served) => (p === "siteProxy" && c === "logged" ? loggedProxyPids : processes[p]);
    const spent = Object.fromEntries(
      CONTENDERS.map((c) => [c, { requests: 0, cpu: { siteProxy: 0, gateway: 0, nginx: 0, frontend: 0 } }]),
    ) as Record<Contender, { requests: number; cpu: Record<Served, number> }>;
    // One warm-up load each: the leaf is issued, the pools and the browser's caches of names are filled.
    for (const c of CONTENDERS)
      for (const k of kinds) await load(browser, bases[c].base + k.path, k.expected, retries, bases[c].proxy, k.ttfb);
    for (let i = 0; i < loads; i++) {
      // Each round begins with the next contender, so none always follows the same one (or always comes last).
      const order = CONTENDERS.map((_, j) => CONTENDERS[(i + j) % CONTENDERS.length]);
      for (const k of kinds)
        for (const c of order) {
          const before = SERVED.map((p) => cpuSeconds(pidsOf(c, p)));
          samples[k.kind][c].push(
            await load(browser, bases[c].base + k.path, k.expected, retries, bases[c].proxy, k.ttfb),
          );
          if (k.ttfb) continue;
          spent[c].requests += k.expected;
          SERVED.forEach((p, i) => (spent[c].cpu[p] += cpuSeconds(pidsOf(c, p)) - before[i]));
        }
    }
    const medians = (kind: keyof PageLoadFigures["samples"]) =>
      Object.fromEntries(CONTENDERS.map((c) => [c, median(samples[kind][c])])) as Record<Contender, number>;
    // Every load the logged proxy served, warm-up and ttfb loads included, wrote its entries.
    const loggedRequests = kinds.reduce((n, k) => n + k.expected * (loads + 1), 0);
    const logBytes = readdirSync(requestLogDir).reduce((n, f) => n + statSync(join(requestLogDir, f)).size, 0);
    const perRequest = (c: Contender) => spent[c].cpu.siteProxy / spent[c].requests;
    const extraCpuPerRequest = perRequest("logged") - perRequest("env");
    return {
      loads,
      page50Ms: medians("page50"),
      page200Ms: medians("page200"),
      ttfbMs: medians("ttfb"),
      cpuUsPerRequest: Object.fromEntries(
        CONTENDERS.map((c) => [
          c,
          Object.fromEntries(SERVED.map((p) => [p, (spent[c].cpu[p] * 1e6) / spent[c].requests])),
        ]),
      ) as PageLoadFigures["cpuUsPerRequest"],
      samples,
      retries,
      requestLog: {
        page50Ratio: median(samples.page50.logged) / median(samples.page50.env),
        page200Ratio: median(samples.page200.logged) / median(samples.page200.env),
        siteProxyCpuRatio: perRequest("logged") / perRequest("env"),
        cpuUsPerRequest: extraCpuPerRequest * 1e6,
        bytesPerRequest: logBytes / loggedRequests,
        cpuMsPerMb: (extraCpuPerRequest * 1e3) / (logBytes / loggedRequests / 1e6),
      },
    };
  } finally {
    await browser?.close();
    await stopServices(children);
    rmSync(dir, { recursive: true, force: true });
  }
}

/** `loopbackPageLoads` in a network namespace with loopback alone, when this process may make one; else here. */
export async function isolatedPageLoads(
  loads: number,
  log: (line: string) => void = console.log,
): Promise<PageLoadFigures> {
  const canUnshare =
    process.getuid?.() === 0 &&
    execFileSync("sh", ["-c", "unshare -n true && echo yes || true"], {
      encoding: "utf8",
      stdio: ["ignore", "pipe", "ignore"],
    }).trim() === "yes";
  if (!canUnshare) {
    log("page loads: no network namespace of their own (needs root and unshare); interface changes may fail loads");
    return loopbackPageLoads(loads, log);
  }
  const child = spawn(
    "unshare",
    ["-n", "sh", "-c", 'ip link set lo up && exec "$@"', "sh", process.execPath, "--require", "tsx/cjs", __filename],
    {
      cwd: REPO,
      env: { ...process.env, BENCH_LOADS: String(loads) },
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  let out = "";
  child.stdout.on("data", (d: Buffer) => (out += d));
  child.stderr.on("data", (d: Buffer) => process.stderr.write(d));
  const code = await new Promise<number | null>((resolve) => child.once("exit", resolve));
  const lines = out.trim().split("\n");
  for (const line of lines.slice(0, -1)) log(line);
  if (code !== 0) throw new Error(`the page loads (in their own network namespace) exited ${code}`);
  return JSON.parse(lines.at(-1)!) as PageLoadFigures;
}

if (require.main === module) {
  loopbackPageLoads(Number(process.env.BENCH_LOADS ?? 15)).then(
    (figures) => console.log(JSON.stringify(figures)),
    (err: Error) => {
      console.error(`page loads: ${err.message}`);
      process.exit(1);
    },
  );
}
