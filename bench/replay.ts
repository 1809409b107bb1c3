// npm run bench:replay
//
// The replay server (src/replay-server) measured on loopback:
//   - memory per MB of recording: the server's resident set (VmRSS) once a HAR of BENCH_REPLAY_MB megabytes is
//     loaded and indexed, less the same server's over a HAR of one entry, divided by the file's size; the same for
//     its own heap figure (V8 heap in use plus array buffers, after the collection main.ts makes under --expose-gc,
//     as the image runs it); and its peak (VmHWM), as loading parses the whole JSON text at once;
//   - a page load (a page with BENCH_REPLAY_SUBRESOURCES scripts, styles and images) in this machine's Chromium,
//     the median of BENCH_LOADS loads each in a fresh context, from three contenders alternating load by load:
//       live       a node HTTP server answering the same bytes from memory (what the recorded site sent),
//       replay     the replay server over the HAR of that page,
//       playwright Playwright's routeFromHAR over the same HAR (the field's HAR replay).
//     Each load's answers are checked: a replayed subresource that failed would make a fast load a wrong one.
//   - a large JSON request body (BENCH_REPLAY_BODY_MB sizes, default 1 and 16 MiB, the limit): the server's CPU
//     time for it (/proc/<pid>/stat), its peak memory above where it was (VmHWM), and how long a GET sent right
//     behind it waited, for two shapes: one-digit numbers in one array, and the same under a 200-member path
//     (each leaf's label 400 characters long). BENCH_REPLAY_MAIN runs another checkout's server (an A/B's before);
//     BENCH_REPLAY_ONLY=bodies measures these alone.
// One JSON line at the end.
import { spawn } from "node:child_process";
import { readFileSync, mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import http from "node:http";
import { request as undiciRequest } from "undici";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium, type Browser, type BrowserContext } from "playwright-core";

const MB = Number(process.env.BENCH_REPLAY_MB ?? 50);
const SUBRESOURCES = Number(process.env.BENCH_REPLAY_SUBRESOURCES ?? 40);
const LOADS = Number(process.env.BENCH_LOADS ?? 15);
const MAIN = process.env.BENCH_REPLAY_MAIN ?? join(__dirname, "..", "src", "replay-server", "main.ts");
const BODY_SIZES_MB = (process.env.BENCH_REPLAY_BODY_MB ?? "1,16").split(",").map(Number);
const TOKEN = "bench-replay-token-0123456789abcdefghijklmn";
const HOST = "shop.example";
/** A 1x1 transparent PNG. */
const TINY_PNG = Buffer.from(
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=",
  "base64",
);

interface Resource {
  path: string;
  type: string;
  body: Buffer;
  text: boolean;
}

function entryOf(resource: Resource, started: number): Record<string, unknown> {
  return {
    startedDateTime: new Date(started).toISOString(),
    time: 5,
    request: {
      method: "GET",
      url: `http://${HOST}${resource.path}`,
      httpVersion: "HTTP/1.1",
      headers: [{ name: "Accept", value: "*/*" }],
      queryString: [],
      cookies: [],
      headersSize: -1,
      bodySize: 0,
    },
    response: {
      status: 200,
      statusText: "OK",
      httpVersion: "HTTP/1.1",
      headers: [
        { name: "Content-Type", value: resource.type },
        { name: "Cache-Control", value: "no-store" },
      ],
      cookies: [],
      content: resource.text
        ? { size: resource.body.length, mimeType: resource.type, text: resource.body.toString("utf8") }
        : {
            size: resource.body.length,
            mimeType: resource.type,
            text: resource.body.toString("base64"),
            encoding: "base64",
          },
      redirectURL: "",
      headersSize: -1,
      bodySize: -1,
    },
    cache: {},
    timings: { send: 0, wait: 4, receive: 1 },
  };
}

function writeHar(file: string, resources: Resource[]): number {
  const start = Date.parse("2024-03-01T12:00:00Z");
  const entries = resources.map((resource, i) => entryOf(resource, start + i));
  writeFileSync(file, JSON.stringify({ log: { version: "1.2", creator: { name: "bench", version: "1" }, entries } }));
  return statSync(file).size;
}

/** A site's worth of resources of about `mb` MB: pages, scripts (text) and images (binary, base64 in the HAR). */
function siteOf(mb: number): Resource[] {
  const resources: Resource[] = [];
  let bytes = 0;
  for (let i = 0; bytes < mb * 1e6; i++) {
    const kind = i % 3;
    const size = [20_000, 60_000, 40_000][kind];
    const body =
      kind === 2
        ? Buffer.from(Array.from({ length: size }, (_, j) => (j * 31 + i) & 0xff))
        : Buffer.from(`/* ${i} */` + "x".repeat(size));
    const path = [`/page/${i}`, `/js/${i}.js`, `/img/${i}.png`][kind];
    const type = ["text/html", "text/javascript", "image/png"][kind];
    resources.push({ path, type, body, text: kind !== 2 });
    bytes += kind === 2 ? Math.ceil(size / 3) * 4 : size;
  }
  return resources;
}

function pageOf(count: number): Resource[] {
  const subresources: Resource[] = [];
  for (let i = 0; i < count; i++) {
    const kind = i % 3;
    if (kind === 0)
      subresources.push({
        path: `/s/${i}.js`,
        type: "text/javascript",
        body: Buffer.from(`window.n=(window.n||0)+1;/*${"j".repeat(20_000)}*/`),
        text: true,
      });
    else if (kind === 1)
      subresources.push({
        path: `/s/${i}.css`,
        type: "text/css",
        body: Buffer.from(`.c${i}{color:red}/*${"c".repeat(10_000)}*/`),
        text: true,
      });
    else subresources.push({ path: `/s/${i}.png`, type: "image/png", body: TINY_PNG, text: false });
  }
  const tags = subresources
    .map((r) =>
      r.path.endsWith(".js")
        ? `<script src="${r.path}"></script>`
        : r.path.endsWith(".css")
          ? `<link rel="stylesheet" href="${r.path}">`
          : `<img src="${r.path}">`,
    )
    .join("\n");
  const page: Resource = {
    path: "/",
    type: "text/html",
    body: Buffer.from(
      `<!doctype html><html><head><title>bench</title></head><body><h1>bench</h1>\n${tags}</body></html>`,
    ),
    text: true,
  };
  return [page, ...subresources];
}

interface Spawned {
  pid: number;
  port: number;
  /** The server's own figure once loaded: V8 heap in use plus array buffers (the bodies), MB. */
  heapMB: number;
  stop(): Promise<void>;
}

function startReplay(file: string): Promise<Spawned> {
  const child = spawn(process.execPath, ["--expose-gc", "--require", "tsx/cjs", MAIN], {
    env: {
      ...process.env,
      MULTIENV_REPLAY_SERVER_CONFIG: JSON.stringify({
        listen: { host: "127.0.0.1", port: 0 },
        control: { host: "127.0.0.1", port: 0 },
        recording: file,
      }),
      MULTIENV_REPLAY_SERVER_TOKEN: TOKEN,
    },
    stdio: ["ignore", "pipe", "inherit"],
  });
  return new Promise((resolve, reject) => {
    let buffered = "";
    child.stdout.on("data", (chunk: Buffer) => {
      buffered += chunk.toString();
      const line = buffered.split("\n").find((l) => l.includes('"listening"'));
      if (line)
        resolve({
          pid: child.pid!,
          port: JSON.parse(line).port,
          heapMB: JSON.parse(line).heapMB,
          stop: () =>
            new Promise((done) => {
              if (child.exitCode !== null || child.signalCode !== null) return done();
              child.once("exit", () => done());
              child.kill("SIGTERM");
            }),
        });
    });
    child.once("exit", (code) => reject(new Error(`replay server exited ${code}`)));
  });
}

function memoryOf(pid: number): { rssMB: number; peakMB: number } {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const kb = (name: string) => Number(new RegExp(`${name}:\\s+(\\d+)`).exec(status)![1]);
  return { rssMB: kb("VmRSS") / 1024, peakMB: kb("VmHWM") / 1024 };
}

async function measureMemory(dir: string): Promise<Record<string, number>> {
  const tiny = join(dir, "tiny.har");
  writeHar(tiny, pageOf(0));
  const big = join(dir, "big.har");
  const bigBytes = writeHar(big, siteOf(MB));
  const base = await startReplay(tiny);
  const baseHeapMB = base.heapMB;
  await new Promise((r) => setTimeout(r, 500));
  const baseline = memoryOf(base.pid);
  await base.stop();
  const loaded = await startReplay(big);
  await new Promise((r) => setTimeout(r, 500));
  const after = memoryOf(loaded.pid);
  await loaded.stop();
  const fileMB = bigBytes / 1e6;
  const round = (n: number) => Math.round(n * 100) / 100;
  return {
    recordingMB: round(fileMB),
    baselineRssMB: round(baseline.rssMB),
    loadedRssMB: round(after.rssMB),
    loadedPeakMB: round(after.peakMB),
    rssPerRecordingMB: round((after.rssMB - baseline.rssMB) / fileMB),
    heapPerRecordingMB: round((loaded.heapMB - baseHeapMB) / fileMB),
    peakPerRecordingMB: round((after.peakMB - baseline.rssMB) / fileMB),
  };
}

async function loadTime(context: BrowserContext, url: string): Promise<number> {
  const page = await context.newPage();
  const failed: string[] = [];
  page.on("requestfailed", (request) => failed.push(request.url()));
  page.on("response", (response) => response.status() >= 400 && failed.push(`${response.status()} ${response.url()}`));
  await page.goto(url, { waitUntil: "load" });
  const ms = (await page.evaluate(
    "(() => { const n = performance.getEntriesByType('navigation')[0]; return n.loadEventStart - n.startTime; })()",
  )) as number;
  if (failed.length > 0) throw new Error(`a load went wrong: ${failed.slice(0, 3).join(", ")}`);
  const scripts = (await page.evaluate("window.n")) as number;
  if (scripts !== Math.ceil(SUBRESOURCES / 3)) throw new Error(`only ${scripts} scripts ran`);
  return ms;
}

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  return Math.round(sorted[Math.floor(sorted.length / 2)] * 10) / 10;
};

async function measureLoads(dir: string): Promise<Record<string, number>> {
  const resources = pageOf(SUBRESOURCES);
  const file = join(dir, "page.har");
  writeHar(file, resources);
  const byPath = new Map(resources.map((r) => [r.path, r]));
  const live = http.createServer((req, res) => {
    const resource = byPath.get(req.url ?? "");
    if (!resource) return res.writeHead(404).end();
    res.writeHead(200, {
      "Content-Type": resource.type,
      "Cache-Control": "no-store",
      "Content-Length": resource.body.length,
    });
    res.end(resource.body);
  });
  await new Promise<void>((r) => live.listen(0, "127.0.0.1", r));
  const livePort = (live.address() as AddressInfo).port;
  const replay = await startReplay(file);
  const launch = (port: number) =>
    chromium.launch({
      executablePath: "/usr/bin/chromium",
      args: ["--no-sandbox", `--host-resolver-rules=MAP ${HOST} 127.0.0.1:${port}`],
    });
  const browsers: Record<string, Browser> = {
    live: await launch(livePort),
    replay: await launch(replay.port),
    // routeFromHAR answers from the HAR before any request leaves the browser; the port it would go to is closed.
    playwright: await launch(1),
  };
  const times: Record<string, number[]> = { live: [], replay: [], playwright: [] };
  try {
    for (let i = 0; i < LOADS + 1; i++) {
      for (const name of Object.keys(browsers)) {
        const context = await browsers[name].newContext();
        if (name === "playwright") await context.routeFromHAR(file, { notFound: "abort" });
        const ms = await loadTime(context, `http://${HOST}/`);
        if (i > 0) times[name].push(ms); // the first round warms each browser up
        await context.close();
      }
    }
  } finally {
    for (const browser of Object.values(browsers)) await browser.close();
    await replay.stop();
    live.close();
  }
  return {
    subresources: SUBRESOURCES,
    loads: LOADS,
    liveLoadMs: median(times.live),
    replayLoadMs: median(times.replay),
    playwrightRouteFromHarLoadMs: median(times.playwright),
  };
}

/** CPU seconds a process has used (user and system), from /proc/<pid>/stat. */
function cpuSecondsOf(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** One large JSON body against the server at `port`: its CPU, its peak memory, and a GET's wait behind it. */
async function measureBody(
  server: Spawned,
  body: Buffer,
): Promise<{ cpuS: number; peakMB: number; getWaitMs: number }> {
  const before = memoryOf(server.pid);
  const cpuBefore = cpuSecondsOf(server.pid);
  const posted = new Promise<void>((resolve, reject) => {
    const req = http.request({
      port: server.port,
      host: "127.0.0.1",
      path: "/api/save",
      method: "POST",
      headers: { "X-Forwarded-Host": HOST, "Content-Type": "application/json", "Content-Length": body.length },
    });
    req.once("error", reject);
    req.once("response", (res) => res.resume().once("end", () => resolve()));
    req.end(body, () => {
      const sent = performance.now();
      void undiciRequest(`http://127.0.0.1:${server.port}/`, { headers: { "X-Forwarded-Host": HOST } })
        .then((answer) => answer.body.dump())
        .then(() => (getWaitMs = performance.now() - sent));
    });
  });
  let getWaitMs = NaN;
  await posted;
  while (Number.isNaN(getWaitMs)) await new Promise((r) => setTimeout(r, 10));
  const after = memoryOf(server.pid);
  return {
    cpuS: Math.round((cpuSecondsOf(server.pid) - cpuBefore) * 100) / 100,
    peakMB: Math.round(Math.max(0, after.peakMB - Math.max(before.peakMB, before.rssMB))),
    getWaitMs: Math.round(getWaitMs),
  };
}

async function measureBodies(dir: string): Promise<Record<string, number>> {
  const file = join(dir, "bodies.har");
  const page: Resource = { path: "/", type: "text/plain", body: Buffer.from("home"), text: true };
  writeHar(file, [page]);
  // The HAR's one entry is a GET of /; a POST of /api/save is a miss, after its body is read as fields.
  const out: Record<string, number> = {};
  for (const mb of BODY_SIZES_MB) {
    const leaves = Math.floor((mb * 1024 * 1024 - 2) / 2) - 2400;
    const flat = Buffer.from(`[${"1,".repeat(leaves - 1)}1]`);
    const deep = Buffer.from(`${'{"a":'.repeat(200)}[${"1,".repeat(leaves - 1)}1]${"}".repeat(200)}`);
    for (const [shape, body] of [
      ["flat", flat],
      ["deepPath", deep],
    ] as const) {
      // A fresh server each time: one that died of the last body measures nothing.
      const server = await startReplay(file);
      try {
        const figures = await measureBody(server, body);
        out[`body${mb}MiB_${shape}_cpuS`] = figures.cpuS;
        out[`body${mb}MiB_${shape}_peakMB`] = figures.peakMB;
        out[`body${mb}MiB_${shape}_getWaitMs`] = figures.getWaitMs;
      } catch (error) {
        out[`body${mb}MiB_${shape}_failed`] = 1;
        process.stderr.write(`bench:replay: a ${mb} MiB ${shape} body: ${(error as Error).message}\n`);
      } finally {
        await server.stop().catch(() => undefined);
      }
    }
  }
  return out;
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "multienv-bench-replay-"));
  try {
    if (process.env.BENCH_REPLAY_ONLY === "bodies") {
      process.stdout.write(JSON.stringify({ bench: "replay", ...(await measureBodies(dir)) }) + "\n");
      return;
    }
    const memory = await measureMemory(dir);
    const bodies = await measureBodies(dir);
    const loads = await measureLoads(dir);
    process.stdout.write(JSON.stringify({ bench: "replay", ...memory, ...bodies, ...loads }) + "\n");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((error: Error) => {
  process.stderr.write(`bench:replay: ${error.message}\n`);
  process.exit(1);
});
