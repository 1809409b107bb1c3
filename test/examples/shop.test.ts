// The sample shop as an env serves it, on loopback: its server and frontend as processes, the real gateway in front
// (/website/shop/ for pages, /svc/shop/ for the card's data and reset paths) and the real site proxy terminating TLS
// for shop.test with the env CA, driven by Chromium: the scripted agent of examples/runner/shop-agent.ts buys two
// products, the data plane holds exactly that order, reset empties it, and each refusal says what to do.
import type { Browser, BrowserContext, Page } from "playwright-core";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { findExtension, WEBSITE_V1_URN, type GatewayCard } from "../../src/protocol/card";
import { gradeShopEpisode, runShopEpisode, SHOP_TASK_SKUS, SHOP_URL } from "../../examples/runner/shop-agent";
import type { ShopData } from "../../examples/sites/common/shop-api";
import { startGateway, TOKEN, type GatewayProcess } from "../gateway/helpers";
import { chromiumDirect, chromiumTrusting } from "../helpers/chromium";
import { cleanup } from "../helpers/processes";
import { startProxy } from "../site-proxy/helpers";
import { siteEnv, SITES, startSite, stopSites } from "./sites";

let gateway: GatewayProcess;
/** The computer's browser: every request through the site proxy, trusting the env CA alone. */
let browser: Browser;
/** A browser on the runner's side, where the gateway's /website/shop/ is reached directly. */
let direct: Browser;
let context: BrowserContext;
let page: Page;
/** The shop's data and reset paths as the gateway's card gives them (under /svc/shop/). */
let paths: { data: string; reset: string };

const auth = { authorization: `Bearer ${TOKEN}` };

async function orders(): Promise<ShopData> {
  const answer = await fetch(gateway.url + paths.data, { headers: auth });
  expect(answer.status).toBe(200);
  return (await answer.json()) as ShopData;
}

beforeAll(async () => {
  const server = await startSite(SITES.shopServer, siteEnv({ currency: "USD", products: 12 }, ["shop.test"]));
  const frontend = await startSite(SITES.shopFrontend, { SHOP_SERVER_URL: server });
  // The site proxy reaches the gateway's browse listener, as a computer's does; the runner the published one.
  gateway = await startGateway({ sites: { shop: { server, frontend } }, browse: { hosts: ["127.0.0.1"], port: 0 } });
  const listeners = gateway.logs.find((line) => line.event === "listening")!.listeners as Array<{
    listener: string;
    port: number;
  }>;
  const browsePort = listeners.find((l) => l.listener === "browse")!.port;
  const proxy = await startProxy({
    gateway: `http://127.0.0.1:${browsePort}`,
    sites: { shop: ["shop.test"] },
    reach: "none",
  });
  browser = await chromiumTrusting(proxy.caCertPath, proxy.url);
  direct = await chromiumDirect();
  const card = (await (
    await fetch(`${gateway.url}/.well-known/agent-env.json`, { headers: auth })
  ).json()) as GatewayCard;
  const website = findExtension(card.sites.shop, WEBSITE_V1_URN);
  paths = { data: website!.paths!.data, reset: website!.paths!.reset };
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await direct?.close();
  await gateway?.stop();
  await cleanup();
  stopSites();
});

beforeEach(async () => {
  expect((await fetch(gateway.url + paths.reset, { method: "POST", headers: auth })).status).toBe(200);
  context = await browser.newContext();
  page = await context.newPage();
});

afterEach(() => context.close());

async function signIn(password: string): Promise<void> {
  await page.goto(`${SHOP_URL}signin`);
  await page.fill("#account", (await page.textContent("#demo-account-name"))!);
  await page.fill("#password", password);
  await page.click("#sign-in");
}

async function addToCart(sku: string): Promise<void> {
  await page.goto(`${SHOP_URL}product?sku=${sku}`);
  await page.click("#add-to-cart");
  await page.waitForSelector(`#cart-item-${sku}`);
}

describe("the sample shop through the gateway and the site proxy", () => {
  it("declares its data plane and reset in its card, under the gateway's /svc/shop/", () => {
    expect(paths).toEqual({ data: "/svc/shop/data", reset: "/svc/shop/reset" });
  });

  it("takes an agent's order at https://shop.test/ (sign in, two products, checkout): the data plane holds exactly that order, and it passes", async () => {
    const started = Date.now();
    const episode = await runShopEpisode(page);
    expect(page.url()).toBe(`${SHOP_URL}order?id=${episode.orderId}`);
    expect(await page.textContent("#order-confirmation")).toBe("Thank you for your order");
    const data = await orders();
    expect(data).toEqual({
      orders: [
        {
          id: episode.orderId,
          account: "alex",
          items: [
            { sku: "mug", name: "Ceramic mug", quantity: 1, unitPriceCents: 1200, lineTotalCents: 1200 },
            { sku: "notebook", name: "Dot-grid notebook", quantity: 1, unitPriceCents: 900, lineTotalCents: 900 },
          ],
          totalCents: 2100,
          currency: "USD",
          time: expect.any(String),
        },
      ],
    });
    const placed = Date.parse(data.orders[0].time);
    expect(placed).toBeGreaterThanOrEqual(started);
    expect(placed).toBeLessThanOrEqual(Date.now());
    expect(await page.textContent("#order-total")).toBe("USD 21.00");
    expect(gradeShopEpisode(data)).toEqual({
      passed: true,
      reason: `order ${episode.orderId} holds 1 x mug, 1 x notebook`,
      orderId: episode.orderId,
    });
    // The session cookie is the synthetic origin's, as the page set it.
    expect((await context.cookies()).map((c) => [c.name, c.domain, c.path])).toEqual([
      ["shop_session", "shop.test", "/"],
    ]);
  });

  it("works the same under the gateway's /website/shop/, its cookie kept to that prefix", async () => {
    await context.close();
    // The runner's listener wants the control token on every page: in the gateway's own header, as a runner sends it.
    context = await direct.newContext({ extraHTTPHeaders: { "X-Multienv-Token": TOKEN } });
    page = await context.newPage();
    const episode = await runShopEpisode(page, `${gateway.url}/website/shop/`);
    expect(page.url()).toBe(`${gateway.url}/website/shop/order?id=${episode.orderId}`);
    expect(gradeShopEpisode(await orders())).toMatchObject({ passed: true, orderId: episode.orderId });
    expect((await context.cookies()).map((c) => [c.name, c.path])).toEqual([["shop_session", "/website/shop"]]);
  });

  it("resets to no orders, no carts and no sessions: the browser is signed out with an empty cart", async () => {
    await runShopEpisode(page);
    await addToCart("pen");
    expect(await page.textContent("#cart-count")).toBe("1");
    expect((await fetch(gateway.url + paths.reset, { method: "POST", headers: auth })).status).toBe(200);
    expect(await orders()).toEqual({ orders: [] });
    expect(gradeShopEpisode(await orders())).toEqual({ passed: false, reason: "the shop holds 0 orders, not one" });
    await page.goto(`${SHOP_URL}cart`);
    expect(await page.textContent("#user")).toBe("signed out");
    expect(await page.textContent("#cart-empty")).toBe("Your cart is empty.");
    // Numbering starts again, as on a fresh deploy.
    expect((await runShopEpisode(page)).orderId).toBe("order-1");
  });

  it("refuses a wrong password and stays signed out", async () => {
    await signIn("not-the-password");
    expect(await page.textContent("#error")).toBe("Wrong account or password.");
    expect(await page.textContent("#user")).toBe("signed out");
    await page.goto(SHOP_URL);
    expect(await page.textContent("#user")).toBe("signed out");
  });

  it("refuses checkout signed out and with an empty cart, saying what to do, and places no order", async () => {
    await page.goto(`${SHOP_URL}cart`);
    await page.click("#checkout");
    expect(await page.textContent("#error")).toBe("Sign in to check out.");
    await addToCart("mug");
    await page.click("#checkout");
    expect(await page.textContent("#error")).toBe("Sign in to check out.");
    expect(await page.isVisible("#cart-item-mug")).toBe(true);
    expect(await orders()).toEqual({ orders: [] });

    await context.clearCookies();
    await signIn("shop-demo");
    expect(await page.textContent("#user")).toBe("alex");
    await page.click("#nav-cart");
    await page.click("#checkout");
    expect(await page.textContent("#error")).toBe("Your cart is empty: add a product before checking out.");
    expect(await orders()).toEqual({ orders: [] });
  });

  it("keeps a cart from signed out to signed in", async () => {
    await addToCart("tote");
    await signIn("shop-demo");
    await page.click("#nav-cart");
    await page.click("#checkout");
    expect(await page.textContent("#order-id")).toBe("order-1");
    expect((await orders()).orders.map((o) => o.items.map((i) => i.sku))).toEqual([["tote"]]);
  });
});

describe("the shop task's grade", () => {
  const order = (id: string, skus: readonly string[], quantity = 1) => ({
    id,
    account: "alex",
    time: "2026-01-01T00:00:00.000Z",
    totalCents: 0,
    currency: "USD",
    items: skus.map((sku) => ({ sku, name: sku, quantity, unitPriceCents: 0, lineTotalCents: 0 })),
  });

  it("passes one order of one of each task product, and nothing else", () => {
    expect(gradeShopEpisode({ orders: [order("order-1", SHOP_TASK_SKUS)] }).passed).toBe(true);
    expect(gradeShopEpisode({ orders: [order("order-1", [...SHOP_TASK_SKUS].reverse())] }).passed).toBe(true);
    expect(gradeShopEpisode({ orders: [order("order-1", ["mug"])] })).toEqual({
      passed: false,
      reason: "order order-1 holds 1 x mug, not 1 x mug, 1 x notebook",
    });
    expect(gradeShopEpisode({ orders: [order("order-1", [...SHOP_TASK_SKUS, "pen"])] }).passed).toBe(false);
    expect(gradeShopEpisode({ orders: [order("order-1", SHOP_TASK_SKUS, 2)] }).passed).toBe(false);
    expect(gradeShopEpisode({ orders: [order("order-1", SHOP_TASK_SKUS), order("order-2", SHOP_TASK_SKUS)] })).toEqual({
      passed: false,
      reason: "the shop holds 2 orders, not one",
    });
    expect(gradeShopEpisode({ items: [] })).toEqual({
      passed: false,
      reason: "the data plane's answer is not the shop's orders",
    });
  });
});
