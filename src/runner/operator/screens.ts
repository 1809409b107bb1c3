// What a computer's browser shows, read over DevTools through the gateway with the control token (the same
// connection sign-in and reset use): its open tabs, the one on screen, and a PNG of it. Nothing here clicks, types
// or navigates: an operator looking must not change what the agent sees.
//
// Which tab is on screen is what the browser says, never what a page says: DevTools' target list (`/json/list`)
// is the browser's, ordered by when each target was last shown, so its first page is the tab on screen. A page's
// own script can redefine `document.visibilityState` or `document.hidden`; it cannot reorder that list. Every
// DevTools step here ends within a bound, with an error naming the step and the computer.
import type { BrowserContext, Page } from "playwright-core";
import { gatewayClient } from "../../protocol/gateway-client";
import { withComputerBrowser } from "../lifecycle/sign-in";
import type { GatewayAccess } from "../stack/outputs";

/** One open tab. */
export interface Tab {
  url: string;
  title: string;
}

/** A page target as the browser lists it. */
export interface PageTarget extends Tab {
  /** DevTools' target id. */
  id: string;
}

/** Brings one of a computer's tabs to the front (DevTools' `/json/activate/<id>`), through the gateway. */
export async function activateTab(access: GatewayAccess, computer: string, targetId: string): Promise<void> {
  await gatewayClient(access).activateTab(
    computer,
    targetId,
    `computer ${computer}'s tab ${targetId} was not brought to the front`,
    AbortSignal.timeout(DEVTOOLS_STEP_MS),
  );
}

/** A PNG of a computer's visible tab, written to `file`. */
export interface Screenshot {
  computer: string;
  file: string;
  bytes: number;
  /** The tab it shows. */
  url: string;
  title: string;
}

/** How long one DevTools step may take (a page busy with a long script, a browser that went away). */
export const DEVTOOLS_STEP_MS = 15_000;

/** `promise`, or an error naming `what` once `ms` have passed. */
export function bounded<T>(promise: Promise<T>, what: string, ms = DEVTOOLS_STEP_MS): Promise<T> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${what} did not answer within ${ms / 1000} s`)), ms);
    timer.unref();
    promise.then(
      (value) => (clearTimeout(timer), resolve(value)),
      (error: unknown) => (clearTimeout(timer), reject(error instanceof Error ? error : new Error(String(error)))),
    );
  });
}

/**
 * The browser's page targets (DevTools `/json/list` through the gateway), the tab on screen first: the browser lists
 * its targets by when each was last shown.
 */
export async function pageTargets(access: GatewayAccess, computer: string): Promise<PageTarget[]> {
  const what = `computer ${computer}'s DevTools target list (GET /computers/${computer}/cdp/json/list)`;
  const targets = await gatewayClient(access).devtoolsTargets(computer, what, AbortSignal.timeout(DEVTOOLS_STEP_MS));
  return targets.filter((t) => t.type === "page").map(({ id, url, title }) => ({ id, url, title }));
}

/** The computer's open tabs, the one on screen first. */
export async function computerTabs(access: GatewayAccess, computer: string): Promise<Tab[]> {
  return (await pageTargets(access, computer)).map(({ url, title }) => ({ url, title }));
}

/** Each page's DevTools target id, asked once (of the browser: `Target.getTargetInfo` on the page's session). */
const targetIds = new WeakMap<Page, Promise<string>>();

async function askTargetId(context: BrowserContext, page: Page): Promise<string> {
  const session = await bounded(context.newCDPSession(page), "DevTools Target.attachToTarget");
  try {
    const { targetInfo } = (await bounded(session.send("Target.getTargetInfo"), "DevTools Target.getTargetInfo")) as {
      targetInfo: { targetId: string };
    };
    return targetInfo.targetId;
  } finally {
    void session.detach().catch(() => undefined);
  }
}

function targetIdOf(context: BrowserContext, page: Page): Promise<string> {
  let id = targetIds.get(page);
  if (id === undefined) {
    id = askTargetId(context, page);
    // A failed question is asked again next time.
    id.catch(() => targetIds.delete(page));
    targetIds.set(page, id);
  }
  return id;
}

/** The page of `context` that is DevTools target `targetId`; undefined when it is none of them (closed meanwhile). */
export async function pageOfTarget(context: BrowserContext, targetId: string): Promise<Page | undefined> {
  for (const page of context.pages()) if ((await targetIdOf(context, page)) === targetId) return page;
  return undefined;
}

/** A PNG of a tab (DevTools `Page.captureScreenshot`: the page as painted, nothing emulated). */
export async function capturePng(context: BrowserContext, page: Page): Promise<Buffer> {
  const session = await bounded(context.newCDPSession(page), "DevTools Target.attachToTarget");
  try {
    const { data } = (await bounded(
      session.send("Page.captureScreenshot", { format: "png" }),
      "DevTools Page.captureScreenshot",
    )) as { data: string };
    return Buffer.from(data, "base64");
  } finally {
    void session.detach().catch(() => undefined);
  }
}

/** A PNG of the computer's tab on screen, with its URL and title; an error when the browser has no tab open. */
export async function screenshotComputer(
  access: GatewayAccess,
  computer: string,
): Promise<{ png: Buffer; url: string; title: string }> {
  const [onScreen] = await pageTargets(access, computer);
  if (onScreen === undefined) throw new Error(`computer ${computer}'s browser has no tab open`);
  return withComputerBrowser(access, computer, async (context) => {
    const page = await pageOfTarget(context, onScreen.id);
    if (page === undefined) throw new Error(`computer ${computer}'s tab on screen (${onScreen.url}) closed meanwhile`);
    const png = await capturePng(context, page);
    return { png, url: onScreen.url, title: onScreen.title };
  });
}

/** The file name of a computer's screenshot taken at `at`: `<computer>-<UTC time>.png`, sortable and colon-free. */
export function screenshotFileName(computer: string, at: Date): string {
  return `${computer}-${at.toISOString().replace(/[:.]/g, "-")}.png`;
}
