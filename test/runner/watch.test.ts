// `multienv watch`'s page and feeds, and the screenshot and tabs they share with `status`: the page behind its
// secret (403 otherwise, the live channel too), the feeds running only while someone watches, and the real feed and
// screenshot on a real headless Chromium behind the real gateway, on loopback.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { chromium, type Browser } from "playwright-core";
import { WebSocket } from "ws";
import { computerTabs, screenshotComputer, screenshotFileName } from "../../src/runner/operator/screens";
import { computerFeed } from "../../src/runner/operator/watch";
import { startWatchServer, type Feed, type FeedEvent, type WatchMessage } from "../../src/runner/operator/watch-server";
import { cleanup } from "../helpers/processes";
import { startChromium } from "../helpers/chromium";
import { startHttpServer } from "../helpers/servers";
import { startTestGateway } from "./helpers";
import { TOKEN } from "../gateway/helpers";
import { until } from "../helpers/until";

afterAll(cleanup);

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
  const messages: WatchMessage[] = [];
  ws.on("message", (data) => messages.push(JSON.parse(String(data)) as WatchMessage));
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
        `${origin}/${secret.slice(0, -1)}0/`,
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
      expect(first.messages[0]).toEqual({ type: "hello", stack: "demo", computers: ["desktop", "open"] });
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
      // A 1x1 GIF stands in for a JPEG frame: the page only sets it as the image's source.
      const pixel = "R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7";
      desktop.emit!({ type: "frame", data: pixel });
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
      expect(await panel.locator("img.screen").getAttribute("src")).toBe(`data:image/jpeg;base64,${pixel}`);
      expect(await panel.locator(".log li").textContent()).toBe(`10:11:12 refused CONNECT ${hostile}:443 (x)`);
      expect(await panel.locator(".log li").getAttribute("class")).toBe("refused");
      // Nothing of it became markup: the only image is the screen's.
      expect(await page.locator("img").count()).toBe(1);
      expect(await page.title()).toBe("multienv watch demo");
      expect(errors).toEqual([]);
      await page.close();
      await until("the feed to stop once the page is gone", () => desktop.stops === 1, 10_000);
    } finally {
      await browser.close();
      await server.close();
    }
  });
});

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
