// The shop's state and rules: its catalog, the one demo account, sessions with their carts, and the orders placed.
// Every total is computed here, once, so the pages, the data plane and a grader agree on it.
import { randomBytes } from "node:crypto";
import type { Cart, DemoAccount, LineItem, Order, Product, SessionView, ShopData } from "../common/shop-api";

export const CATALOG: readonly Product[] = [
  { sku: "mug", name: "Ceramic mug", description: "A 350 ml mug, white glaze.", unitPriceCents: 1200 },
  { sku: "notebook", name: "Dot-grid notebook", description: "A5, 120 pages.", unitPriceCents: 900 },
  { sku: "tee", name: "Cotton T-shirt", description: "Organic cotton, unisex fit.", unitPriceCents: 1800 },
  { sku: "pen", name: "Fountain pen", description: "Steel nib, blue ink cartridge.", unitPriceCents: 3400 },
  { sku: "tote", name: "Canvas tote bag", description: "Holds a week of groceries.", unitPriceCents: 1500 },
  { sku: "socks", name: "Wool socks", description: "Merino, one pair.", unitPriceCents: 1100 },
  { sku: "cap", name: "Baseball cap", description: "Adjustable strap.", unitPriceCents: 2000 },
  { sku: "poster", name: "Art print", description: "50 x 70 cm, unframed.", unitPriceCents: 2500 },
  { sku: "bottle", name: "Steel water bottle", description: "750 ml, keeps cold 24 h.", unitPriceCents: 2200 },
  { sku: "stickers", name: "Sticker pack", description: "Ten vinyl stickers.", unitPriceCents: 500 },
  { sku: "hoodie", name: "Zip hoodie", description: "Heavy fleece, two pockets.", unitPriceCents: 4800 },
  { sku: "lamp", name: "Desk lamp", description: "LED, three brightness levels.", unitPriceCents: 3900 },
];

export const DEMO_ACCOUNT: DemoAccount = { account: "alex", password: "shop-demo" };

/** Most of one product in a cart: a typo of an extra digit is refused rather than checked out. */
const MAX_QUANTITY = 99;

/** A refusal the shop's pages show as they are; `status` is the HTTP status the server answers it with. */
export class ShopRefusal extends Error {
  constructor(
    readonly status: 400 | 401 | 404 | 409,
    message: string,
  ) {
    super(message);
  }
}

interface Session {
  account?: string;
  /** sku -> quantity, in the order the products were first added. */
  cart: Map<string, number>;
}

export class Shop {
  private sessions = new Map<string, Session>();
  private orders: Order[] = [];

  constructor(
    readonly products: readonly Product[],
    readonly currency: string,
  ) {}

  newSession(): string {
    const id = randomBytes(18).toString("base64url");
    this.sessions.set(id, { cart: new Map() });
    return id;
  }

  view(sessionId: string): SessionView {
    const session = this.session(sessionId);
    return { account: session.account ?? null, cart: this.cart(session) };
  }

  signIn(sessionId: string, account: unknown, password: unknown): string {
    const session = this.session(sessionId);
    if (account !== DEMO_ACCOUNT.account || password !== DEMO_ACCOUNT.password)
      throw new ShopRefusal(401, "Wrong account or password.");
    session.account = account;
    return account;
  }

  signOut(sessionId: string): void {
    this.session(sessionId).account = undefined;
  }

  addToCart(sessionId: string, sku: unknown, quantity: unknown): Cart {
    const session = this.session(sessionId);
    const product = this.products.find((p) => p.sku === sku);
    if (product === undefined) throw new ShopRefusal(404, `There is no product ${JSON.stringify(sku)}.`);
    if (!Number.isInteger(quantity) || (quantity as number) < 1)
      throw new ShopRefusal(400, "The quantity must be a whole number, at least 1.");
    const total = (session.cart.get(product.sku) ?? 0) + (quantity as number);
    if (total > MAX_QUANTITY) throw new ShopRefusal(400, `At most ${MAX_QUANTITY} of one product fit in a cart.`);
    session.cart.set(product.sku, total);
    return this.cart(session);
  }

  checkOut(sessionId: string, now = new Date()): Order {
    const session = this.session(sessionId);
    if (session.account === undefined) throw new ShopRefusal(401, "Sign in to check out.");
    if (session.cart.size === 0) throw new ShopRefusal(409, "Your cart is empty: add a product before checking out.");
    const order: Order = {
      id: `order-${this.orders.length + 1}`,
      account: session.account,
      ...this.cart(session),
      time: now.toISOString(),
    };
    this.orders.push(order);
    session.cart.clear();
    return order;
  }

  /** One order, to the account that placed it only. */
  order(sessionId: string, orderId: string): Order {
    const session = this.session(sessionId);
    const order = this.orders.find((o) => o.id === orderId && o.account === session.account);
    if (order === undefined) throw new ShopRefusal(404, `You have no order ${orderId}.`);
    return order;
  }

  data(): ShopData {
    return { orders: this.orders };
  }

  /** Empties orders, carts and sessions: the next episode starts signed out, as the deploy left it. */
  reset(): void {
    this.sessions.clear();
    this.orders = [];
  }

  private session(id: string): Session {
    const session = this.sessions.get(id);
    if (session === undefined) throw new ShopRefusal(404, "That session has ended; sign in again.");
    return session;
  }

  private cart(session: Session): Cart {
    const items: LineItem[] = [...session.cart].map(([sku, quantity]) => {
      const product = this.products.find((p) => p.sku === sku)!;
      return {
        sku,
        name: product.name,
        quantity,
        unitPriceCents: product.unitPriceCents,
        lineTotalCents: product.unitPriceCents * quantity,
      };
    });
    return { items, totalCents: items.reduce((sum, item) => sum + item.lineTotalCents, 0), currency: this.currency };
  }
}
