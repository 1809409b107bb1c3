// The synthetic shop's server: its card, its data plane (the orders, `GET /data`), /ready, /reset (orders, carts
// and sessions emptied), the JSON paths its frontend renders pages from (examples/sites/common/shop-api.ts), and
// /echo (the request's headers back, so a test can prove what reached a site, e.g. that no control token did).
// Settings: `products` (how many of the catalog it sells, 1 to 12; all by default), `currency` (default USD),
// `name` (its card's), and `declareReset: false`, which leaves `reset` out of its card, as a site without one would
// (a reset then restarts it).
import type http from "node:http";
import { CARD_PATH, WEBSITE_V1_URN } from "../../../src/protocol/card";
import {
  listenPort,
  readBody,
  resetOperation,
  sendJson,
  serve,
  stringList,
  websiteDomains,
  websiteSettings,
} from "../common/http";
import { SHOP_API, type ShopInfo } from "../common/shop-api";
import { CATALOG, DEMO_ACCOUNT, Shop, ShopRefusal } from "./shop";

const settings = websiteSettings();
/** The names its card declares: its `domains` setting when it has one, else those the stack gives it. */
const domains = settings.domains === undefined ? websiteDomains() : stringList(settings.domains);
const name = typeof settings.name === "string" ? settings.name : "shop";
const shop = new Shop(CATALOG.slice(0, productCount(settings.products)), currency(settings.currency));

function productCount(value: unknown): number {
  if (value === undefined) return CATALOG.length;
  if (Number.isInteger(value) && (value as number) >= 1 && (value as number) <= CATALOG.length) return value as number;
  return refuseSetting("products", `a whole number from 1 to ${CATALOG.length}`, value);
}

function currency(value: unknown): string {
  if (value === undefined) return "USD";
  if (typeof value === "string" && /^[A-Z]{3}$/.test(value)) return value;
  return refuseSetting("currency", "a three-letter code such as USD", value);
}

function refuseSetting(setting: string, expected: string, value: unknown): never {
  process.stderr.write(
    `sample-shop-server: AGENTENV_WEBSITE_SETTINGS.${setting} is ${JSON.stringify(value)}; set it to ${expected}\n`,
  );
  process.exit(2);
}

/** A JSON body's fields; anything but an object is no fields. */
async function jsonFields(req: http.IncomingMessage): Promise<Record<string, unknown>> {
  try {
    const value: unknown = JSON.parse(await readBody(req));
    return typeof value === "object" && value !== null ? (value as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}

/** A session's paths; ids (session and order) are URL-safe as they are, so nothing needs decoding. */
const SESSION_ROUTE =
  /^\/api\/sessions\/([A-Za-z0-9_-]+)(\/sign-in|\/sign-out|\/cart|\/orders(?:\/([A-Za-z0-9_-]+))?)?$/;

/** The frontend's JSON paths (SHOP_API): each answers its value, or a ShopRefusal's status and sentence. */
async function api(req: http.IncomingMessage, res: http.ServerResponse, path: string): Promise<void> {
  if (path === SHOP_API.shop && req.method === "GET") {
    const info: ShopInfo = { name, currency: shop.currency, products: [...shop.products], demoAccount: DEMO_ACCOUNT };
    return sendJson(res, 200, info);
  }
  if (path === SHOP_API.sessions && req.method === "POST") return sendJson(res, 201, { session: shop.newSession() });
  const match = SESSION_ROUTE.exec(path);
  if (match === null) return sendJson(res, 404, { error: `no such path: ${path}` });
  const [, session, action, orderId] = match;
  const route = `${req.method} ${action ?? ""}`;
  if (route === "GET ") return sendJson(res, 200, shop.view(session));
  if (route === "POST /sign-in") {
    const { account, password } = await jsonFields(req);
    return sendJson(res, 200, { account: shop.signIn(session, account, password) });
  }
  if (route === "POST /sign-out") {
    shop.signOut(session);
    return sendJson(res, 200, shop.view(session));
  }
  if (route === "POST /cart") {
    const { sku, quantity } = await jsonFields(req);
    return sendJson(res, 200, shop.addToCart(session, sku, quantity));
  }
  if (route === "POST /orders") return sendJson(res, 201, shop.checkOut(session));
  if (req.method === "GET" && orderId !== undefined) return sendJson(res, 200, shop.order(session, orderId));
  sendJson(res, 405, { error: `${req.method} ${path} is not supported` });
}

serve(listenPort(8000), async (req, res) => {
  const path = new URL(req.url ?? "/", "http://site").pathname;
  if (path === CARD_PATH) {
    return sendJson(res, 200, {
      name,
      description: "A synthetic web shop (multienv sample site): products, sign-in, a cart and checkout",
      version: "1",
      extensions: [
        {
          uri: WEBSITE_V1_URN,
          params: { domains, live: false, allowHosts: [] },
          paths: { ready: "/ready", data: "/data", ...(settings.declareReset === false ? {} : { reset: "/reset" }) },
        },
      ],
    });
  }
  if (path === "/ready") return sendJson(res, 200, { ready: true });
  if (path === "/data") {
    if (req.method !== "GET")
      return sendJson(
        res,
        405,
        { error: "GET /data lists the orders; orders are placed by checking out, and POST /reset empties them" },
        { allow: "GET" },
      );
    return sendJson(res, 200, shop.data());
  }
  if (path === "/reset") return resetOperation(req, res, () => shop.reset());
  if (path.startsWith("/api/")) {
    try {
      return await api(req, res, path);
    } catch (e) {
      if (e instanceof ShopRefusal) return sendJson(res, e.status, { error: e.message });
      throw e;
    }
  }
  if (path === "/echo") return sendJson(res, 200, { method: req.method, url: req.url, headers: req.headers });
  if (path === "/settings") return sendJson(res, 200, settings);
  sendJson(res, 404, { error: `no such path: ${path}` });
});
