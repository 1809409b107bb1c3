// Sign-in: a site's session (Playwright storage state, from its server's /session through the gateway) loaded
// into a computer's browser over DevTools through the gateway; sign-out removes the site's cookies and storage.
// playwright-core's connectOverCDP is the DevTools client; connecting sends the control token on both the
// /json/version request and the WebSocket. Disconnecting leaves the computer's browser running.
import { chromium, type Browser, type BrowserContext, type Page } from "playwright-core";
import { covers, isWildcard } from "../../protocol/host-names";
import { gatewayClient, sitePath } from "../../protocol/gateway-client";
import { parseStorageState, SESSION_PATH, type StorageState } from "../../protocol/session";
import type { GatewayAccess } from "../stack/outputs";

export interface SignInTarget {
  access: GatewayAccess;
  site: string;
  computer: string;
}

/** Reads the site's session through the gateway. */
export async function fetchSession(access: GatewayAccess, site: string): Promise<StorageState> {
  const gateway = gatewayClient(access);
  const response = await gateway.send(
    `reading site ${site}'s session through the gateway`,
    sitePath(site, SESSION_PATH),
  );
  if (!response.ok)
    throw await gateway.failure(
      `site ${site} did not give its session (GET ${sitePath(site, SESSION_PATH)})`,
      response,
    );
  let json: unknown;
  try {
    json = JSON.parse(await response.text());
  } catch {
    throw new Error(`site ${site}'s session is not JSON; its /session must answer Playwright storage state`);
  }
  const parsed = parseStorageState(json);
  if (!parsed.ok) throw new Error(`site ${site}'s session is not Playwright storage state: ${parsed.problem}`);
  return parsed.state;
}

/**
 * Runs `use` on the computer's browser (its default context) over DevTools through the gateway, then disconnects,
 * leaving the browser running.
 */
export async function withComputerBrowser<T>(
  access: GatewayAccess,
  computer: string,
  use: (context: BrowserContext, browser: Browser) => Promise<T>,
): Promise<T> {
  let browser: Browser;
  try {
    const gateway = gatewayClient(access);
    browser = await chromium.connectOverCDP(gateway.cdpUrl(computer), {
      headers: { Authorization: gateway.authorization() },
      timeout: 30_000,
    });
  } catch (error) {
    const reason = (error instanceof Error ? error.message : String(error)).split("\n")[0];
    throw new Error(`could not reach computer ${computer}'s browser over DevTools through the gateway: ${reason}`, {
      cause: error,
    });
  }
  try {
    // The browser's own (default) context: the one its tabs live in and its cookies persist in.
    const context = browser.contexts()[0];
    if (context === undefined) throw new Error(`computer ${computer}'s browser has no default context`);
    return await use(context, browser);
  } finally {
    // Over CDP this only disconnects; the computer's browser keeps running. A gateway that went quiet does not
    // hold the command up.
    await Promise.race([browser.close().catch(() => undefined), new Promise((r) => setTimeout(r, 5_000).unref())]);
  }
}

/**
 * A blank page whose every request is answered locally, so visiting an origin to reach its storage sends nothing to it.
 */
async function offlinePageAt(context: BrowserContext, origin: string): Promise<Page> {
  const page = await context.newPage();
  await page.route("**/*", (route) =>
    route.fulfill({ status: 200, contentType: "text/html", body: "<!doctype html><title>multienv</title>" }),
  );
  await page.goto(origin);
  return page;
}

/** Loads the site's session into the computer's browser: its cookies, and each origin's local storage. */
export async function signIn(target: SignInTarget): Promise<{ cookies: number; origins: number }> {
  const state = await fetchSession(target.access, target.site);
  return withComputerBrowser(target.access, target.computer, async (context) => {
    if (state.cookies.length > 0) await context.addCookies(state.cookies);
    let origins = 0;
    for (const { origin, localStorage } of state.origins) {
      if (localStorage.length === 0) continue;
      const page = await offlinePageAt(context, origin);
      try {
        await page.evaluate((items) => {
          // Runs in the page, where localStorage is the origin's (the project's TypeScript lib has no DOM types).
          const storage = (globalThis as unknown as { localStorage: { setItem(name: string, value: string): void } })
            .localStorage;
          for (const { name, value } of items) storage.setItem(name, value);
        }, localStorage);
        origins += 1;
      } finally {
        await page.close();
      }
    }
    return { cookies: state.cookies.length, origins };
  });
}

/**
 * True when a cookie for `cookieDomain` (`github.com`, or `.github.com` for it and its subdomains) belongs to a site
 * with `domains`.
 */
export function cookieBelongsTo(cookieDomain: string, domains: readonly string[]): boolean {
  const host = cookieDomain.toLowerCase().replace(/^\./, "");
  // `*.s` covers the names under s; a `.s` cookie is sent to exactly those names too.
  return domains.some(
    (pattern) =>
      covers(pattern, host) || (isWildcard(pattern) && cookieDomain.startsWith(".") && pattern.slice(2) === host),
  );
}

/** The origins whose storage a site with `domains` may hold: each exact domain over http and https. */
function originsOf(domains: readonly string[]): string[] {
  return domains.filter((d) => !isWildcard(d)).flatMap((d) => [`https://${d}`, `http://${d}`]);
}

/**
 * Signs the computer's browser out of the site: removes every cookie of the site's domains, and clears the
 * storage of its origins (each exact domain, each origin its session names, and each open tab's origin under its
 * domains).
 */
export async function signOut(
  target: SignInTarget & { domains: readonly string[] },
): Promise<{ cookies: number; origins: number }> {
  let sessionOrigins: string[] = [];
  try {
    sessionOrigins = (await fetchSession(target.access, target.site)).origins.map((o) => o.origin);
  } catch {
    // The session names origins only as a hint; the site's domains decide what is cleared.
  }
  return withComputerBrowser(target.access, target.computer, async (context) => {
    const doomed = (await context.cookies()).filter((c) => cookieBelongsTo(c.domain, target.domains));
    for (const cookie of doomed)
      await context.clearCookies({ name: cookie.name, domain: cookie.domain, path: cookie.path });
    const tabOrigins = context
      .pages()
      .map((p) => p.url())
      .filter((u) => /^https?:/.test(u))
      .map((u) => new URL(u))
      .filter((u) => target.domains.some((d) => covers(d, u.hostname)))
      .map((u) => u.origin);
    const origins = [...new Set([...originsOf(target.domains), ...sessionOrigins, ...tabOrigins])];
    const page = await context.newPage();
    try {
      const cdp = await context.newCDPSession(page);
      for (const origin of origins) await cdp.send("Storage.clearDataForOrigin", { origin, storageTypes: "all" });
    } finally {
      await page.close();
    }
    return { cookies: doomed.length, origins: origins.length };
  });
}

/**
 * Closes the computer's browser (DevTools `Browser.close`), ending every connection it holds open. A site proxy
 * logs a connection when it ends, so a browser's idle keep-alive tunnels reach the log only once they close;
 * `down` closes the browsers before it reads the logs, so the evidence holds every host they reached.
 */
export async function closeBrowser(access: GatewayAccess, computer: string): Promise<void> {
  await withComputerBrowser(access, computer, async (_context, browser) => {
    const session = await browser.newBrowserCDPSession();
    // The browser goes away while answering, so the answer may never come: do not wait for it.
    void session.send("Browser.close").catch(() => undefined);
    await new Promise<void>((resolve) => {
      browser.once("disconnected", () => resolve());
      setTimeout(resolve, 5_000).unref();
    });
  });
}
