// The synthetic shop's frontend: its pages (pages.ts), rendered from what the shop's server answers, which holds
// the catalog, sessions, carts and orders (examples/sites/common/shop-api.ts). /bench?n=N is a page with N
// subresources (bench/e2e.ts); it and /ready need no server.
import type http from "node:http";
import { listenPort, readBody, sendHtml, sendJson, serve } from "../common/http";
import { SHOP_API, type Order, type SessionView, type ShopError, type ShopInfo } from "../common/shop-api";
import { cartPage, homePage, messagePage, orderPage, productPage, signInPage, type Frame } from "./pages";

/**
 * The shop's server: the deploy names the frontend's own server in AGENTENV_WEBSITE_SERVER; run by hand,
 * SHOP_SERVER_URL names one, else a site named `shop` (`shop-server`) on a server's default port.
 */
const SERVER_URL = (
  process.env.AGENTENV_WEBSITE_SERVER ??
  process.env.SHOP_SERVER_URL ??
  "http://shop-server:8000"
).replace(/\/+$/, "");

/** The session's id; the server knows whose it is and what its cart holds. */
const SESSION_COOKIE = "shop_session";

type Answer<T> = { ok: true; value: T } | { ok: false; status: number; error: string };

class ServerUnreachable extends Error {}

async function callServer<T>(method: "GET" | "POST", path: string, body?: unknown): Promise<Answer<T>> {
  let response: Response;
  try {
    response = await fetch(SERVER_URL + path, {
      method,
      ...(body === undefined ? {} : { body: JSON.stringify(body), headers: { "content-type": "application/json" } }),
    });
  } catch (e) {
    throw new ServerUnreachable(`The shop's server (${SERVER_URL}) does not answer: ${(e as Error).message}`);
  }
  const value = (await response.json()) as T | ShopError;
  if (response.ok) return { ok: true, value: value as T };
  return { ok: false, status: response.status, error: (value as ShopError).error };
}

/** The value of an answer the frontend cannot do without; a refusal there is a bug, not a page. */
async function okValue<T>(answer: Promise<Answer<T>>): Promise<T> {
  const settled = await answer;
  if (!settled.ok) throw new Error(settled.error);
  return settled.value;
}

function cookie(req: http.IncomingMessage, name: string): string | undefined {
  for (const part of (req.headers.cookie ?? "").split(";")) {
    const [key, ...value] = part.trim().split("=");
    if (key === name) return value.join("=");
  }
  return undefined;
}

interface Visit {
  /** The session the cookie names, when the server still has it (a reset ends every session). */
  session?: { id: string; view: SessionView };
  frame: Frame;
}

async function visit(req: http.IncomingMessage): Promise<Visit> {
  const host = String(req.headers["x-forwarded-host"] ?? req.headers.host ?? "");
  const id = cookie(req, SESSION_COOKIE);
  const view = id === undefined ? undefined : await callServer<SessionView>("GET", SHOP_API.session(id));
  if (id === undefined || view === undefined || !view.ok) return { frame: { account: null, cartCount: 0, host } };
  const cartCount = view.value.cart.items.reduce((sum, item) => sum + item.quantity, 0);
  return { session: { id, view: view.value }, frame: { account: view.value.account, cartCount, host } };
}

/**
 * The visit's session, made when it has none. The cookie has no Path, so it defaults to the page's directory: the
 * site's root under the gateway's /website/<site>/ as at the synthetic origin, never another site's pages.
 */
async function sessionOf(visit: Visit): Promise<{ id: string; headers: http.OutgoingHttpHeaders }> {
  if (visit.session !== undefined) return { id: visit.session.id, headers: {} };
  const { session } = await okValue(callServer<{ session: string }>("POST", SHOP_API.sessions));
  return { id: session, headers: { "set-cookie": `${SESSION_COOKIE}=${session}; HttpOnly; SameSite=Lax` } };
}

/** After a form's POST, the page to show next (a relative location, like every link). */
function seeOther(res: http.ServerResponse, location: string, headers: http.OutgoingHttpHeaders = {}): void {
  res.writeHead(303, { location, "content-length": 0, ...headers });
  res.end();
}

async function form(req: http.IncomingMessage): Promise<URLSearchParams> {
  return new URLSearchParams(await readBody(req));
}

const EMPTY_CART = (currency: string) => ({ items: [], totalCents: 0, currency });

async function pages(req: http.IncomingMessage, res: http.ServerResponse, url: URL): Promise<void> {
  const route = `${req.method} ${url.pathname}`;
  const here = await visit(req);
  const { frame } = here;
  if (route === "GET /")
    return sendHtml(res, 200, homePage(await okValue(callServer<ShopInfo>("GET", SHOP_API.shop)), frame));
  if (route === "GET /product") {
    const info = await okValue(callServer<ShopInfo>("GET", SHOP_API.shop));
    const product = info.products.find((p) => p.sku === url.searchParams.get("sku"));
    if (product === undefined)
      return sendHtml(res, 404, messagePage("No such product", "There is no such product in this shop.", frame));
    return sendHtml(res, 200, productPage(product, info.currency, frame));
  }
  if (route === "GET /signin") {
    const info = await okValue(callServer<ShopInfo>("GET", SHOP_API.shop));
    return sendHtml(res, 200, signInPage(info.demoAccount, frame));
  }
  if (route === "POST /signin") {
    const fields = await form(req);
    const session = await sessionOf(here);
    const signedIn = await callServer<{ account: string }>("POST", SHOP_API.signIn(session.id), {
      account: fields.get("account"),
      password: fields.get("password"),
    });
    if (signedIn.ok) return seeOther(res, "./", session.headers);
    const info = await okValue(callServer<ShopInfo>("GET", SHOP_API.shop));
    return sendHtml(res, signedIn.status, signInPage(info.demoAccount, frame, signedIn.error), session.headers);
  }
  if (route === "POST /signout") {
    if (here.session !== undefined) await okValue(callServer("POST", SHOP_API.signOut(here.session.id)));
    return seeOther(res, "./");
  }
  if (route === "GET /cart") {
    const info = here.session === undefined ? await okValue(callServer<ShopInfo>("GET", SHOP_API.shop)) : undefined;
    return sendHtml(res, 200, cartPage(here.session?.view.cart ?? EMPTY_CART(info!.currency), frame));
  }
  if (route === "POST /cart") {
    const fields = await form(req);
    const session = await sessionOf(here);
    const added = await callServer("POST", SHOP_API.cart(session.id), {
      sku: fields.get("sku"),
      quantity: Number(fields.get("quantity") ?? 1),
    });
    if (added.ok) return seeOther(res, "cart", session.headers);
    return sendHtml(res, added.status, messagePage("Not added to your cart", added.error, frame), session.headers);
  }
  if (route === "POST /checkout") {
    // Even a visit with no session asks the server, whose refusal (sign in first) is the one the page shows.
    const session = await sessionOf(here);
    const placed = await callServer<Order>("POST", SHOP_API.orders(session.id));
    if (placed.ok) return seeOther(res, `order?id=${encodeURIComponent(placed.value.id)}`, session.headers);
    const { cart } = await okValue(callServer<SessionView>("GET", SHOP_API.session(session.id)));
    return sendHtml(res, placed.status, cartPage(cart, frame, placed.error), session.headers);
  }
  if (route === "GET /order") {
    const id = url.searchParams.get("id") ?? "";
    const order =
      here.session === undefined ? undefined : await callServer<Order>("GET", SHOP_API.order(here.session.id, id));
    if (order === undefined || !order.ok)
      return sendHtml(res, 404, messagePage("No such order", order?.error ?? "Sign in to see your orders.", frame));
    return sendHtml(res, 200, orderPage(order.value, frame));
  }
  sendHtml(res, 404, messagePage("Not found", `There is no page ${url.pathname} in this shop.`, frame));
}

serve(listenPort(80), async (req, res) => {
  const url = new URL(req.url ?? "/", "http://site");
  if (url.pathname === "/ready") return sendJson(res, 200, { ready: true });
  if (url.pathname === "/bench") {
    const n = Math.min(Number(url.searchParams.get("n") ?? 50) || 50, 500);
    // Relative, so the page loads whole under any prefix too (the gateway's /website/shop/).
    const imgs = Array.from({ length: n }, (_, i) => `<img src="asset/${i}.svg" width="8" height="8">`).join("");
    return sendHtml(res, 200, `<!doctype html><title>Bench ${n}</title>${imgs}`, { "cache-control": "no-store" });
  }
  const asset = /^\/asset\/(\d+)\.svg$/.exec(url.pathname);
  if (asset) {
    const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="8" height="8"><text>${asset[1]}</text></svg>`;
    res.writeHead(200, {
      "content-type": "image/svg+xml",
      "content-length": Buffer.byteLength(svg),
      "cache-control": "no-store",
    });
    res.end(svg);
    return;
  }
  try {
    await pages(req, res, url);
  } catch (e) {
    if (!(e instanceof ServerUnreachable)) throw e;
    const host = String(req.headers["x-forwarded-host"] ?? req.headers.host ?? "");
    sendHtml(res, 502, messagePage("The shop is closed", e.message, { account: null, cartCount: 0, host }));
  }
});
