// The grade of a shop episode from the episode's request log alone (artifacts/<stack>/episodes/<n>/requests/
// <computer>.har, or requests/<computer>.har for the episode under way): what the computer's browser sent and got,
// as its site proxy recorded it, beside `gradeShopEpisode`, which reads the shop's data plane. Passed when the
// episode checked out once (one POST to the shop's /checkout, answered with a redirect to its order's page) and the
// confirmation page that redirect led to shows one of each of SHOP_TASK_SKUS and nothing else.
import type { Entry, Har } from "har-format";
import { SHOP_TASK_SKUS, SHOP_URL, type ShopGrade } from "./shop-agent";

/** The entry's answer text, when the log kept all of it. */
function wholeText(entry: Entry): string | undefined {
  const { content } = entry.response;
  if (content.text === undefined || content.comment?.startsWith("cut at")) return undefined;
  return content.encoding === "base64" ? Buffer.from(content.text, "base64").toString("utf8") : content.text;
}

function locationOf(entry: Entry): string | undefined {
  const header = entry.response.headers.find((h) => h.name.toLowerCase() === "location")?.value;
  const target = entry.response.redirectURL || header;
  return target ? new URL(target, entry.request.url).href : undefined;
}

/** The order's items as its confirmation page lists them: `<quantity> x <sku>`, sorted. */
function itemsOnPage(html: string): string[] {
  const rows = html.matchAll(/<tr id="order-item-([^"]+)">.*?<td class="quantity">(\d+)<\/td>/g);
  return [...rows].map(([, sku, quantity]) => `${quantity} x ${sku}`).sort();
}

/** The episode's grade from its HAR document: see the top of this file. `shopUrl` is the shop's root. */
export function gradeShopEpisodeFromHar(har: Har, shopUrl: string = SHOP_URL): ShopGrade {
  const entries = har.log.entries;
  const checkoutUrl = new URL("checkout", shopUrl).href;
  const checkouts = entries.filter((e) => e.request.method === "POST" && e.request.url === checkoutUrl);
  const placed = checkouts.filter((e) => e.response.status === 303);
  if (placed.length !== 1)
    return {
      passed: false,
      reason: `the browser checked out ${placed.length} times (${checkouts.length} checkout POSTs), not once`,
    };
  const orderUrl = locationOf(placed[0]);
  const orderId = orderUrl === undefined ? null : new URL(orderUrl).searchParams.get("id");
  if (orderUrl === undefined || orderId === null || !orderUrl.startsWith(new URL("order", shopUrl).href))
    return { passed: false, reason: `the checkout led to ${orderUrl ?? "no page"}, not an order's page` };
  const confirmation = entries.find(
    (e) => e.request.method === "GET" && e.request.url === orderUrl && e.response.status === 200,
  );
  const html = confirmation && wholeText(confirmation);
  if (html === undefined) return { passed: false, reason: `the browser never got order ${orderId}'s page whole` };
  if (!html.includes(`<span id="order-id">${orderId}</span>`))
    return { passed: false, reason: `the page of order ${orderId} does not show that order` };
  const bought = itemsOnPage(html);
  const wanted = SHOP_TASK_SKUS.map((sku) => `1 x ${sku}`).sort();
  if (JSON.stringify(bought) !== JSON.stringify(wanted))
    return {
      passed: false,
      reason: `order ${orderId} holds ${bought.join(", ") || "nothing"}, not ${wanted.join(", ")}`,
    };
  return { passed: true, reason: `order ${orderId} holds ${wanted.join(", ")}`, orderId };
}
