// What a computer's browser shows, read over DevTools through the gateway with the control token (the same
// connection sign-in and reset use): its open tabs, the one on screen, and a PNG of it. Nothing here clicks, types
// or navigates: an operator looking must not change what the agent sees.
import type { BrowserContext, Page } from "playwright-core";
import { withComputerBrowser } from "../lifecycle/sign-in";
import type { GatewayAccess } from "../stack/outputs";

/** One open tab. */
export interface Tab {
  url: string;
  title: string;
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

const PAGE_QUESTION_MS = 3_000;

/** `promise`, or `fallback` once `ms` have passed (a page busy with a long script answers nothing). */
function within<T>(promise: Promise<T>, ms: number, fallback: T): Promise<T> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(fallback), ms);
    timer.unref();
    promise.then(
      (value) => (clearTimeout(timer), resolve(value)),
      () => (clearTimeout(timer), resolve(fallback)),
    );
  });
}

/** The tabs of the browser's default context, in its order, with their titles. */
export async function tabsOf(context: BrowserContext): Promise<Tab[]> {
  return Promise.all(
    context.pages().map(async (page) => ({ url: page.url(), title: await within(page.title(), PAGE_QUESTION_MS, "") })),
  );
}

/**
 * The tab on the computer's screen: the one whose document is visible (a headless Chromium shows one tab of a window,
 * as a headed one does), the last such when several are; else the first tab. Undefined when no tab is open.
 */
export async function visibleTab(context: BrowserContext): Promise<Page | undefined> {
  const pages = context.pages();
  const states = await Promise.all(
    pages.map((page) =>
      within(
        page.evaluate(
          () => (globalThis as unknown as { document: { visibilityState: string } }).document.visibilityState,
        ),
        PAGE_QUESTION_MS,
        "unknown",
      ),
    ),
  );
  const visible = pages.filter((_, i) => states[i] === "visible");
  return visible.at(-1) ?? pages[0];
}

/** The computer's open tabs. */
export async function computerTabs(access: GatewayAccess, computer: string): Promise<Tab[]> {
  return withComputerBrowser(access, computer, (context) => tabsOf(context));
}

/** A PNG of the visible tab (DevTools `Page.captureScreenshot`: the page as painted, nothing emulated). */
export async function capturePng(context: BrowserContext, page: Page): Promise<Buffer> {
  const session = await context.newCDPSession(page);
  try {
    const { data } = (await session.send("Page.captureScreenshot", { format: "png" })) as { data: string };
    return Buffer.from(data, "base64");
  } finally {
    await session.detach().catch(() => undefined);
  }
}

/** A PNG of the computer's visible tab, with the tab it shows; an error when the browser has no tab open. */
export async function screenshotComputer(
  access: GatewayAccess,
  computer: string,
): Promise<{ png: Buffer; url: string; title: string }> {
  return withComputerBrowser(access, computer, async (context) => {
    const page = await visibleTab(context);
    if (page === undefined) throw new Error(`computer ${computer}'s browser has no tab open`);
    const png = await capturePng(context, page);
    return { png, url: page.url(), title: await within(page.title(), PAGE_QUESTION_MS, "") };
  });
}

/** The file name of a computer's screenshot taken at `at`: `<computer>-<UTC time>.png`, sortable and colon-free. */
export function screenshotFileName(computer: string, at: Date): string {
  return `${computer}-${at.toISOString().replace(/[:.]/g, "-")}.png`;
}
