// The sample shop's episodes graded from their request logs: the shop's server and frontend as processes, the real
// gateway, the real site proxy recording every exchange, Chromium driven by the scripted agent; each episode collected
// as the runner collects it (its HAR alone, split at the reset's mark), graded from that HAR beside the data plane,
// the two agreeing on a passing and a failing episode; and the recorded pages served by Playwright's routeFromHAR to
// a fresh browser with no network to the shop at all.
import { copyFileSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { Har } from "har-format";
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { gradeShopEpisode, runShopEpisode, SHOP_URL } from "../../examples/runner/shop-agent";
import { gradeShopEpisodeFromHar } from "../../examples/runner/shop-har-grader";
import { computerControlToken } from "../../src/protocol/auth";
import { collectRun, type CollectOptions } from "../../src/runner/evidence/collect";
import { endProxyConnections } from "../../src/runner/evidence/proxy-logs";
import { startGateway, TOKEN, type GatewayProcess } from "../gateway/helpers";
import { chromiumDirect, chromiumTrusting } from "../helpers/chromium";
import { freePort } from "../helpers/ports";
import { cleanup, tempDir } from "../helpers/processes";
import { startProxy } from "../site-proxy/helpers";
import { harProblems } from "../helpers/har";
import { siteEnv, SITES, startSite, stopSites } from "./sites";

let gateway: GatewayProcess;
let browser: Browser;
let direct: Browser;
let artifactsDir: string;
let collect: CollectOptions;
const auth = { authorization: `Bearer ${TOKEN}` };

async function shopData(): Promise<unknown> {
  return (await fetch(`${gateway.url}/svc/shop/data`, { headers: auth })).json();
}

/** One episode of the agent buying `skus` on a fresh context, ended as a reset ends it, and its HAR collected. */
async function episode(n: number, skus?: readonly string[]): Promise<Har> {
  expect((await fetch(`${gateway.url}/svc/shop/reset`, { method: "POST", headers: auth })).status).toBe(200);
  const context = await browser.newContext();
  await runShopEpisode(await context.newPage(), SHOP_URL, skus);
  await context.close();
  await endProxyConnections(gateway.url, TOKEN, "agent", { episode: n + 1 });
  await collectRun({ ...collect, episode: n });
  const file = join(artifactsDir, "requests", "agent.har");
  copyFileSync(file, join(artifactsDir, `episode-${n}.har`));
  return JSON.parse(readFileSync(file, "utf8")) as Har;
}

beforeAll(async () => {
  const server = await startSite(SITES.shopServer, siteEnv({ currency: "USD", products: 12 }, ["shop.test"]));
  const frontend = await startSite(SITES.shopFrontend, { SHOP_SERVER_URL: server });
  // The gateway names the proxy's control listener before the proxy starts (which needs the gateway's browse port).
  const controlPort = await freePort();
  const control = `http://127.0.0.1:${controlPort}`;
  gateway = await startGateway({
    sites: { shop: { server, frontend } },
    browse: { hosts: ["127.0.0.1"], port: 0 },
    computers: {
      agent: {
        cdp: `${control}/cdp`,
        proxyLog: `${control}/log`,
        endConnections: `${control}/connections/end`,
        requests: `${control}/requests`,
      },
    },
  });
  const listeners = gateway.logs.find((line) => line.event === "listening")!.listeners as Array<{
    listener: string;
    port: number;
  }>;
  const browsePort = listeners.find((l) => l.listener === "browse")!.port;
  const proxy = await startProxy(
    {
      gateway: `http://127.0.0.1:${browsePort}`,
      sites: { shop: ["shop.test"] },
      reach: "none",
      control: { host: "127.0.0.1", port: controlPort, cdp: "127.0.0.1:9" },
      requestLog: { dir: join(tempDir(), "requests"), computer: "agent" },
    },
    { token: computerControlToken(TOKEN, "agent") },
  );
  browser = await chromiumTrusting(proxy.caCertPath, proxy.url);
  direct = await chromiumDirect();
  artifactsDir = join(tempDir(), "artifacts", "shop");
  collect = {
    stack: "shop",
    access: { gatewayUrl: gateway.url, controlToken: TOKEN },
    artifactsDir,
    captureTraffic: false,
    computers: ["agent"],
    syntheticDomains: ["shop.test"],
  };
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await direct?.close();
  await gateway?.stop();
  await cleanup();
  stopSites();
});

describe("the shop's episodes graded from their request logs", () => {
  it("agree with the data plane on a passing episode and a failing one, each from its own HAR alone", async () => {
    const passing = await episode(1);
    expect(await harProblems(passing)).toEqual([]);
    const data = gradeShopEpisode(await shopData());
    const fromHar = gradeShopEpisodeFromHar(passing);
    expect(data.passed).toBe(true);
    expect(fromHar).toEqual(data);

    const failing = await episode(2, ["mug"]);
    expect(await harProblems(failing)).toEqual([]);
    const failedData = gradeShopEpisode(await shopData());
    const failedFromHar = gradeShopEpisodeFromHar(failing);
    expect(failedData.passed).toBe(false);
    expect(failedFromHar.passed).toBe(false);
    expect(failedFromHar.reason).toMatch(/holds 1 x mug, not 1 x mug, 1 x notebook/);
    // The second episode's HAR holds its own checkout alone.
    const checkouts = failing.log.entries.filter(
      (e) => e.request.method === "POST" && e.request.url.endsWith("/checkout"),
    );
    expect(checkouts).toHaveLength(1);
    // The sign-in POST's body is in it, as the browser sent it.
    const signIn = failing.log.entries.find(
      (e) => e.request.method === "POST" && e.request.url === `${SHOP_URL}signin`,
    );
    expect(signIn?.request.postData?.params?.map((p) => p.name)).toEqual(["account", "password"]);
    // Navigations are pages.
    expect(failing.log.pages!.map((p) => p.title)).toContain(SHOP_URL);
  }, 90_000);

  it("serves the recorded shop to a fresh browser with no network to it, through Playwright's routeFromHAR", async () => {
    const context = await direct.newContext();
    try {
      await context.routeFromHAR(join(artifactsDir, "episode-1.har"), { notFound: "abort" });
      const page = await context.newPage();
      await page.goto(SHOP_URL);
      expect(await page.title()).toBe("Synthetic shop");
      expect(await page.locator("#products li").count()).toBe(12);
      await page.click("#product-mug");
      expect(await page.textContent("#product-name")).toBeTruthy();
    } finally {
      await context.close();
    }
  }, 60_000);
});
