// The shop's pages. Every link, form action and redirect is relative and every page sits at the site's root
// (a query picks the product or the order), so the pages work alike at the synthetic origin (https://shop.test/)
// and under the gateway's prefix (/website/shop/). Element ids are stable: agents and tests find things by them.
import { formatMoney, type Cart, type DemoAccount, type Order, type Product, type ShopInfo } from "../common/shop-api";

export function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** What every page's header and footer show: who is signed in, the cart's size, the host the browser asked for. */
export interface Frame {
  account: string | null;
  cartCount: number;
  host: string;
}

/** The home page's title; the e2e tier and the start tabs wait for it. */
export const HOME_TITLE = "Synthetic shop";

function page(title: string, frame: Frame, body: string): string {
  const who =
    frame.account === null
      ? `<span id="user">signed out</span> <a id="nav-signin" href="signin">Sign in</a>`
      : `<span id="user">${escapeHtml(frame.account)}</span>
    <form class="inline" method="post" action="signout"><button id="sign-out">Sign out</button></form>`;
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${escapeHtml(title)}</title>
<style>body{font-family:sans-serif;max-width:48rem;margin:1rem auto}nav{display:flex;gap:1rem;align-items:center}
.inline{display:inline}.error{color:#a00}td,th{padding:.2rem .6rem;text-align:left}</style></head>
<body>
<nav><a id="nav-home" href="./">Products</a> <a id="nav-cart" href="cart">Cart (<span id="cart-count">${frame.cartCount}</span>)</a>
    ${who}</nav>
<main>
${body}
</main>
<footer><p id="host">${escapeHtml(frame.host)}</p></footer>
</body></html>`;
}

function errorLine(error: string | undefined): string {
  return error === undefined ? "" : `<p id="error" class="error" role="alert">${escapeHtml(error)}</p>`;
}

export function homePage(info: ShopInfo, frame: Frame): string {
  const rows = info.products
    .map(
      (p) =>
        `<li><a id="product-${escapeHtml(p.sku)}" class="product" href="product?sku=${encodeURIComponent(p.sku)}">${escapeHtml(p.name)}</a> <span class="price">${formatMoney(p.unitPriceCents, info.currency)}</span></li>`,
    )
    .join("\n");
  return page(HOME_TITLE, frame, `<h1>${HOME_TITLE}</h1>\n<ul id="products">\n${rows}\n</ul>`);
}

export function productPage(product: Product, currency: string, frame: Frame, error?: string): string {
  return page(
    `${product.name} - ${HOME_TITLE}`,
    frame,
    `<h1 id="product-name">${escapeHtml(product.name)}</h1>
<p id="product-description">${escapeHtml(product.description)}</p>
<p id="product-price">${formatMoney(product.unitPriceCents, currency)}</p>
${errorLine(error)}
<form method="post" action="cart">
  <input type="hidden" name="sku" value="${escapeHtml(product.sku)}">
  <label for="quantity">Quantity</label> <input id="quantity" name="quantity" type="number" min="1" value="1">
  <button id="add-to-cart">Add to cart</button>
</form>`,
  );
}

function itemsTable(id: string, cart: Cart): string {
  const rows = cart.items
    .map(
      (item) =>
        `<tr id="${id}-item-${escapeHtml(item.sku)}"><td class="name">${escapeHtml(item.name)}</td><td class="quantity">${item.quantity}</td><td class="line-total">${formatMoney(item.lineTotalCents, cart.currency)}</td></tr>`,
    )
    .join("\n");
  return `<table id="${id}-items"><tr><th>Product</th><th>Quantity</th><th>Price</th></tr>
${rows}
</table>
<p>Total: <span id="${id}-total">${formatMoney(cart.totalCents, cart.currency)}</span></p>`;
}

/** The checkout button is there even for an empty cart or signed out: the refusal says what to do instead. */
export function cartPage(cart: Cart, frame: Frame, error?: string): string {
  const contents = cart.items.length === 0 ? `<p id="cart-empty">Your cart is empty.</p>` : itemsTable("cart", cart);
  const signIn =
    frame.account === null
      ? `<p id="checkout-signin">You will need to <a href="signin">sign in</a> to check out.</p>`
      : "";
  return page(
    `Cart - ${HOME_TITLE}`,
    frame,
    `<h1>Your cart</h1>
${errorLine(error)}
${contents}
${signIn}
<form method="post" action="checkout"><button id="checkout">Check out</button></form>`,
  );
}

export function orderPage(order: Order, frame: Frame): string {
  return page(
    `Order ${order.id} - ${HOME_TITLE}`,
    frame,
    `<h1 id="order-confirmation">Thank you for your order</h1>
<p>Order <span id="order-id">${escapeHtml(order.id)}</span>, placed <time id="order-time" datetime="${escapeHtml(order.time)}">${escapeHtml(order.time)}</time> by <span id="order-account">${escapeHtml(order.account)}</span>.</p>
${itemsTable("order", order)}`,
  );
}

/** The demo account is on the page itself, so an agent (or a person) can sign in with it. */
export function signInPage(demo: DemoAccount, frame: Frame, error?: string): string {
  return page(
    `Sign in - ${HOME_TITLE}`,
    frame,
    `<h1>Sign in</h1>
<p id="demo-account">Demo account: <code id="demo-account-name">${escapeHtml(demo.account)}</code>, password <code id="demo-account-password">${escapeHtml(demo.password)}</code></p>
${errorLine(error)}
<form method="post" action="signin">
  <p><label for="account">Account</label> <input id="account" name="account" autocomplete="username"></p>
  <p><label for="password">Password</label> <input id="password" name="password" type="password" autocomplete="current-password"></p>
  <button id="sign-in">Sign in</button>
</form>`,
  );
}

export function messagePage(title: string, message: string, frame: Frame): string {
  return page(`${title} - ${HOME_TITLE}`, frame, `<h1>${escapeHtml(title)}</h1>\n${errorLine(message)}`);
}
