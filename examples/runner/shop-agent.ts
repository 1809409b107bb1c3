// One task on the sample shop, for a runner to use: a scripted agent that signs in, puts two products in the cart
// and checks out, driving the pages by their element ids as an agent script would, and the grade of an episode from
// the shop's data plane (`GET /svc/shop/data`) alone. A runner connects to a computer's browser over DevTools
// (chromium.connectOverCDP at the computer's cdpUrl, with its agent token) and hands `runShopEpisode` a page of it.
import type { Page } from "playwright-core";
import { z } from "zod";
import type { ShopData } from "../sites/common/shop-api";

/** The products the task asks for, one of each: what the agent buys and the grader looks for. */
export const SHOP_TASK_SKUS = ["mug", "notebook"] as const;

/** Where a computer's browser reaches the demo env's shop (stacks/Pulumi.demo.yaml). */
export const SHOP_URL = "https://shop.test/";

export interface ShopEpisode {
  /** The id the order confirmation showed. */
  orderId: string;
}

/**
 * Signs in with the demo account the sign-in page shows, adds one of each of SHOP_TASK_SKUS to the cart from its
 * product page and checks out; `shopUrl` is the shop's root (its synthetic origin, or /website/shop/ through a
 * gateway). Fails when a step does (a refusal on the page, an element missing).
 */
export async function runShopEpisode(page: Page, shopUrl: string = SHOP_URL): Promise<ShopEpisode> {
  await page.goto(shopUrl);
  await page.click("#nav-signin");
  const account = await page.textContent("#demo-account-name");
  const password = await page.textContent("#demo-account-password");
  if (!account || !password) throw new Error("the sign-in page shows no demo account");
  await page.fill("#account", account);
  await page.fill("#password", password);
  await page.click("#sign-in");
  await expectPage(page, "#products", "signing in");
  for (const sku of SHOP_TASK_SKUS) {
    await page.click("#nav-home");
    await page.click(`#product-${sku}`);
    await page.click("#add-to-cart");
    await expectPage(page, `#cart-item-${sku}`, `adding ${sku} to the cart`);
  }
  await page.click("#checkout");
  return { orderId: await expectPage(page, "#order-id", "checking out") };
}

/** The text of `selector` once the page shows it; the shop's refusal, as the error, when it shows that instead. */
async function expectPage(page: Page, selector: string, step: string): Promise<string> {
  await page.locator(`${selector}, #error`).first().waitFor();
  if ((await page.locator("#error").count()) > 0)
    throw new Error(`${step} was refused: ${await page.textContent("#error")}`);
  return (await page.textContent(selector)) ?? "";
}

const shopDataSchema: z.ZodType<ShopData> = z.object({
  orders: z.array(
    z.object({
      id: z.string(),
      account: z.string(),
      time: z.string(),
      totalCents: z.number(),
      currency: z.string(),
      items: z.array(
        z.object({
          sku: z.string(),
          name: z.string(),
          quantity: z.number(),
          unitPriceCents: z.number(),
          lineTotalCents: z.number(),
        }),
      ),
    }),
  ),
});

export interface ShopGrade {
  passed: boolean;
  /** Why, in one sentence. */
  reason: string;
  /** The order that passed. */
  orderId?: string;
}

/**
 * The episode's grade from the data plane's JSON: passed when the shop holds exactly one order and it is one of each
 * of SHOP_TASK_SKUS and nothing else. A second order fails too: the task is one checkout.
 */
export function gradeShopEpisode(dataJson: unknown): ShopGrade {
  const parsed = shopDataSchema.safeParse(dataJson);
  if (!parsed.success) return { passed: false, reason: `the data plane's answer is not the shop's orders` };
  const { orders } = parsed.data;
  if (orders.length !== 1) return { passed: false, reason: `the shop holds ${orders.length} orders, not one` };
  const [order] = orders;
  const bought = order.items.map((item) => `${item.quantity} x ${item.sku}`).sort();
  const wanted = SHOP_TASK_SKUS.map((sku) => `1 x ${sku}`).sort();
  if (JSON.stringify(bought) !== JSON.stringify(wanted))
    return {
      passed: false,
      reason: `order ${order.id} holds ${bought.join(", ") || "nothing"}, not ${wanted.join(", ")}`,
    };
  return { passed: true, reason: `order ${order.id} holds ${wanted.join(", ")}`, orderId: order.id };
}
