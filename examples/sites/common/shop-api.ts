// The sample shop's seam between its server (which holds the catalog, sessions, carts and orders, so that its data
// plane and reset see everything) and its frontend (which renders pages from the server's answers): the server's
// JSON paths and what they answer. A runner's grader reads the same `ShopData` from the data plane.

/** What the shop sells; prices are integer cents so a total is exact. */
export interface Product {
  sku: string;
  name: string;
  description: string;
  unitPriceCents: number;
}

/** A product in a cart or an order, with how many of it and what they cost together. */
export interface LineItem {
  sku: string;
  name: string;
  quantity: number;
  unitPriceCents: number;
  lineTotalCents: number;
}

export interface Cart {
  items: LineItem[];
  totalCents: number;
  currency: string;
}

export interface Order extends Cart {
  /** `order-<n>`, counted from 1 again after a reset. */
  id: string;
  account: string;
  /** When it was placed (ISO 8601). */
  time: string;
}

/** The data plane's answer (`GET /data`): every order placed since the deploy or the last reset, oldest first. */
export interface ShopData {
  orders: Order[];
}

/** The account the sign-in page shows, so an agent can sign in. */
export interface DemoAccount {
  account: string;
  password: string;
}

/** `GET /api/shop`. */
export interface ShopInfo {
  name: string;
  currency: string;
  products: Product[];
  demoAccount: DemoAccount;
}

/** `GET /api/sessions/<id>`: who is signed in (null: nobody) and the session's cart. */
export interface SessionView {
  account: string | null;
  cart: Cart;
}

/** Every refusal: one sentence a page can show as it is. */
export interface ShopError {
  error: string;
}

/** The server's paths; a session id is opaque and URL-safe. */
export const SHOP_API = {
  shop: "/api/shop",
  /** POST: a new session, signed out with an empty cart (201 `{session}`). */
  sessions: "/api/sessions",
  session: (session: string) => `/api/sessions/${session}`,
  /** POST `{account, password}`: 200 `{account}`, 401 on a wrong account or password. */
  signIn: (session: string) => `/api/sessions/${session}/sign-in`,
  signOut: (session: string) => `/api/sessions/${session}/sign-out`,
  /** POST `{sku, quantity}`: adds to the cart, answers the cart. */
  cart: (session: string) => `/api/sessions/${session}/cart`,
  /** POST: checks the cart out (201 the order; 401 signed out, 409 empty cart). */
  orders: (session: string) => `/api/sessions/${session}/orders`,
  /** GET: one of the signed-in account's orders. */
  order: (session: string, id: string) => `/api/sessions/${session}/orders/${encodeURIComponent(id)}`,
} as const;

/** `1234` in `USD` as `USD 12.34`: the one way a page shows money. */
export function formatMoney(cents: number, currency: string): string {
  return `${currency} ${(cents / 100).toFixed(2)}`;
}
