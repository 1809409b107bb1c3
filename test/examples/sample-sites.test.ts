// The sample sites as real processes on loopback: what the e2e tier and a task author rely on: cards, /ready, the
// shop's data plane, /echo and its settings, the frontend's pages at its host and its bench page, and the live
// site's /session in Playwright storage-state shape with no pages. The shop's pages in a browser: shop.test.ts.
import { once } from "node:events";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CARD_PATH, findExtension, parseCard, WEBSITE_V1_URN } from "../../src/protocol/card";
import { parseStorageState } from "../../src/protocol/session";
import { runSite, siteEnv, SITES, startSite, stopSites } from "./sites";

let shopServer: string;
let shopFrontend: string;
let liveServer: string;

beforeAll(async () => {
  shopServer = await startSite(SITES.shopServer, siteEnv({ currency: "EUR", products: 3 }, ["shop.test"]));
  [shopFrontend, liveServer] = await Promise.all([
    startSite(SITES.shopFrontend, { SHOP_SERVER_URL: shopServer }),
    startSite(SITES.liveServer, siteEnv({ account: "alex", domains: ["github.com", "*.github.com"] }, [])),
  ]);
}, 30_000);

afterAll(stopSites);

describe("synthetic shop", () => {
  it("serves its card with its data and reset paths, the orders as its data plane, and an echo of the request's headers", async () => {
    const card = parseCard(await (await fetch(shopServer + CARD_PATH)).json());
    expect(findExtension(card, WEBSITE_V1_URN)).toMatchObject({
      params: { domains: ["shop.test"], live: false },
      paths: { ready: "/ready", data: "/data", reset: "/reset" },
    });
    expect(await (await fetch(`${shopServer}/data`)).json()).toEqual({ orders: [] });
    const posted = await fetch(`${shopServer}/data`, { method: "POST", body: "{}" });
    expect(posted.status).toBe(405);
    expect(((await posted.json()) as { error: string }).error).toMatch(/checking out/);
    expect((await fetch(`${shopServer}/reset`, { method: "POST" })).status).toBe(200);
    const echo = (await (await fetch(`${shopServer}/echo`, { headers: { authorization: "Bearer x" } })).json()) as {
      headers: Record<string, string>;
    };
    expect(echo.headers.authorization).toBe("Bearer x");
  });

  it("sells as many products as its settings say, in their currency", async () => {
    const home = await (await fetch(`${shopFrontend}/`, { headers: { "x-forwarded-host": "shop.test" } })).text();
    expect(home).toContain("<title>Synthetic shop</title>");
    expect(home).toContain('<p id="host">shop.test</p>');
    expect(home).toContain('<span id="user">signed out</span>');
    expect(home.match(/class="product"/g)).toHaveLength(3);
    expect(home).toContain('<a id="product-mug" class="product" href="product?sku=mug">Ceramic mug</a>');
    expect(home).toContain("EUR 12.00");
  });

  it("refuses a bad setting in one line naming it and the fix", async () => {
    const child = runSite(SITES.shopServer, siteEnv({ products: 40 }, []));
    let stderr = "";
    child.stderr!.on("data", (chunk) => (stderr += chunk));
    const [code] = await once(child, "exit");
    expect(code).toBe(2);
    expect(stderr).toBe(
      "sample-shop-server: AGENTENV_WEBSITE_SETTINGS.products is 40; set it to a whole number from 1 to 12\n",
    );
  });

  it("serves its bench page and its pages' error when the server is away, without the server", async () => {
    const alone = await startSite(SITES.shopFrontend, { SHOP_SERVER_URL: "http://127.0.0.1:9" });
    const bench = await (await fetch(`${alone}/bench?n=50`)).text();
    expect(bench.match(/<img /g)).toHaveLength(50);
    const home = await fetch(`${alone}/`);
    expect(home.status).toBe(502);
    expect(await home.text()).toContain("The shop&#39;s server (http://127.0.0.1:9) does not answer");
  });
});

describe("live-site server", () => {
  it("serves its card, /session as storage state, and no pages", async () => {
    const card = parseCard(await (await fetch(liveServer + CARD_PATH)).json());
    expect(card?.extensions[0]).toMatchObject({
      uri: WEBSITE_V1_URN,
      params: { live: true, domains: ["github.com", "*.github.com"] },
      paths: { session: "/session" },
    });
    const session = parseStorageState(await (await fetch(`${liveServer}/session`)).json());
    expect(session.ok && session.state.cookies).toEqual([
      expect.objectContaining({ name: "user_session", value: "alex", domain: ".github.com", secure: true }),
    ]);
    expect((await fetch(`${liveServer}/`)).status).toBe(404);
    expect((await fetch(`${liveServer}/login`)).status).toBe(404);
  });
});
