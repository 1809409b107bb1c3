// npm run bench:takeover
//
// What a person taking a computer over sees: the time from a key pressed in the viewer to the frame that shows its
// effect (input-to-screen latency), and the frames per second of a screen that changes all the time. Two contenders
// on the same headful Chromium, in one X display (Debian's Xvfb), both watched from a viewer in a headless Chromium:
//   1. multienv's takeover: `watch`'s page (the real watch server, its takeover taken at start) through the real
//      gateway to the computer's DevTools (screencast frames out, DevTools input in);
//   2. x11vnc with noVNC (Debian's packages): x11vnc on the display, websockify serving noVNC's own page
//      (vnc_lite.html), the field's way to hand a person a headful browser (E2B Desktop's).
// Each viewer is measured the same way, in the viewer page: a capture-phase keydown listener stamps the key, and a
// requestAnimationFrame loop reads the centre pixel of what the viewer draws (the watch page's frame image, noVNC's
// canvas) until it shows the colour the key gave the page (the page turns its whole background to a new colour on
// each key). The fps figure counts the distinct pictures each viewer drew in BENCH_FPS_SECONDS of a page that
// changes colour on every animation frame. The contenders take turns, a block of BENCH_BLOCK keys (and one fps window)
// each, so that a machine whose load changes during the run weighs on both alike: measured one after the other, the
// p99 of each was mostly the load of its own minutes.
// Options (env): BENCH_KEYS (40) keys per contender, BENCH_BLOCK (10), BENCH_FPS_SECONDS (5, in windows of one
// second per turn). Needs Xvfb, x11vnc, websockify and
// novnc: apt-get install -y xvfb x11vnc websockify novnc.
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import http from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium, type Browser, type Page } from "playwright-core";
import { CHROMIUM_FLAGS, HEADFUL_CHROMIUM_FLAGS, HEADFUL_SCREEN } from "../src/browser/launcher";
import { computerFeed } from "../src/runner/operator/watch";
import { startWatchServer, type WatchServer } from "../src/runner/operator/watch-server";
import { takeoverGateway } from "../src/runner/operator/takeover";
import { median } from "./kit";
import { freePort, startGateway, waitForPort } from "./loopback";

const TOKEN = "bench-control-token-0123456789abcdef";
const KEYS = Number(process.env.BENCH_KEYS ?? 40);
const BLOCK = Number(process.env.BENCH_BLOCK ?? 10);
const FPS_SECONDS = Number(process.env.BENCH_FPS_SECONDS ?? 5);
// A headful computer's screen, and its Chromium's flags: the bench's computer is one, outside a container.
const { width: WIDTH, height: HEIGHT } = HEADFUL_SCREEN;
const NOVNC = "/usr/share/novnc";

// The computer's page: each key turns the whole page to the next colour of a cycle the viewer can tell apart; with
// ?animate it changes colour on every animation frame (for the fps figure).
const PAGE = `<!doctype html><title>bench</title><style>html,body{margin:0;height:100%;cursor:none}</style>
<body><script>
const colours = ["rgb(255, 0, 0)", "rgb(0, 0, 255)", "rgb(0, 160, 0)", "rgb(255, 255, 0)"];
let n = 0;
document.body.style.background = "rgb(0, 0, 0)";
addEventListener("keydown", () => { document.body.style.background = colours[n++ % colours.length]; });
if (location.search === "?animate") {
  let i = 0;
  const step = () => { i = (i + 37) % 256; document.body.style.background = "rgb(" + i + ", " + (255 - i) + ", 128)"; requestAnimationFrame(step); };
  requestAnimationFrame(step);
}
</script></body>`;
const COLOURS: Array<[number, number, number]> = [
  [255, 0, 0],
  [0, 0, 255],
  [0, 160, 0],
  [255, 255, 0],
];

// Runs in the viewer page: stamps each key and follows what `source()` draws (an <img> or a <canvas>) frame by frame.
const PROBE = `
window.__bench = {
  keyAt: 0,
  sample(el) {
    const c = document.createElement("canvas");
    c.width = 1; c.height = 1;
    const g = c.getContext("2d", { willReadFrequently: true });
    const w = el.naturalWidth || el.width, h = el.naturalHeight || el.height;
    if (!w || !h) return null;
    g.drawImage(el, Math.floor(w / 2), Math.floor(h / 2), 1, 1, 0, 0, 1, 1);
    return Array.from(g.getImageData(0, 0, 1, 1).data.slice(0, 3));
  },
  near(a, b) { return a && Math.abs(a[0] - b[0]) < 48 && Math.abs(a[1] - b[1]) < 48 && Math.abs(a[2] - b[2]) < 48; },
  waitFor(selector, colour, timeoutMs) {
    return new Promise((resolve) => {
      const started = performance.now();
      const look = () => {
        const el = document.querySelector(selector);
        const now = performance.now();
        if (el && this.near(this.sample(el), colour)) return resolve(now - this.keyAt);
        if (now - started > timeoutMs) return resolve(null);
        requestAnimationFrame(look);
      };
      look();
    });
  },
  countPictures(selector, ms) {
    return new Promise((resolve) => {
      let last = null, pictures = 0;
      const end = performance.now() + ms;
      const look = () => {
        const el = document.querySelector(selector);
        const now = el && this.sample(el);
        if (now && (!last || now.join() !== last.join())) { pictures++; last = now; }
        if (performance.now() < end) requestAnimationFrame(look); else resolve(pictures);
      };
      look();
    });
  },
};
addEventListener("keydown", () => { window.__bench.keyAt = performance.now(); }, true);
`;

interface Figures {
  latencyMs: number[];
  misses: number;
  fps: number;
}

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? NaN;
}

function need(binary: string): void {
  try {
    execFileSync("sh", ["-c", `command -v ${binary}`], { stdio: "ignore" });
  } catch {
    throw new Error(`bench:takeover needs ${binary}: apt-get install -y xvfb x11vnc websockify novnc`);
  }
}

async function until<T>(what: string, probe: () => Promise<T | undefined> | T | undefined, ms = 30_000): Promise<T> {
  for (const deadline = Date.now() + ms; Date.now() < deadline;) {
    const value = await probe();
    if (value !== undefined && value !== false) return value;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`timed out waiting for ${what}`);
}

/** Keys the computer's page has had: the colour the next one gives it follows from the count. */
let keysPressed = 0;

/** Presses `keys` keys in the viewer, each turning the computer's page to the next colour; adds each one's latency. */
async function pressKeys(
  viewer: Page,
  selector: string,
  focus: () => Promise<void>,
  keys: number,
  figures: Figures,
): Promise<void> {
  await viewer.bringToFront();
  for (let i = 0; i < keys; i++) {
    await focus();
    const colour = COLOURS[keysPressed++ % COLOURS.length];
    const waiting = viewer.evaluate(`__bench.waitFor(${JSON.stringify(selector)}, ${JSON.stringify(colour)}, 5000)`);
    await viewer.keyboard.press("a");
    const latency = (await waiting) as number | null;
    if (latency === null) figures.misses++;
    else figures.latencyMs.push(latency);
    await new Promise((resolve) => setTimeout(resolve, 150));
  }
}

/** One viewer, as the turns need it: its page, what it draws on, and how it takes the keys. */
interface Viewer {
  page: Page;
  selector: string;
  focus: () => Promise<void>;
  figures: Figures;
}

async function main(): Promise<void> {
  for (const binary of ["Xvfb", "x11vnc", "websockify", "chromium"]) need(binary);
  if (!existsSync(join(NOVNC, "vnc_lite.html")))
    throw new Error("bench:takeover needs noVNC: apt-get install -y novnc");
  const dir = mkdtempSync(join(tmpdir(), "bench-takeover-"));
  const children: ChildProcess[] = [];
  const closers: Array<() => Promise<unknown>> = [];
  let viewerBrowser: Browser | undefined;
  try {
    // The computer: a headful Chromium on its own X display, its page served here.
    const site = http.createServer((_req, res) => res.writeHead(200, { "Content-Type": "text/html" }).end(PAGE));
    await new Promise<void>((resolve) => site.listen(0, "127.0.0.1", resolve));
    closers.push(() => new Promise((resolve) => site.close(resolve)));
    const pageUrl = `http://127.0.0.1:${(site.address() as { port: number }).port}/`;
    const display = 90 + (process.pid % 9);
    const xvfb = spawn("Xvfb", [`:${display}`, "-screen", "0", `${WIDTH}x${HEIGHT}x24`, "-nolisten", "tcp"], {
      stdio: "ignore",
    });
    children.push(xvfb);
    await until("the X display", () => existsSync(`/tmp/.X11-unix/X${display}`) || undefined);
    const cdpPort = await freePort();
    const computer = spawn(
      "/usr/bin/chromium",
      [
        ...HEADFUL_CHROMIUM_FLAGS,
        `--remote-debugging-port=${cdpPort}`,
        `--user-data-dir=${join(dir, "computer")}`,
        pageUrl,
      ],
      { stdio: "ignore", env: { ...process.env, DISPLAY: `:${display}` }, detached: true },
    );
    children.push(computer);
    await waitForPort(cdpPort, 30_000);
    const userAgent = await until("DevTools", async () => {
      const version = await fetch(`http://127.0.0.1:${cdpPort}/json/version`).then(
        (r) => r.json() as Promise<{ "User-Agent": string }>,
        () => undefined,
      );
      return version?.["User-Agent"];
    });

    // multienv: the gateway in front of the computer's DevTools, and watch's page with the computer taken.
    const proxyLog = http.createServer((_req, res) => res.end(""));
    await new Promise<void>((resolve) => proxyLog.listen(0, "127.0.0.1", resolve));
    closers.push(() => new Promise((resolve) => proxyLog.close(resolve)));
    const logUrl = `http://127.0.0.1:${(proxyLog.address() as { port: number }).port}/log`;
    const gateway = await startGateway(
      {
        listen: { host: "127.0.0.1", port: 0 },
        sites: {},
        computers: { agent: { cdp: `http://127.0.0.1:${cdpPort}`, proxyLog: logUrl } },
      },
      TOKEN,
    );
    children.push(gateway.child);
    const gatewayUrl = `http://127.0.0.1:${gateway.port}`;
    const watch: WatchServer = await startWatchServer({
      stack: "bench",
      feeds: { agent: computerFeed({ gatewayUrl, controlToken: TOKEN }, "agent") },
      takeover: { gateway: takeoverGateway(gatewayUrl, TOKEN), operator: "bench", onTakeover: () => undefined },
      takeNow: "agent",
    });
    closers.push(() => watch.close());

    // x11vnc with noVNC on the same display.
    const rfbPort = await freePort();
    const wsPort = await freePort();
    children.push(
      spawn(
        "x11vnc",
        [
          "-display",
          `:${display}`,
          "-rfbport",
          String(rfbPort),
          "-localhost",
          "-nopw",
          "-forever",
          "-shared",
          "-quiet",
        ],
        { stdio: "ignore" },
      ),
    );
    await waitForPort(rfbPort, 30_000);
    children.push(
      spawn("websockify", ["--web", NOVNC, `127.0.0.1:${wsPort}`, `127.0.0.1:${rfbPort}`], { stdio: "ignore" }),
    );
    await waitForPort(wsPort, 30_000);

    viewerBrowser = await chromium.launch({ executablePath: "/usr/bin/chromium", args: CHROMIUM_FLAGS });
    const context = await viewerBrowser.newContext({ viewport: { width: WIDTH + 200, height: HEIGHT + 300 } });
    await context.addInitScript(PROBE);

    // multienv's viewer: the frame image, focused to take the keys.
    const ours = await context.newPage();
    await ours.goto(watch.url);
    await ours.waitForSelector("section.mine", { timeout: 30_000 });
    await until(
      "a frame",
      async () => (await ours.evaluate(`document.querySelector(".screen").width > 0`)) || undefined,
    );

    // noVNC's viewer: its own page, connected to websockify.
    const vnc = await context.newPage();
    await vnc.goto(`http://127.0.0.1:${wsPort}/vnc_lite.html?host=127.0.0.1&port=${wsPort}&scale=false`);
    await vnc.waitForSelector("#screen canvas", { timeout: 30_000 });
    await until(
      "noVNC's first picture",
      async () =>
        (await vnc.evaluate(`__bench.sample(document.querySelector("#screen canvas")) !== null`)) || undefined,
    );
    await vnc.bringToFront();
    // Without a window manager, X gives the keys to the window under the pointer: a click there, as a person's first.
    const box = (await vnc.locator("#screen canvas").boundingBox())!;
    await vnc.mouse.click(box.x + box.width / 2, box.y + box.height / 2);
    const viewers: Viewer[] = [
      {
        page: ours,
        selector: ".screen",
        focus: () => ours.focus(".screen"),
        figures: { latencyMs: [], misses: 0, fps: 0 },
      },
      {
        page: vnc,
        selector: "#screen canvas",
        focus: () => vnc.focus("#screen canvas"),
        figures: { latencyMs: [], misses: 0, fps: 0 },
      },
    ];
    for (let pressed = 0; pressed < KEYS; pressed += BLOCK)
      for (const viewer of viewers)
        await pressKeys(viewer.page, viewer.selector, viewer.focus, Math.min(BLOCK, KEYS - pressed), viewer.figures);
    const [oursFigures, vncFigures] = viewers.map((viewer) => viewer.figures);

    // Frames per second of a page that changes on every animation frame, each viewer in turn.
    const driver = await chromium.connectOverCDP(`http://127.0.0.1:${cdpPort}`);
    const shown = driver
      .contexts()
      .flatMap((c) => c.pages())
      .find((p) => p.url().startsWith(pageUrl));
    if (shown === undefined) throw new Error("the computer's page is not open");
    await shown.goto(`${pageUrl}?animate`);
    if (!(await shown.evaluate(`location.search === "?animate"`))) throw new Error("the animated page did not open");
    await driver.close();
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    for (let second = 0; second < FPS_SECONDS; second++)
      for (const viewer of viewers) {
        await viewer.page.bringToFront();
        // A picture drawn before the window opened is not counted: the first sample is the window's baseline.
        const pictures = (await viewer.page.evaluate(
          `__bench.countPictures(${JSON.stringify(viewer.selector)}, 1000)`,
        )) as number;
        viewer.figures.fps += Math.max(0, pictures - 1) / FPS_SECONDS;
      }

    const figures = {
      keys: KEYS,
      block: BLOCK,
      fpsSeconds: FPS_SECONDS,
      display: `${WIDTH}x${HEIGHT}`,
      headfulUserAgent: !/HeadlessChrome/.test(userAgent),
      takeover: summary(oursFigures),
      vnc: summary(vncFigures),
    };
    const p50Ratio = figures.takeover.latencyP50Ms / figures.vnc.latencyP50Ms;
    const p99Ratio = figures.takeover.latencyP99Ms / figures.vnc.latencyP99Ms;
    const fpsRatio = figures.takeover.fps / figures.vnc.fps;
    const line = (name: string, f: ReturnType<typeof summary>) =>
      `${name.padEnd(22)} key to screen p50 ${f.latencyP50Ms.toFixed(0)} ms, p99 ${f.latencyP99Ms.toFixed(0)} ms (${f.misses} missed of ${KEYS}); ${f.fps.toFixed(1)} fps`;
    process.stdout.write(`${line("takeover (watch)", figures.takeover)}\n`);
    process.stdout.write(`${line("x11vnc + noVNC", figures.vnc)}\n`);
    process.stdout.write(
      `takeover / vnc: latency p50 x${p50Ratio.toFixed(2)}, p99 x${p99Ratio.toFixed(2)} (under 1 is faster), fps x${fpsRatio.toFixed(2)}\n`,
    );
    process.stdout.write(
      JSON.stringify({
        bench: "takeover",
        ...figures,
        latencyP50Ratio: p50Ratio,
        latencyP99Ratio: p99Ratio,
        fpsRatio,
      }) + "\n",
    );
  } finally {
    // Each close bounded: a close that waits on a connection the other side never ends held a finished run open.
    const bounded = (closing: Promise<unknown>) =>
      Promise.race([closing.catch(() => undefined), new Promise((resolve) => setTimeout(resolve, 5_000))]);
    await bounded(viewerBrowser?.close() ?? Promise.resolve());
    for (const close of closers.reverse()) await bounded(close());
    for (const child of children.reverse()) {
      try {
        if (child.pid !== undefined) process.kill(-child.pid, "SIGTERM");
      } catch {
        child.kill("SIGTERM");
      }
    }
    // Chromium writes its profile until it has exited: wait for the processes (5 s at most), then remove their folder.
    await Promise.race([
      Promise.all(
        children.map((child) =>
          child.exitCode !== null || child.signalCode !== null
            ? undefined
            : new Promise((resolve) => child.once("exit", resolve)),
        ),
      ),
      new Promise((resolve) => setTimeout(resolve, 5_000)),
    ]);
    rmSync(dir, { recursive: true, force: true, maxRetries: 5, retryDelay: 200 });
  }
}

function summary(f: Figures) {
  return {
    latencyP50Ms: median(f.latencyMs),
    latencyP99Ms: percentile(f.latencyMs, 99),
    misses: f.misses,
    fps: f.fps,
  };
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    process.stderr.write(`bench:takeover: ${(error as Error).message}\n`);
    process.exit(1);
  },
);
