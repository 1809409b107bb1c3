// `multienv watch`'s page and feeds, and the screenshot and tabs they share with `status`: the page behind its
// secret (403 otherwise, the live channel too), the feeds running only while someone watches, and the real feed and
// screenshot on a real headless Chromium behind the real gateway, on loopback.
import { randomBytes } from "node:crypto";
import { appendFileSync, closeSync, openSync, writeSync } from "node:fs";
import http from "node:http";
import net from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { chromium, type Browser, type Page } from "playwright-core";
import { WebSocket } from "ws";
import {
  computerTabs,
  DEVTOOLS_STEP_MS,
  screenshotComputer,
  screenshotFileName,
} from "../../src/runner/operator/screens";
import { failureText, note, say } from "../../src/runner/commands/common";
import type { StackStatus } from "../../src/runner/operator/operator";
import { formatScreenshots, formatStatus } from "../../src/runner/operator/format";
import { computerFeed } from "../../src/runner/operator/watch";
import { startWatchServer, type Feed, type FeedEvent } from "../../src/runner/operator/watch-server";
import { watchMessages } from "../helpers/watch";
import { computerControlToken } from "../../src/protocol/auth";
import { cleanup, onCleanup } from "../helpers/processes";
import { startChromium } from "../helpers/chromium";
import { startHttpServer } from "../helpers/servers";
import { until } from "../helpers/until";
import { startProxy } from "../site-proxy/helpers";
import { startTestGateway } from "./helpers";
import { TOKEN } from "../gateway/helpers";

afterAll(cleanup);

/** What `print` writes to stdout and stderr, caught. */
async function stdoutOf(print: () => void): Promise<string> {
  const written: string[] = [];
  const out = process.stdout.write.bind(process.stdout);
  const err = process.stderr.write.bind(process.stderr);
  const catchText = (chunk: unknown) => (written.push(String(chunk)), true);
  process.stdout.write = catchText as typeof process.stdout.write;
  process.stderr.write = catchText as typeof process.stderr.write;
  try {
    print();
  } finally {
    process.stdout.write = out;
    process.stderr.write = err;
  }
  return written.join("");
}

/** A feed that records when it runs and lets the test emit. */
function fakeFeed() {
  const feed = {
    starts: 0,
    stops: 0,
    emit: undefined as ((event: FeedEvent) => void) | undefined,
    async start(emit: (event: FeedEvent) => void) {
      feed.starts += 1;
      feed.emit = emit;
    },
    async stop() {
      feed.stops += 1;
      feed.emit = undefined;
    },
  };
  return feed satisfies Feed;
}

/** A viewer on the live channel, collecting its messages. */
async function viewer(url: string, headers: Record<string, string> = {}) {
  const ws = new WebSocket(`${url.replace(/^http/, "ws")}live`, { headers });
  const messages = watchMessages(ws);
  await new Promise<void>((resolve, reject) => {
    ws.once("open", () => resolve());
    ws.once("error", reject);
  });
  return { ws, messages };
}

/** The status a WebSocket to `url` is answered with instead of opening. */
function upgradeStatus(url: string, headers: Record<string, string> = {}): Promise<number> {
  return new Promise((resolve) => {
    const ws = new WebSocket(url, { headers });
    ws.on("unexpected-response", (_req, res) => resolve(res.statusCode ?? 0));
    ws.on("open", () => (ws.close(), resolve(101)));
    ws.on("error", () => resolve(-1));
  });
}

describe("the watch page", () => {
  it("answers only under its secret, on 127.0.0.1", async () => {
    const server = await startWatchServer({ stack: "demo", feeds: { desktop: fakeFeed() } });
    try {
      expect(server.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/[0-9a-f]{64}\/$/);
      const origin = new URL(server.url).origin;
      const secret = new URL(server.url).pathname.split("/")[1];
      const page = await fetch(server.url);
      expect(page.status).toBe(200);
      expect(page.headers.get("content-security-policy")).toContain("default-src 'none'");
      expect(page.headers.get("referrer-policy")).toBe("no-referrer");
      expect(await page.text()).toContain('<section data-computer="desktop">');
      for (const wrong of [
        `${origin}/`,
        `${origin}/favicon.ico`,
        `${origin}/${secret.slice(0, -1)}${secret.endsWith("0") ? "1" : "0"}/`,
        `${origin}/${secret.slice(1)}/`,
        `${origin}/${secret}/other`,
        `${origin}/?${secret}`,
      ])
        expect((await fetch(wrong)).status, wrong).toBe(403);
      expect((await fetch(server.url.slice(0, -1), { redirect: "manual" })).headers.get("location")).toBe(
        `/${secret}/`,
      );
      const ws = origin.replace("http", "ws");
      expect(await upgradeStatus(`${ws}/live`)).toBe(403);
      expect(await upgradeStatus(`${ws}/${"0".repeat(64)}/live`)).toBe(403);
      // The right secret from another site's page: refused by its Origin.
      expect(await upgradeStatus(`${ws}/${secret}/live`, { Origin: "http://evil.test" })).toBe(403);
      expect(await upgradeStatus(`${ws}/${secret}/live`, { Origin: origin })).toBe(101);
    } finally {
      await server.close();
    }
  });

  it("runs the feeds only while someone watches, and sends their events to every viewer", async () => {
    const desktop = fakeFeed();
    const open = fakeFeed();
    const server = await startWatchServer({ stack: "demo", feeds: { desktop, open } });
    try {
      expect([desktop.starts, server.feeding()]).toEqual([0, false]);
      const first = await viewer(server.url);
      await until("the feeds to start", () => desktop.starts === 1 && open.starts === 1);
      expect(first.messages[0]).toEqual({
        type: "hello",
        stack: "demo",
        computers: ["desktop", "open"],
        takeover: false,
      });
      const second = await viewer(server.url);
      desktop.emit!({ type: "frame", data: "AAAA" });
      desktop.emit!({ type: "url", url: "https://shop.test/", title: "Synthetic shop" });
      open.emit!({
        type: "log",
        lines: [{ time: "t", event: "refused", method: "GET", host: "x", port: 80, why: "y" }],
      });
      await until("the events", () => second.messages.length >= 4);
      for (const v of [first, second])
        expect(v.messages.slice(-3)).toEqual([
          { type: "frame", computer: "desktop", data: "AAAA" },
          { type: "url", computer: "desktop", url: "https://shop.test/", title: "Synthetic shop" },
          {
            type: "log",
            computer: "open",
            lines: [{ time: "t", event: "refused", method: "GET", host: "x", port: 80, why: "y" }],
          },
        ]);
      // Read-only: what a viewer sends goes nowhere, and the feeds started once for both viewers.
      first.ws.send(JSON.stringify({ type: "navigate", url: "https://evil.test/" }));
      expect(desktop.starts).toBe(1);

      first.ws.close();
      await new Promise((r) => setTimeout(r, 200));
      expect(desktop.stops).toBe(0);
      second.ws.close();
      await until("the feeds to stop", () => desktop.stops === 1 && open.stops === 1 && !server.feeding());

      // A viewer who comes later sees at once what the feeds last showed, and starts them again.
      const later = await viewer(server.url);
      await until("the feeds to start again", () => desktop.starts === 2);
      await until("the last state", () => later.messages.length >= 4);
      expect(later.messages.map((m) => m.type)).toEqual(["hello", "url", "frame", "log"]);
      later.ws.close();
      await until("the feeds to stop again", () => desktop.stops === 2);
    } finally {
      await server.close();
    }
  });

  it("gives a viewer that stops reading the newest frame once it reads again, never a queue of stale ones", async () => {
    const desktop = fakeFeed();
    const server = await startWatchServer({ stack: "demo", feeds: { desktop } });
    // A viewer on a raw socket that does the handshake and then reads nothing: a slow or stalled browser tab.
    const { port, pathname } = new URL(server.url);
    const socket = net.connect(Number(port), "127.0.0.1");
    onCleanup(() => socket.destroy());
    const received: Buffer[] = [];
    socket.on("data", (chunk) => received.push(chunk));
    socket.write(
      `GET ${pathname}live HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
        `Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n`,
    );
    try {
      await until("the feed to start", () => desktop.starts === 1);
      socket.pause();
      // 200 frames of 256 KiB while it reads nothing: 50 MiB, far more than any socket buffer holds.
      const FRAMES = 200;
      const picture = "A".repeat(256 * 1024);
      for (let i = 1; i <= FRAMES; i++) {
        desktop.emit!({ type: "frame", data: Buffer.from(`${i}:${picture}`).toString("base64") });
        await new Promise((r) => setImmediate(r));
      }
      await new Promise((r) => setTimeout(r, 300));
      socket.resume();
      const frames = () => {
        const text = Buffer.concat(received).toString("latin1");
        // Each frame's header (a frame, of the first computer) and then its picture.
        return [...text.matchAll(new RegExp(`${String.fromCharCode(1, 0, 0)}(\\d+):`, "g"))].map((m) => Number(m[1]));
      };
      // The screen was still after the last frame: nothing else would have shown it.
      await until("the newest frame", () => frames().at(-1) === FRAMES, 20_000);
      const shown = frames();
      expect(shown.length).toBeLessThan(FRAMES / 2);
      expect([...shown].sort((a, b) => a - b)).toEqual(shown);
    } finally {
      await server.close();
    }
  });

  it("sends each frame as one binary message: its computer's place in the page's list, then the JPEG whole", async () => {
    const desktop = fakeFeed();
    const open = fakeFeed();
    const server = await startWatchServer({ stack: "demo", feeds: { desktop, open } });
    const ws = new WebSocket(`${server.url.replace(/^http/, "ws")}live`);
    const binary: Buffer[] = [];
    ws.on("message", (data: Buffer, isBinary) => {
      if (isBinary) binary.push(data);
    });
    try {
      await until("the feeds to start", () => open.starts === 1 && desktop.starts === 1);
      // Every byte value, and a picture larger than one TCP segment or WebSocket frame a browser reads at once.
      const jpeg = Buffer.concat([Buffer.from([0xff, 0xd8]), randomBytes(300 * 1024), Buffer.from([0xff, 0xd9])]);
      open.emit!({ type: "frame", data: jpeg.toString("base64") });
      await until("the frame", () => binary.length === 1);
      expect([...binary[0].subarray(0, 3)]).toEqual([1, 0, 1]);
      expect(binary[0].subarray(3).equals(jpeg)).toBe(true);
    } finally {
      ws.close();
      await server.close();
    }
  });

  it("shows a feed that cannot start as that computer's error", async () => {
    const broken: Feed = {
      start: async () => {
        throw new Error("computer desktop's browser did not answer");
      },
      stop: async () => undefined,
    };
    const server = await startWatchServer({ stack: "demo", feeds: { desktop: broken } });
    try {
      const v = await viewer(server.url);
      await until("the error", () => v.messages.some((m) => m.type === "error"));
      expect(v.messages.find((m) => m.type === "error")).toEqual({
        type: "error",
        computer: "desktop",
        message: "computer desktop's browser did not answer",
      });
      v.ws.close();
    } finally {
      await server.close();
    }
  });
});

describe("the watch page in a browser", () => {
  it("shows each computer's frames, URL and log lines, what a computer shows written as text", async () => {
    const desktop = fakeFeed();
    const server = await startWatchServer({ stack: "demo", feeds: { desktop } });
    const browser = await chromium.launch({
      executablePath: "/usr/bin/chromium",
      args: ["--no-sandbox", "--disable-gpu"],
    });
    try {
      const page = await browser.newPage();
      const errors: string[] = [];
      page.on("pageerror", (e) => errors.push(e.message));
      await page.goto(server.url);
      await until("the feed to start", () => desktop.starts === 1, 10_000);
      const hostile = `<img src=x onerror="document.title='owned'">`;
      desktop.emit!({ type: "frame", data: await jpegOf(browser, { width: 64, height: 48, colour: [220, 20, 20] }) });
      desktop.emit!({ type: "url", url: `https://shop.test/${hostile}`, title: hostile });
      desktop.emit!({
        type: "log",
        lines: [
          { time: "2026-01-01T10:11:12Z", event: "refused", method: "CONNECT", host: hostile, port: 443, why: "x" },
        ],
      });
      const panel = page.locator('section[data-computer="desktop"]');
      await until(
        "the URL",
        async () => (await panel.locator(".url").textContent()) === `https://shop.test/${hostile}`,
      );
      await until("the frame drawn", async () => near(await screenOf(page, "desktop"), [220, 20, 20]));
      expect(await panel.locator("canvas.screen").evaluate((c: any) => [c.width, c.height])).toEqual([64, 48]);
      expect(await panel.locator(".log li").textContent()).toBe(`10:11:12 refused CONNECT ${hostile}:443 (x)`);
      expect(await panel.locator(".log li").getAttribute("class")).toBe("refused");
      // Nothing of it became markup: no image at all, the screen is a canvas.
      expect(await page.locator("img").count()).toBe(0);
      expect(await page.title()).toBe("multienv watch demo");
      expect(errors).toEqual([]);
      await page.close();
      await until("the feed to stop once the page is gone", () => desktop.stops === 1, 10_000);
    } finally {
      await browser.close();
      await server.close();
    }
  });

  it("draws the newest frame, never an older one whose decoding ended later", async () => {
    const desktop = fakeFeed();
    const server = await startWatchServer({ stack: "demo", feeds: { desktop } });
    const browser = await chromium.launch({
      executablePath: "/usr/bin/chromium",
      args: ["--no-sandbox", "--disable-gpu"],
    });
    try {
      // A picture slow to decode (millions of noisy pixels), then a small one that decodes at once: the page gets
      // them in that order, and the small one is the screen's last word.
      const slow = await jpegOf(browser, { width: 3000, height: 2000, colour: [20, 200, 20], noise: true });
      const small = await jpegOf(browser, { width: 64, height: 48, colour: [20, 20, 220] });
      const red = await jpegOf(browser, { width: 64, height: 48, colour: [220, 20, 20] });
      const page = await browser.newPage();
      await page.goto(server.url);
      await until("the feed to start", () => desktop.starts === 1, 10_000);
      for (let i = 0; i < 3; i++) {
        desktop.emit!({ type: "frame", data: slow });
        desktop.emit!({ type: "frame", data: small });
        await until("the small frame drawn", async () => near(await screenOf(page, "desktop"), [20, 20, 220]));
        // Long enough for the slow picture's decoding to have ended, many times over.
        await new Promise((r) => setTimeout(r, 1_000));
        expect(near(await screenOf(page, "desktop"), [20, 20, 220])).toBe(true);
        // A frame of another colour in between, so each round starts from a picture that is not the small one.
        desktop.emit!({ type: "frame", data: red });
        await until("the red frame drawn", async () => near(await screenOf(page, "desktop"), [220, 20, 20]));
      }
    } finally {
      await browser.close();
      await server.close();
    }
  });
});

/** A JPEG (base64) of one colour, or of noise around it, made by Chromium's own encoder. */
async function jpegOf(
  browser: Browser,
  picture: { width: number; height: number; colour: [number, number, number]; noise?: boolean },
): Promise<string> {
  const page = await browser.newPage();
  try {
    return await page.evaluate(({ width, height, colour, noise }) => {
      const canvas = (globalThis as any).document.createElement("canvas");
      canvas.width = width;
      canvas.height = height;
      const g = canvas.getContext("2d");
      const pixels = g.createImageData(width, height);
      for (let i = 0; i < pixels.data.length; i += 4) {
        const jitter = noise ? Math.floor(Math.random() * 60) - 30 : 0;
        pixels.data[i] = colour[0] + jitter;
        pixels.data[i + 1] = colour[1] + jitter;
        pixels.data[i + 2] = colour[2] + jitter;
        pixels.data[i + 3] = 255;
      }
      // The centre stays the plain colour, so the picture reads as it.
      g.putImageData(pixels, 0, 0);
      g.fillStyle = `rgb(${colour.join(",")})`;
      g.fillRect(width / 2 - 8, height / 2 - 8, 16, 16);
      return canvas.toDataURL("image/jpeg", 0.95).split(",")[1];
    }, picture);
  } finally {
    await page.close();
  }
}

/** The centre pixel of a computer's screen on the watch page. */
function screenOf(page: Page, computer: string): Promise<number[] | null> {
  return page.locator(`section[data-computer="${computer}"] canvas.screen`).evaluate((c: any) => {
    if (c.width === 0) return null;
    return Array.from(
      c
        .getContext("2d")
        .getImageData(c.width >> 1, c.height >> 1, 1, 1)
        .data.slice(0, 3),
    );
  });
}

function near(pixel: number[] | null, colour: number[]): boolean {
  return pixel !== null && pixel.every((v, i) => Math.abs(v - colour[i]) < 40);
}

describe("a computer's screen over DevTools through the gateway", () => {
  let access: { gatewayUrl: string; controlToken: string };
  let agent: Browser;
  let site: { url: string };
  const log = [
    { event: "startup", time: "2026-01-01T00:00:00Z" },
    { event: "request", time: "2026-01-01T00:00:01Z", method: "GET", host: "shop.test", port: 443, status: 200 },
  ];

  beforeAll(async () => {
    const browser = await startChromium();
    site = await startHttpServer((req) =>
      req.url === "/two"
        ? `<!doctype html><title>Two</title><body style="background: rgb(200, 20, 20)">two</body>`
        : `<!doctype html><title>One</title><body style="background: rgb(20, 20, 200)">one</body>`,
    );
    const proxyLog = await startHttpServer(() => log.map((r) => JSON.stringify(r) + "\n").join(""));
    const gateway = await startTestGateway({
      sites: { shop: { server: "http://127.0.0.1:9" } },
      computers: { agent: { cdp: browser.cdp, proxyLog: `${proxyLog.url}/log` } },
    });
    access = { gatewayUrl: gateway.url, controlToken: TOKEN };
    // The agent's own connection, as an agent holds one.
    agent = await chromium.connectOverCDP(`${gateway.url}/computers/agent/cdp`, {
      headers: { Authorization: `Bearer ${TOKEN}` },
    });
    await agent.contexts()[0].pages()[0].goto(`${site.url}/one`);
  });

  afterAll(async () => {
    await agent?.close().catch(() => undefined);
  });

  it("says a browser that does not answer is that computer's error, and keeps trying", async () => {
    const gateway = await startTestGateway({
      sites: { shop: { server: "http://127.0.0.1:9" } },
      computers: { ghost: { cdp: "http://127.0.0.1:9" } },
    });
    const feed = computerFeed({ gatewayUrl: gateway.url, controlToken: TOKEN }, "ghost");
    const events: FeedEvent[] = [];
    await feed.start((event) => events.push(event));
    try {
      const tries = () => events.filter((e) => e.type === "error" && /did not answer on DevTools/.test(e.message));
      await until("two tries", () => tries().length >= 2, 20_000);
      expect((tries()[0] as { message: string }).message).toMatch(
        /^computer ghost's browser did not answer on DevTools through the gateway: .*; trying again$/,
      );
    } finally {
      await feed.stop();
    }
  });

  it("gives up on a browser that never answers, in bounded time, naming the step and the computer", async () => {
    const silent = http.createServer(() => undefined);
    await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
    onCleanup(() => (silent.closeAllConnections(), new Promise((resolve) => silent.close(resolve))));
    const gateway = await startTestGateway({
      sites: { shop: { server: "http://127.0.0.1:9" } },
      computers: { mute: { cdp: `http://127.0.0.1:${(silent.address() as net.AddressInfo).port}` } },
    });
    const mute = { gatewayUrl: gateway.url, controlToken: TOKEN };
    for (const step of [() => computerTabs(mute, "mute"), () => screenshotComputer(mute, "mute")]) {
      const started = Date.now();
      await expect(step()).rejects.toThrow(
        /^computer mute's DevTools target list \(GET \/computers\/mute\/cdp\/json\/list\): (no answer|HTTP 50\d)/,
      );
      expect(Date.now() - started).toBeLessThan(DEVTOOLS_STEP_MS + 2_000);
    }
  }, 60_000);

  it("lists the open tabs and takes a PNG of the visible one", async () => {
    expect(await computerTabs(access, "agent")).toEqual([{ url: `${site.url}/one`, title: "One" }]);
    const shot = await screenshotComputer(access, "agent");
    expect(shot.url).toBe(`${site.url}/one`);
    expect(shot.title).toBe("One");
    expect(shot.png.subarray(1, 4).toString("latin1")).toBe("PNG");
    expect(screenshotFileName("agent", new Date("2026-01-02T03:04:05.678Z"))).toBe(
      "agent-2026-01-02T03-04-05-678Z.png",
    );
  });

  it("streams frames of the visible tab, its URL as it navigates, and the proxy log's lines", async () => {
    const feed = computerFeed(access, "agent");
    const events: FeedEvent[] = [];
    await feed.start((event) => events.push(event));
    try {
      await until("a first frame", () => events.some((e) => e.type === "frame"), 20_000);
      expect(events.find((e) => e.type === "url")).toEqual({ type: "url", url: `${site.url}/one`, title: "One" });
      expect(events.find((e) => e.type === "log")).toEqual({
        type: "log",
        lines: [
          { time: "2026-01-01T00:00:01Z", event: "request", method: "GET", host: "shop.test", port: 443, status: 200 },
        ],
      });
      const frames = () => events.filter((e) => e.type === "frame").length;
      const before = frames();
      await agent.contexts()[0].pages()[0].goto(`${site.url}/two`);
      await until("the new URL", () => events.some((e) => e.type === "url" && e.url === `${site.url}/two`), 20_000);
      await until("a frame of the new page", () => frames() > before, 20_000);

      // A new tab the agent opens is the one on screen: the feed follows it.
      const third = await agent.contexts()[0].newPage();
      await third.goto(`${site.url}/one?third`);
      await until(
        "the new tab",
        () => events.some((e) => e.type === "url" && e.url === `${site.url}/one?third`),
        20_000,
      );
      await third.close();
      const lastUrl = () => (events.filter((e) => e.type === "url").at(-1) as { url: string } | undefined)?.url;
      await until("back to the first tab", () => lastUrl() === `${site.url}/two`, 20_000);
    } finally {
      await feed.stop();
    }
    // Stopped: no frame comes any more.
    const count = events.length;
    await agent.contexts()[0].pages()[0].goto(`${site.url}/one`);
    await new Promise((r) => setTimeout(r, 1_500));
    expect(events.length).toBe(count);
  });
});

/** Every character a terminal obeys instead of showing: C0, DEL, C1, bidi controls. */
/* eslint-disable no-control-regex -- the control characters are what it finds (a line break excepted) */
const TERMINAL_CONTROLS =
  /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/;
/* eslint-enable no-control-regex */
const HOSTILE_TITLE = "Hostile \u009b2J\u009d0;owned\u0007 \u001b[31m \u202egnp.exe\u2066x\u2069 \u0085end";

describe("a page in a background tab that claims to be on screen", () => {
  // Its script says visible and not hidden, on the document and on Document.prototype, and says so again whenever
  // asked; the browser knows better.
  const HOSTILE = `<!doctype html><title>Hostile</title><body style="background: rgb(20, 200, 20)">hostile<script>
    for (const target of [Document.prototype, document]) {
      Object.defineProperty(target, "visibilityState", { get: () => "visible", configurable: true });
      Object.defineProperty(target, "hidden", { get: () => false, configurable: true });
    }
    document.addEventListener("visibilitychange", (e) => e.stopImmediatePropagation(), true);
    // A title a terminal would obey: clear the screen (CSI), set the window title (OSC, BEL), an escape, a line
    // break, and text turned to read backwards (an override and an isolate).
    document.title = ${JSON.stringify(HOSTILE_TITLE)};
  </script></body>`;
  let access: { gatewayUrl: string; controlToken: string };
  let agent: Browser;
  let site: { url: string };

  beforeAll(async () => {
    const browser = await startChromium();
    site = await startHttpServer((req) =>
      req.url === "/hostile" ? HOSTILE : `<!doctype html><title>Shop</title><body>the shop</body>`,
    );
    const gateway = await startTestGateway({
      sites: { shop: { server: "http://127.0.0.1:9" } },
      computers: { agent: { cdp: browser.cdp } },
    });
    access = { gatewayUrl: gateway.url, controlToken: TOKEN };
    agent = await chromium.connectOverCDP(`${gateway.url}/computers/agent/cdp`, {
      headers: { Authorization: `Bearer ${TOKEN}` },
    });
    const shop = agent.contexts()[0].pages()[0];
    await shop.goto(`${site.url}/shop`);
    const hostile = await agent.contexts()[0].newPage();
    await hostile.goto(`${site.url}/hostile`);
    // The agent switches back: the shop is on screen, the hostile tab behind it.
    await shop.bringToFront();
  });

  afterAll(async () => {
    await agent?.close().catch(() => undefined);
  });

  it("screenshot and status show the tab on screen, and screenshot ends", async () => {
    const started = Date.now();
    const shot = await screenshotComputer(access, "agent");
    expect(Date.now() - started).toBeLessThan(20_000);
    expect(shot).toMatchObject({ url: `${site.url}/shop`, title: "Shop" });
    expect((await computerTabs(access, "agent"))[0]).toEqual({ url: `${site.url}/shop`, title: "Shop" });
  }, 40_000);

  it("watch streams the tab on screen", async () => {
    const feed = computerFeed(access, "agent");
    const events: FeedEvent[] = [];
    await feed.start((event) => events.push(event));
    try {
      await until("a first frame", () => events.some((e) => e.type === "frame"), 20_000);
      expect(events.filter((e) => e.type === "url")).toEqual([{ type: "url", url: `${site.url}/shop`, title: "Shop" }]);
    } finally {
      await feed.stop();
    }
  }, 40_000);

  it("reaches status and screenshot output with its title's control characters written out", async () => {
    const tabs = await computerTabs(access, "agent");
    const title = tabs.find((t) => t.url === `${site.url}/hostile`)?.title ?? "";
    // The browser drops the C0 controls from a title; the C1 and bidi ones it hands over as the page set them.
    expect(title).toContain("\u009b2J\u009d0;owned");
    expect(title).toContain("\u202egnp.exe\u2066x\u2069");
    const status: StackStatus = {
      stack: "demo",
      healthy: true,
      problems: [],
      containers: [],
      gateway: { url: access.gatewayUrl, healthz: { ok: true, status: 200 } },
      computers: { agent: { tabs } },
      selfTest: { skipped: true },
      evidence: { captureTraffic: false, proxyLogs: {} },
    };
    const shots = formatScreenshots([
      { computer: "agent", file: "/a/agent.png", bytes: 1, url: `${site.url}/hostile`, title },
    ]);
    const printed = await stdoutOf(() => {
      say(formatStatus(status));
      say(JSON.stringify(status, null, 2));
      say(shots);
      note(`multienv status: ${title}`);
    });
    expect(printed).not.toMatch(TERMINAL_CONTROLS);
    expect(printed).toContain("Hostile \\u009b2J\\u009d0;owned");
    expect(printed).toContain("\\u202egnp.exe\\u2066x\\u2069");
    // The JSON is still the same JSON: the title reads back as the page set it.
    const json = printed.slice(printed.indexOf("{"), printed.lastIndexOf("}") + 1);
    expect((JSON.parse(json) as StackStatus).computers.agent.tabs).toEqual(tabs);
    expect(failureText("status", new Error(`no screenshot: ${HOSTILE_TITLE}`))).not.toMatch(TERMINAL_CONTROLS);
    expect(
      formatStatus({ ...status, computers: { agent: { tabs: [{ url: "x", title: HOSTILE_TITLE }] } } }),
    ).not.toMatch(TERMINAL_CONTROLS);
  });
});

describe("a computer's proxy log as watch reads it", () => {
  it("reads a 20 MB log's tail once, then only what was appended, through the real gateway and site proxy", async () => {
    const proxy = await startProxy(
      { control: { host: "127.0.0.1", port: 0, cdp: "127.0.0.1:9" } },
      { token: computerControlToken(TOKEN, "agent") },
    );
    // 20 MB of request lines, written where the proxy writes its log.
    const line = (i: number, host: string) =>
      JSON.stringify({
        event: "request",
        time: "2026-01-01T00:00:00Z",
        method: "GET",
        host,
        port: 443,
        status: 200,
        n: i,
      });
    const filler = Array.from({ length: 1000 }, (_, i) => line(i, "old.test")).join("\n") + "\n";
    const fd = openSync(proxy.logPath, "a");
    for (let written = 0; written < 20 * 1024 * 1024; written += filler.length) writeSync(fd, filler);
    closeSync(fd);
    // Between the gateway and the proxy's control listener: a relay counting the bytes the proxy sends.
    let moved = 0;
    const relay = net.createServer((client) => {
      const upstream = net.connect(proxy.startup.control!.port, "127.0.0.1");
      upstream.on("data", (chunk: Buffer) => (moved += chunk.length));
      client.pipe(upstream).pipe(client);
      client.on("error", () => upstream.destroy());
      upstream.on("error", () => client.destroy());
    });
    await new Promise<void>((resolve) => relay.listen(0, "127.0.0.1", resolve));
    onCleanup(() => new Promise((resolve) => relay.close(resolve)));
    const gateway = await startTestGateway({
      sites: { shop: { server: "http://127.0.0.1:9" } },
      computers: {
        agent: {
          cdp: "http://127.0.0.1:9",
          proxyLog: `http://127.0.0.1:${(relay.address() as net.AddressInfo).port}/log`,
        },
      },
    });
    const feed = computerFeed({ gatewayUrl: gateway.url, controlToken: TOKEN }, "agent");
    const events: FeedEvent[] = [];
    await feed.start((event) => events.push(event));
    try {
      const logLines = () => events.flatMap((e) => (e.type === "log" ? e.lines : []));
      // The backlog: the last lines of the log.
      expect(logLines().length).toBeGreaterThan(0);
      expect(logLines().every((l) => l.host === "old.test")).toBe(true);
      appendFileSync(proxy.logPath, line(1, "new.test") + "\n");
      await until("the appended line", () => logLines().some((l) => l.host === "new.test"), 10_000);
      // Three more looks.
      await new Promise((r) => setTimeout(r, 3_500));
      expect(logLines().filter((l) => l.host === "new.test")).toHaveLength(1);
    } finally {
      await feed.stop();
    }
    // Read whole each second, that is 20 MB a look; read by what was appended, the tail and a few answers' heads.
    expect(moved).toBeLessThan(512 * 1024);
  }, 60_000);
});
