// npm run bench:request-log
//
// What the request log costs, read beside the log off: page loads in this machine's Chromium through two site proxies
// on the same path (CONNECT, TLS from the env CA, HTTP/2, the gateway, an origin on loopback), one keeping a request
// log (`on`) and one not (`off`). With BENCH_BASELINE=<a checkout of this repository> a third (`baseline`) keeps the
// log with that checkout's code, so a change to the recorder is an A/B within one run on a busy machine.
// Pages (each subresource an SVG image):
//   plain50, plain200  50 and 200 small subresources (about 100 bytes each, as the page-loads bench's);
//   big50              50 subresources of BENCH_PAD_BYTES (32 KiB) each, sent as they are;
//   gzip50, br50       the same bodies gzip- and br-encoded (the log decodes them: HAR's content.text is the
//                      decoded body);
//   stacked50          the same bodies encoded gzip then br (`Content-Encoding: gzip, br`).
// Each figure is the median of BENCH_LOADS loads, each in a fresh browser context, the contenders alternating load by
// load; beside them the CPU each site proxy spent per request (/proc utime + stime, 10 ms ticks, summed over every
// load, each load's count read 100 ms after it so the entries it wrote are in it), and the bytes of log per request.
// With BENCH_CPU_PROF=<dir> the proxies write CPU profiles there (node --cpu-prof). The loads run in a network
// namespace of their own with loopback alone when this process may make one (see page-loads.ts). One JSON line at
// the end.
import { spawn, execFileSync, type ChildProcess } from "node:child_process";
import { chmodSync, mkdtempSync, readdirSync, rmSync, statSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as zlib from "node:zlib";
import { chromium, type Browser } from "playwright-core";
import { cpuSeconds, freePort, processTree, siteProxyOnLoopback, startGateway, startSiteProxy } from "./loopback";
import { load } from "./page-loads";
import { cpuProfileArgs, median, stopServices } from "./kit";

const REPO = join(__dirname, "..");
const CONTROL_TOKEN = "bench-control-token-0123456789abcdef";
const LOADS = Number(process.env.BENCH_LOADS ?? 15);
const PAD = Number(process.env.BENCH_PAD_BYTES ?? 32 * 1024);
const BASELINE = process.env.BENCH_BASELINE;

type Coding = "identity" | "gzip" | "br" | "gzip, br";
interface Kind {
  kind: string;
  n: number;
  coding: Coding;
  pad: number;
}
const KINDS: Kind[] = [
  { kind: "plain50", n: 50, coding: "identity", pad: 0 },
  { kind: "plain200", n: 200, coding: "identity", pad: 0 },
  { kind: "big50", n: 50, coding: "identity", pad: PAD },
  { kind: "gzip50", n: 50, coding: "gzip", pad: PAD },
  { kind: "br50", n: 50, coding: "br", pad: PAD },
  { kind: "stacked50", n: 50, coding: "gzip, br", pad: PAD },
];

/** Text that compresses about as a page's scripts and markup do (some 3 to 4 times), the same for every run. */
function padding(bytes: number, seed: number): string {
  const words = ["shop", "cart", "price", "item", "order", "const", "return", "div", "class", "span", "value"];
  let x = seed * 2654435761 + 1;
  let text = "";
  while (text.length < bytes) {
    x = (x * 1103515245 + 12345) % 2147483648;
    text += words[x % words.length] + (x % 7 === 0 ? String(x % 1000) : "") + " ";
  }
  return text.slice(0, bytes);
}

function encode(body: Buffer, coding: Coding): Buffer {
  if (coding === "identity") return body;
  const fast = { params: { [zlib.constants.BROTLI_PARAM_QUALITY]: 5 } };
  if (coding === "gzip") return zlib.gzipSync(body);
  if (coding === "br") return zlib.brotliCompressSync(body, fast);
  return zlib.brotliCompressSync(zlib.gzipSync(body), fast);
}

/** The origin: `/page?n&coding&pad` and its assets, each encoded once and then answered from memory. */
function startOrigin(): Promise<http.Server> {
  const cache = new Map<string, Buffer>();
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://origin");
    const coding = (url.searchParams.get("coding") ?? "identity") as Coding;
    const pad = Number(url.searchParams.get("pad") ?? 0);
    const asset = /\/asset\/(\d+)\.svg$/.exec(url.pathname);
    let type: string;
    let make: () => string;
    if (url.pathname.endsWith("/page")) {
      const n = Number(url.searchParams.get("n") ?? 50);
      const query = `coding=${encodeURIComponent(coding)}&pad=${pad}`;
      type = "text/html; charset=utf-8";
      make = () =>
        `<!doctype html><title>Bench ${n}</title>` +
        Array.from({ length: n }, (_, i) => `<img src="asset/${i}.svg?${query}" width="8" height="8">`).join("");
    } else if (asset) {
      type = "image/svg+xml";
      make = () =>
        `<svg xmlns="http://www.w3.org/2000/svg" width="8" height="8"><text>${asset[1]}</text>` +
        (pad > 0 ? `<!-- ${padding(pad, Number(asset[1]))} -->` : "") +
        `</svg>`;
    } else {
      res.writeHead(404).end();
      return;
    }
    const key = url.pathname + url.search;
    let body = cache.get(key);
    if (body === undefined) cache.set(key, (body = encode(Buffer.from(make()), coding)));
    res.writeHead(200, {
      "content-type": type,
      "content-length": body.length,
      "cache-control": "no-store",
      ...(coding === "identity" ? {} : { "content-encoding": coding }),
    });
    res.end(body);
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server)));
}

function dirBytes(dir: string): number {
  try {
    return readdirSync(dir).reduce((n, f) => n + statSync(join(dir, f)).size, 0);
  } catch {
    return 0;
  }
}

const settle = () => new Promise((resolve) => setTimeout(resolve, 100));

async function requestLogCost(): Promise<Record<string, unknown>> {
  const dir = mkdtempSync(join(tmpdir(), "multienv-bench-request-log-"));
  chmodSync(dir, 0o755);
  const children: ChildProcess[] = [];
  const origin = await startOrigin();
  let browser: Browser | undefined;
  try {
    const site = `http://127.0.0.1:${(origin.address() as AddressInfo).port}`;
    const browsePort = await freePort();
    const gateway = await startGateway(
      {
        listen: { host: "127.0.0.1", port: 0 },
        browse: { hosts: ["127.0.0.1"], port: browsePort },
        sites: { shop: { server: site, frontend: site } },
      },
      CONTROL_TOKEN,
    );
    children.push(gateway.child);
    const proxyConfig = (name: string, requestLog: boolean) =>
      siteProxyOnLoopback(
        `http://127.0.0.1:${browsePort}`,
        { shop: ["shop.test"] },
        join(dir, `${name}.log`),
        requestLog ? { requestLog: { dir: join(dir, name), computer: "bench" } } : {},
      );
    const contenders = ["off", "on", ...(BASELINE ? ["baseline"] : [])];
    const proxies: Record<string, { child: ChildProcess; port: number }> = {};
    for (const c of contenders) {
      proxies[c] = await startSiteProxy(
        proxyConfig(c, c !== "off"),
        cpuProfileArgs(c),
        c === "baseline" ? BASELINE! : REPO,
      );
      children.push(proxies[c].child);
    }
    const pids = Object.fromEntries(contenders.map((c) => [c, processTree(proxies[c].child.pid!)]));
    browser = await chromium.launch({
      executablePath: "/usr/bin/chromium",
      args: ["--no-sandbox", "--disable-gpu"],
      proxy: { server: "per-context" },
    });
    const retries: string[] = [];
    const url = (k: Kind) => `https://shop.test/page?n=${k.n}&coding=${encodeURIComponent(k.coding)}&pad=${k.pad}`;
    const once = (c: string, k: Kind) =>
      load(browser!, url(k), k.n + 1, retries, `http://127.0.0.1:${proxies[c].port}`);
    for (const c of contenders) for (const k of KINDS) await once(c, k);
    await settle();
    const figures = Object.fromEntries(
      KINDS.map((k) => [
        k.kind,
        Object.fromEntries(contenders.map((c) => [c, { ms: [] as number[], cpu: 0, logBytes: 0 }])),
      ]),
    );
    for (let i = 0; i < LOADS; i++)
      for (const k of KINDS)
        for (const c of i % 2 ? [...contenders].reverse() : contenders) {
          const cpu = cpuSeconds(pids[c]);
          const bytes = dirBytes(join(dir, c));
          figures[k.kind][c].ms.push(await once(c, k));
          await settle();
          figures[k.kind][c].cpu += cpuSeconds(pids[c]) - cpu;
          figures[k.kind][c].logBytes += dirBytes(join(dir, c)) - bytes;
        }
    const requests = (k: Kind) => (k.n + 1) * LOADS;
    const report: Record<string, unknown> = {};
    for (const k of KINDS) {
      const f = figures[k.kind];
      const cpuUs = (c: string) => (f[c].cpu * 1e6) / requests(k);
      const row: Record<string, unknown> = {
        ms: Object.fromEntries(contenders.map((c) => [c, median(f[c].ms)])),
        cpuUsPerRequest: Object.fromEntries(contenders.map((c) => [c, cpuUs(c)])),
      };
      for (const c of contenders.filter((c) => c !== "off")) {
        const extraUs = cpuUs(c) - cpuUs("off");
        const logPerRequest = f[c].logBytes / requests(k);
        row[c] = {
          pageRatio: median(f[c].ms) / median(f.off.ms),
          cpuRatio: cpuUs(c) / cpuUs("off"),
          extraCpuUsPerRequest: extraUs,
          logBytesPerRequest: logPerRequest,
          // The CPU the log adds per MB it writes, and per MB of (decoded) answer body it records.
          cpuMsPerMbLogged: logPerRequest > 0 ? extraUs / 1e3 / (logPerRequest / 1e6) : null,
          ...(k.pad > 0 ? { cpuMsPerMbOfBody: extraUs / 1e3 / (((k.pad + 100) * k.n) / (k.n + 1) / 1e6) } : {}),
        };
      }
      report[k.kind] = row;
    }
    return { loads: LOADS, padBytes: PAD, loadAverage: readLoadAverage(), retries, pages: report };
  } finally {
    await browser?.close();
    await stopServices(children);
    origin.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

function readLoadAverage(): string {
  try {
    return execFileSync("cat", ["/proc/loadavg"], { encoding: "utf8" }).trim();
  } catch {
    return "";
  }
}

function inOwnNamespace(): boolean {
  if (process.env.BENCH_NETNS === "1" || process.getuid?.() !== 0) return false;
  return (
    execFileSync("sh", ["-c", "unshare -n true && echo yes || true"], {
      encoding: "utf8",
      stdio: ["ignore", "pipe", "ignore"],
    }).trim() === "yes"
  );
}

if (require.main === module) {
  if (inOwnNamespace()) {
    // Again, in a network namespace with loopback alone: Chromium drops a load when an interface comes or goes.
    const child = spawn(
      "unshare",
      ["-n", "sh", "-c", 'ip link set lo up && exec "$@"', "sh", process.execPath, "--require", "tsx/cjs", __filename],
      { cwd: REPO, env: { ...process.env, BENCH_NETNS: "1" }, stdio: "inherit" },
    );
    child.once("exit", (code) => process.exit(code ?? 1));
  } else {
    const started = readLoadAverage();
    requestLogCost().then(
      (figures) => console.log(JSON.stringify({ loadAverageBefore: started, ...figures })),
      (err: Error) => {
        console.error(`request log cost: ${err.message}`);
        process.exit(1);
      },
    );
  }
}
