// The browser's DevTools against the agent in the browser, with the real Chromium, launcher and site proxy on
// loopback: a page cannot reach DevTools (the one in use's, nor its standby's) through localhost (Chromium sends
// loopback to the site proxy, which refuses it) nor open a WebSocket to it carrying its Origin (DevTools' Origin check
// stays on), while a DevTools client without an Origin (Playwright connectOverCDP, the gateway) still can, through the
// relay and through the proxy's token-guarded control listener.
import fs from "node:fs";
import path from "node:path";
import { chromium, type Browser } from "playwright-core";
import WebSocket from "ws";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { start, type Launcher } from "../../src/browser/launcher";
import type { RefusedRecord } from "../../src/protocol/site-proxy";
import { cleanup, tempDir } from "../helpers/processes";
import { type ProxyProcess, startProxy, TEST_TOKEN } from "../site-proxy/helpers";
import { startHttpServer } from "../helpers/servers";
import { until } from "../helpers/until";
import { freePort } from "../helpers/ports";

/** Tries every way a page has to reach `targets`; the outcomes end up in the page's body as JSON. */
const ATTACK_PAGE = `<!doctype html><title>attacking</title><body>running</body><script>
const params = new URLSearchParams(location.search);
const targets = JSON.parse(params.get("targets"));
const victim = params.get("victim");
const browserId = params.get("browser");
function outcome(promise) {
  return Promise.race([promise, new Promise((r) => setTimeout(() => r("timeout"), 8000))]);
}
async function tryFetch(url, init) {
  try {
    const res = await fetch(url, init);
    return res.type === "opaque" ? "opaque" : "read " + res.status + " " + (await res.text()).slice(0, 60);
  } catch (e) {
    return "error";
  }
}
function tryWebSocket(url) {
  return new Promise((resolve) => {
    let socket;
    try { socket = new WebSocket(url); } catch (e) { return resolve("error"); }
    socket.onopen = () => { socket.close(); resolve("open"); };
    socket.onerror = () => resolve("error");
  });
}
(async () => {
  const results = {};
  for (const target of targets) {
    results[target] = {
      version: await outcome(tryFetch("http://" + target + "/json/version")),
      close: await outcome(tryFetch("http://" + target + "/json/close/" + victim, { mode: "no-cors" })),
      socket: await outcome(tryWebSocket("ws://" + target + "/devtools/browser/" + browserId)),
    };
  }
  document.body.textContent = JSON.stringify(results);
  document.title = "done";
})();
</script>`;

const home = tempDir();
let proxy: ProxyProcess;
let launcher: Launcher;
let relayPort: number;
const browsers: Browser[] = [];

async function devtoolsJson<T>(pathname: string): Promise<T> {
  return (await (await fetch(`http://127.0.0.1:${relayPort}${pathname}`)).json()) as T;
}

beforeAll(async () => {
  const gateway = await startHttpServer((req) =>
    req.url!.startsWith("/website/shop/attack") ? ATTACK_PAGE : "<title>shop</title>",
  );
  relayPort = await freePort();
  // As deployed: loopback is refused (no allowAddresses), and localhost resolves to it (a static answer standing in
  // for the container's /etc/hosts).
  proxy = await startProxy({
    gateway: gateway.url,
    sites: { shop: ["shop.test"] },
    reach: "allow-all",
    allowAddresses: [],
    resolve: { localhost: ["127.0.0.1"] },
    control: { host: "127.0.0.1", port: 0, cdp: `127.0.0.1:${relayPort}` },
  });
  const log: Record<string, unknown>[] = [];
  // The relay listens on loopback here, where the test is; a configuration refuses loopback (launcher.test.ts).
  launcher = await start(
    {
      proxy: proxy.url,
      startTabs: [],
      cdpHost: "127.0.0.1",
      cdpPort: relayPort,
      caFile: proxy.caCertPath,
      headful: false,
    },
    { home: path.join(home, "home"), log: (r) => log.push(r), restartDelayMs: 100 },
  );
  await until("Chromium's DevTools", () => launcher.devtoolsPort(), 30_000);
}, 60_000);

afterAll(async () => {
  await Promise.all(browsers.map((b) => b.close().catch(() => undefined)));
  await launcher?.stop();
  await cleanup();
});

describe("DevTools and the page", () => {
  it("a page cannot reach DevTools through localhost: no read, no side effect, no WebSocket, in any spelling", async () => {
    const devtoolsPort = launcher.devtoolsPort()!;
    // The standby's too: the next episode's browser, started ahead, which no page may reach either.
    const standbyPort = (await until("the standby", () => launcher.standby(), 30_000, 100)).port;
    const victim = (await (
      await fetch(`http://127.0.0.1:${relayPort}/json/new?about:blank`, { method: "PUT" })
    ).json()) as { id: string };
    const version = await devtoolsJson<{ webSocketDebuggerUrl: string }>("/json/version");
    const browserId = new URL(version.webSocketDebuggerUrl).pathname.split("/").pop();

    // The test's own client drives the page: Playwright over the proxy's control listener, as the gateway would.
    const control = proxy.startup.control!;
    const browser = await chromium.connectOverCDP(`ws://127.0.0.1:${control.port}/cdp/devtools/browser/${browserId}`, {
      headers: { Authorization: `Bearer ${TEST_TOKEN}` },
    });
    browsers.push(browser);
    const page = await browser.contexts()[0].newPage();

    const targets = [
      `localhost:${devtoolsPort}`,
      `127.0.0.1:${devtoolsPort}`,
      `[::1]:${devtoolsPort}`,
      `127.1:${devtoolsPort}`,
      `localhost:${relayPort}`,
      `127.0.0.1:${relayPort}`,
      `localhost:${standbyPort}`,
      `127.0.0.1:${standbyPort}`,
    ];
    // The page is handed the ids an attacker would need (as if they had leaked): only reaching DevTools is missing.
    await page.goto(
      `http://shop.test/attack?victim=${victim.id}&browser=${browserId}&targets=${encodeURIComponent(JSON.stringify(targets))}`,
    );
    await page.waitForFunction('document.title === "done"', undefined, { timeout: 60_000 });
    const results = JSON.parse((await page.textContent("body"))!) as Record<
      string,
      { version: string; close: string; socket: string }
    >;
    for (const target of targets) {
      expect(results[target].version, `fetch ${target}/json/version`).toBe("error");
      expect(results[target].socket, `WebSocket to ${target}`).not.toBe("open");
      expect(results[target].close, `no-cors fetch ${target}/json/close`).not.toMatch(/^read/);
    }
    // The victim tab is still there: no request the page made reached DevTools.
    const tabs = await devtoolsJson<{ id: string }[]>("/json/list");
    expect(tabs.map((t) => t.id)).toContain(victim.id);
    // They went to the site proxy, which refused each by the loopback address it names.
    for (const [host, port] of [
      ["localhost", devtoolsPort],
      ["127.0.0.1", devtoolsPort],
      ["::1", devtoolsPort],
      ["127.0.0.1", standbyPort],
    ] as const) {
      const record = await proxy.waitForRecord<RefusedRecord>(
        `refused ${host}:${port}`,
        (r) => r.event === "refused" && r.host === host && r.port === port,
      );
      expect(record.why).toMatch(/loopback/);
    }
    await page.close();
  });

  it("DevTools refuses a WebSocket that carries a page's Origin, even straight through the relay", async () => {
    const version = await devtoolsJson<{ webSocketDebuggerUrl: string }>("/json/version");
    const url = `ws://127.0.0.1:${relayPort}${new URL(version.webSocketDebuggerUrl).pathname}`;
    const status = await new Promise<number | string>((resolve) => {
      const ws = new WebSocket(url, { origin: "http://shop.test" });
      ws.on("open", () => (ws.close(), resolve("open")));
      ws.on("unexpected-response", (_req, res) => resolve(res.statusCode ?? 0));
      ws.on("error", (e) => resolve(e.message));
    });
    expect(status).toBe(403);
  });

  it("a client without an Origin still drives the browser: Playwright connectOverCDP through the relay", async () => {
    const browser = await chromium.connectOverCDP(`http://127.0.0.1:${relayPort}`);
    browsers.push(browser);
    const page = await browser.contexts()[0].newPage();
    await page.goto("http://shop.test/");
    expect(await page.title()).toBe("shop");
    await page.close();
  });

  it("the gateway's DevTools request through the control listener (Host: localhost) gets DevTools' JSON", async () => {
    const control = proxy.startup.control!;
    const res = await fetch(`http://127.0.0.1:${control.port}/cdp/json/version`, {
      headers: { Host: "localhost", Accept: "application/json", Authorization: `Bearer ${TEST_TOKEN}` },
    });
    expect(res.status).toBe(200);
    const json = (await res.json()) as { Browser: string; webSocketDebuggerUrl: string };
    expect(json.Browser).toMatch(/Chrome/);
    expect(json.webSocketDebuggerUrl).toMatch(/^ws:\/\/localhost\/devtools\/browser\//);
    expect((await fetch(`http://127.0.0.1:${control.port}/cdp/json/version`)).status).toBe(401);
    expect(fs.existsSync(proxy.caCertPath)).toBe(true);
  });
});
