// A reset between two episodes against the real gateway, the real site proxy and the real browser launcher with
// Chromium on loopback, tried the way an attacker would: episode 1 stores what it can at a synthetic site, at its
// default port and at another one (cookies, local and session storage, IndexedDB, Cache Storage, a service worker,
// a permission, HSTS, history, the HTTP cache), keeps its DevTools connection open, and after `reset` episode 2 looks
// for all of it, through the same DevTools URL and through the agent's own DevTools (cookies, storage, cache and
// history as an attacker would look for them). Nothing may be visible: not in the browser, not on its disk.
import { randomBytes } from "node:crypto";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { chromium, type Browser, type BrowserContext } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { start, type Launcher } from "../../src/browser/launcher";
import { computerAgentToken, computerControlToken } from "../../src/protocol/auth";
import { CARD_PATH, WEBSITE_V1_URN } from "../../src/protocol/card";
import { resetEnv, type ResetResult } from "../../src/runner/lifecycle/reset";
import { connectCdp, type CdpClient } from "../helpers/cdp";
import { cleanup, tempDir } from "../helpers/processes";
import { deployedOutputs, startTestGateway } from "./helpers";
import { freePort } from "../helpers/ports";
import { startHttpServer, type TestHttpServer } from "../helpers/servers";
import { startProxy } from "../site-proxy/helpers";
import { TOKEN } from "../gateway/helpers";
import { until } from "../helpers/until";

/** What episode 1 writes everywhere it can; episode 2 must find it nowhere. */
const MARK = `left-by-episode-1-${randomBytes(6).toString("hex")}`;
const ORIGINS = ["https://shop.test:8443", "https://shop.test"];
const START_TAB = "https://shop.test/";
const SERVICE_WORKER = "self.addEventListener('fetch', () => {});";

let launcher: Launcher;
let frontend: TestHttpServer;
let home: string;
let gatewayUrl: string;
let resetStack: () => Promise<ResetResult>;
const held: Browser[] = [];
const agents: CdpClient[] = [];

/** The agent's DevTools URL through the gateway, as the stack's outputs give it. */
const agentCdp = () => `${gatewayUrl}/computers/agent/cdp`;
const connectAgent = async () => {
  const browser = await chromium.connectOverCDP(agentCdp(), { headers: { Authorization: `Bearer ${TOKEN}` } });
  held.push(browser);
  return browser;
};

beforeAll(async () => {
  // The shop's frontend: HSTS only where a page asks for it, so the next episode's own visits set none.
  frontend = await startHttpServer((req, res) => {
    const path = new URL(req.url!, "http://shop").pathname;
    // A script any page of the site loads, kept a day by the browser's HTTP cache.
    if (path === "/cached.js") {
      res.writeHead(200, { "Content-Type": "text/javascript", "Cache-Control": "public, max-age=86400" });
      return "window.cachedScript = true;";
    }
    if (path === "/with-script") return `<!doctype html><title>shop</title><script src="/cached.js"></script>`;
    if (path === "/sw.js") {
      res.writeHead(200, { "Content-Type": "text/javascript" });
      return SERVICE_WORKER;
    }
    if (path === "/hsts")
      res.writeHead(200, { "Content-Type": "text/html", "Strict-Transport-Security": "max-age=31536000" });
    if (path === "/download") {
      res.writeHead(200, { "Content-Type": "application/octet-stream", "Content-Disposition": "attachment" });
      return MARK;
    }
    return `<!doctype html><title>shop ${path}</title>`;
  });
  const server = await startHttpServer((req, res) => {
    res.writeHead(200, { "Content-Type": "application/json" });
    if (req.url === CARD_PATH)
      return JSON.stringify({
        name: "shop",
        extensions: [
          { uri: WEBSITE_V1_URN, params: { domains: ["shop.test"] }, paths: { ready: "/ready", reset: "/reset" } },
        ],
      });
    return "{}";
  });
  const gatewayPort = await freePort();
  // The site proxy reaches the gateway's browse listener, as a computer's does (the published one wants the token).
  const browsePort = await freePort();
  const relayPort = await freePort();
  const proxy = await startProxy(
    {
      gateway: `http://127.0.0.1:${browsePort}`,
      sites: { shop: ["shop.test", "*.shop.test"] },
      reach: "none",
      control: { host: "127.0.0.1", port: 0, cdp: `127.0.0.1:${relayPort}` },
    },
    { token: computerControlToken(TOKEN, "agent") },
  );
  const control = `http://127.0.0.1:${proxy.startup.control!.port}`;
  const gateway = await startTestGateway({
    listen: { host: "127.0.0.1", port: gatewayPort },
    browse: { hosts: ["127.0.0.1"], port: browsePort },
    sites: { shop: { server: server.url, frontend: frontend.url } },
    computers: {
      agent: { cdp: `${control}/cdp`, proxyLog: `${control}/log`, endConnections: `${control}/connections/end` },
    },
  });
  gatewayUrl = gateway.url;
  home = join(tempDir("runner-browser-"), "home");
  // The relay listens on loopback here, where the test is (a configuration refuses loopback: launcher.test.ts).
  launcher = await start(
    {
      proxy: proxy.url,
      startTabs: [START_TAB],
      cdpHost: "127.0.0.1",
      cdpPort: relayPort,
      caFile: proxy.caCertPath,
      headful: false,
    },
    { home, log: () => undefined, restartDelayMs: 100 },
  );
  await until("Chromium's DevTools", () => launcher.devtoolsPort(), 30_000);
  const map = deployedOutputs(gatewayUrl, {
    websites: { shop: { live: false, domains: ["shop.test", "*.shop.test"] } },
    computers: { agent: { network: "none", startTabs: [START_TAB] } },
    live: false,
    liveWebsites: [],
    captureTraffic: false,
  });
  const artifactsDir = join(tempDir(), "task-r");
  resetStack = () =>
    resetEnv(
      { name: "task-r", outputs: async () => map, exportStack: async () => ({ deployment: { resources: [] } }) },
      { artifactsDir, log: (line) => console.log(line) },
    );
}, 60_000);

afterAll(async () => {
  agents.forEach((agent) => agent.close());
  await Promise.all(held.map((b) => b.close().catch(() => undefined)));
  await launcher?.stop();
  await cleanup();
});

/** Episode 1: everything a page and a DevTools client can leave behind, at both ports of the site. */
async function leaveEverything(context: BrowserContext): Promise<void> {
  for (const origin of ORIGINS) {
    const page = await context.newPage();
    await page.goto(`${origin}/?visited=${MARK}`);
    await page.evaluate(async (mark) => {
      const w = globalThis as any;
      w.localStorage.setItem("left", mark);
      w.sessionStorage.setItem("left", mark);
      w.document.cookie = `left=${mark}; max-age=86400; secure`;
      await new Promise((resolve, reject) => {
        const open = w.indexedDB.open("episode", 1);
        open.onupgradeneeded = () => open.result.createObjectStore("left");
        open.onerror = () => reject(open.error);
        open.onsuccess = () => {
          const tx = open.result.transaction("left", "readwrite");
          tx.objectStore("left").put(mark, "left");
          tx.oncomplete = resolve;
          tx.onerror = () => reject(tx.error);
        };
      });
      await (await w.caches.open("episode")).put("/left", new w.Response(mark));
      await w.navigator.serviceWorker.register("/sw.js");
      await w.navigator.serviceWorker.ready;
    }, MARK);
    await context.grantPermissions(["geolocation", "notifications"], { origin });
  }
  // The site's script, kept by the HTTP cache.
  await (await context.newPage()).goto("https://shop.test:8443/with-script");
  const hsts = await context.newPage();
  await hsts.goto("https://shop.test:8443/hsts");
  // The site's HSTS (set at another port: it is the host's) holds: its plain-HTTP address is upgraded in the browser.
  await hsts.goto("http://shop.test/plain");
  expect(hsts.url()).toBe("https://shop.test/plain");
  const download = await context.newPage();
  const cdp = await context.newCDPSession(download);
  await cdp.send("Browser.setDownloadBehavior", { behavior: "default" }).catch(() => undefined);
  await download.goto("https://shop.test/download").catch(() => undefined);
  // The tabs go before the reset, as an agent covering its tracks would close them: no open tab names an origin.
  for (const page of context.pages()) await page.goto("about:blank");
}

/** What a page at `origin` sees of what was stored there. */
async function whatIsLeft(context: BrowserContext, origin: string) {
  const page = await context.newPage();
  await page.goto(`${origin}/look`);
  const seen = await page.evaluate(async () => {
    const w = globalThis as any;
    const permission = async (name: string) => (await w.navigator.permissions.query({ name })).state;
    return {
      localStorage: w.localStorage.getItem("left"),
      sessionStorage: w.sessionStorage.getItem("left"),
      cookie: w.document.cookie,
      indexedDB: (await w.indexedDB.databases()).map((d: { name: string }) => d.name),
      caches: await w.caches.keys(),
      serviceWorkers: (await w.navigator.serviceWorker.getRegistrations()).length,
      geolocation: await permission("geolocation"),
      notifications: await permission("notifications"),
    };
  });
  await page.close();
  return seen;
}

/** The agent's own DevTools, as a harness hands it out: its first tab, through the gateway, with its agent token. */
async function agentDevtools(): Promise<CdpClient> {
  const list = (await (
    await fetch(`${agentCdp()}/json/list`, { headers: { Authorization: `Bearer ${TOKEN}` } })
  ).json()) as { type: string; webSocketDebuggerUrl: string }[];
  const agent = await connectCdp(list.find((t) => t.type === "page")!.webSocketDebuggerUrl, {
    Authorization: `Bearer ${computerAgentToken(TOKEN, "agent")}`,
  });
  agents.push(agent);
  return agent;
}

/**
 * What an agent's DevTools connection through the gateway to `pathname` (under the computer's CDP route) gets: refused,
 * or the targets it can see (a browser endpoint's Target.getTargets, or a tab's own id).
 */
async function throughTheGateway(pathname: string): Promise<string[] | string> {
  let agent: CdpClient;
  try {
    agent = await connectCdp(`${agentCdp().replace(/^http/, "ws")}${pathname}`, {
      Authorization: `Bearer ${computerAgentToken(TOKEN, "agent")}`,
    });
  } catch (error) {
    return `refused: ${(error as Error).message}`;
  }
  agents.push(agent);
  const answer = await Promise.race([
    agent.send("Target.getTargets").catch((error: Error) => ({ error: { message: error.message } })),
    new Promise<{ error: { message: string } }>((r) => setTimeout(() => r({ error: { message: "no answer" } }), 5000)),
  ]);
  if ("result" in answer && answer.result)
    return (answer.result.targetInfos as { targetId: string }[]).map((t) => t.targetId);
  return `no targets: ${answer.error?.message}`;
}

/** The text of a page and of every shadow root in it (chrome://history draws its entries in shadow roots). */
const DEEP_TEXT = `(() => {
  const texts = [];
  const walk = (root) => { for (const el of root.querySelectorAll("*")) { if (el.shadowRoot) { texts.push(el.shadowRoot.textContent); walk(el.shadowRoot); } } };
  texts.push(document.body ? document.body.textContent : "");
  walk(document);
  return texts.join(" ");
})()`;

/**
 * What an agent finds of episode 1 through its own DevTools, looking the way an attacker would: every cookie of the
 * browser (Network.getAllCookies), the site's localStorage (DOMStorage), whether the site's script comes from the
 * HTTP cache (the shop's server not asked again), and the browser's history (chrome://history, searched for MARK).
 */
async function whatTheAgentFinds(agent: CdpClient) {
  await agent.call("Network.enable");
  await agent.call("Page.enable");
  await agent.call("DOMStorage.enable");
  const cookies = ((await agent.call("Network.getAllCookies")).cookies as { name: string; value: string }[]).filter(
    (c) => c.value.includes(MARK),
  );
  const scriptAsked = () => frontend.requests.filter((r) => r.url.includes("/cached.js")).length;
  const asked = scriptAsked();
  const from = agent.events.length;
  await agent.call("Page.navigate", { url: "https://shop.test:8443/with-script" });
  const response = await until(
    "the cached script's response",
    () =>
      agent.events
        .slice(from)
        .find(
          (e) =>
            e.method === "Network.requestServedFromCache" ||
            (e.method === "Network.responseReceived" &&
              (e.params.response as { url: string }).url.endsWith("/cached.js")),
        ),
    20_000,
    50,
  );
  const fromCache =
    response.method === "Network.requestServedFromCache" ||
    (response.params.response as { fromDiskCache: boolean }).fromDiskCache;
  const localStorage = (
    await agent.call("DOMStorage.getDOMStorageItems", {
      storageId: { securityOrigin: "https://shop.test:8443", isLocalStorage: true },
    })
  ).entries as string[][];
  // Searched for MARK less its last character (history's search matches a part): the search's own URL, which the
  // session keeps on disk, must not hold MARK itself.
  await agent.call("Page.navigate", { url: `chrome://history/?q=${MARK.slice(0, -1)}` });
  // The history page fills its list a moment after it loads: looked at until it shows the entry or says it has none.
  const history = await until(
    "chrome://history's answer",
    async () => {
      const { result } = await agent.call("Runtime.evaluate", { expression: DEEP_TEXT, returnByValue: true });
      // "Found 1 search result for '<MARK>'": the search matches the entry's URL (the page shows its host alone).
      const found = /Found (\d+) search results? for/.exec(String((result as { value: unknown }).value));
      return found === null ? undefined : Number(found[1]) > 0 ? "listed" : "none";
    },
    20_000,
    100,
  );
  return {
    cookies: cookies.map((c) => c.name),
    localStorage: localStorage.filter(([, value]) => value === MARK).map(([key]) => key),
    scriptFromCache: fromCache || scriptAsked() === asked,
    history,
  };
}

/** Every file under `dir` that holds `text` (as Latin-1 or UTF-16, the ways Chromium stores a string). */
function filesHolding(dir: string, text: string): string[] {
  const needles = [Buffer.from(text, "latin1"), Buffer.from(text, "utf16le")];
  const found: string[] = [];
  const walk = (at: string) => {
    for (const name of readdirSync(at)) {
      const file = join(at, name);
      let stat;
      try {
        stat = statSync(file);
      } catch {
        continue; // gone while walking (a lock, a journal)
      }
      if (stat.isDirectory()) walk(file);
      else if (stat.isFile()) {
        const bytes = (() => {
          try {
            return readFileSync(file);
          } catch {
            return Buffer.alloc(0);
          }
        })();
        if (needles.some((n) => bytes.includes(n))) found.push(file);
      }
    }
  };
  walk(dir);
  return found;
}

describe("reset between episodes", () => {
  it("leaves the next episode nothing of the last one's browser state, at any port, over the same DevTools URL", async () => {
    const episode1 = await connectAgent();
    await leaveEverything(episode1.contexts()[0]);
    // What episode 1 left, as an agent finds it through its own DevTools: all of it is there to find.
    expect(await whatTheAgentFinds(await agentDevtools())).toEqual({
      cookies: ["left"],
      localStorage: ["left"],
      scriptFromCache: true,
      history: "listed",
    });
    // Episode 1 stays connected across the reset, as an agent that never hung up would.

    const result = await resetStack();
    expect(result.episode).toBe(2);
    expect(result.sites).toEqual({ shop: "reset" });

    // Its connection was to the browser the reset ended; it reconnects at the URL it had, and gets the fresh one,
    // showing the start tab alone.
    expect(episode1.isConnected()).toBe(false);
    const episode2 = await connectAgent();
    const context = episode2.contexts()[0];
    await until(
      "the start tab alone",
      () => {
        const urls = context.pages().map((p) => p.url());
        return urls.length === 1 && urls[0] === START_TAB ? urls : undefined;
      },
      20_000,
    );
    expect(await context.cookies()).toEqual([]);
    // HSTS first: the visits below are to the site's HTTPS pages, which set none.
    const plain = await context.newPage();
    await plain.goto("http://shop.test/plain");
    expect(plain.url(), "episode 1's HSTS still upgrades the site's plain-HTTP address").toBe("http://shop.test/plain");
    await plain.close();
    for (const origin of ORIGINS)
      expect({ origin, seen: await whatIsLeft(context, origin) }).toEqual({
        origin,
        seen: {
          localStorage: null,
          sessionStorage: null,
          cookie: "",
          indexedDB: [],
          caches: [],
          serviceWorkers: 0,
          geolocation: "prompt",
          notifications: "prompt",
        },
      });
    // Nor through the agent's own DevTools: no cookie, no localStorage item, no cached script, no history entry.
    expect(await whatTheAgentFinds(await agentDevtools())).toEqual({
      cookies: [],
      localStorage: [],
      scriptFromCache: false,
      history: "none",
    });
    // Nor on the browser's disk: its history, its downloads, its storage of episode 1 are gone with its profile.
    expect(filesHolding(home, MARK)).toEqual([]);
  }, 180_000);

  it("the next episode's browser, started ahead, is reached neither through the gateway nor from the agent's DevTools", async () => {
    const standby = await until("the standby", () => launcher.standby(), 60_000, 100);
    const own = (
      (await (await fetch(`http://127.0.0.1:${standby.port}/json/list`)).json()) as { id: string; type: string }[]
    ).filter((t) => t.type === "page");
    const ownBrowser = new URL(
      (
        (await (await fetch(`http://127.0.0.1:${standby.port}/json/version`)).json()) as {
          webSocketDebuggerUrl: string;
        }
      ).webSocketDebuggerUrl,
    ).pathname;
    const standbyTab = own[0].id;
    // The gateway's DevTools route lists the browser in use, never the standby's tab.
    const listed = (await (
      await fetch(`${agentCdp()}/json/list`, { headers: { Authorization: `Bearer ${TOKEN}` } })
    ).json()) as { id: string }[];
    expect(listed.length).toBeGreaterThan(0);
    expect(listed.map((t) => t.id)).not.toContain(standbyTab);
    // Asked for the standby's tab or browser by their ids (as if they had leaked), it reaches neither.
    for (const pathname of [`/devtools/page/${standbyTab}`, ownBrowser]) {
      const seen = await throughTheGateway(pathname);
      if (Array.isArray(seen)) expect(seen, pathname).not.toContain(standbyTab);
    }
    // The agent's own DevTools, on the browser in use, sees no target of the standby's.
    const agent = await agentDevtools();
    const targets = (await agent.call("Target.getTargets")).targetInfos as { targetId: string }[];
    expect(targets.map((t) => t.targetId)).not.toContain(standbyTab);
    // Untouched: its one blank tab, no cookie.
    const untouched = await connectCdp(`ws://127.0.0.1:${standby.port}/devtools/page/${standbyTab}`, {});
    agents.push(untouched);
    expect((await untouched.call("Network.getAllCookies")).cookies).toEqual([]);
    const tabs = (await (await fetch(`http://127.0.0.1:${standby.port}/json/list`)).json()) as {
      url: string;
      type: string;
    }[];
    expect(tabs.filter((t) => t.type === "page").map((t) => t.url)).toEqual(["about:blank"]);
  }, 120_000);
});
