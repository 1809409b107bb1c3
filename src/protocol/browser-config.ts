// The browser computer's JSON config (MULTIENV_BROWSER_CONFIG): its one schema, read by the browser launcher and
// built by the plan (src/plan/services.ts builds values of BrowserConfigInput).
import ipaddr from "ipaddr.js";
import { z } from "zod";
import { isAddress, isLocalhostName } from "./host-names";

const relayHost = z
  .string({ error: "must be the browser's address or name on its computer's network, e.g. \"demo-desk-browser\"" })
  .refine((host) => host.trim() !== "", {
    error: "must be the browser's address or name on its computer's network, e.g. \"demo-desk-browser\"",
  })
  .superRefine((host, ctx) => {
    const problem = relayHostProblem(host);
    if (problem) ctx.addIssue({ code: "custom", message: `${JSON.stringify(host)} ${problem}`, input: host });
  });

export const browserConfigSchema = z.strictObject({
  /** The computer's site proxy, e.g. `http://demo-desk-proxy:3128`: Chromium's only way out. */
  proxy: z
    .string()
    .regex(/^https?:\/\/[^/]+\/?$/, { error: 'must be the site proxy\'s URL, e.g. "http://desk-proxy:3128"' }),
  /** Opened as tabs each time Chromium starts. */
  startTabs: z
    .array(
      z
        .string()
        .refine((tab) => URL.canParse(tab), { error: (issue) => `${JSON.stringify(issue.input)} is not a URL` }),
    )
    .default([]),
  /**
   * Where the DevTools relay listens: the browser's own address (or a name for it) on its computer's network, where
   * only its site proxy is. Never an unspecified or loopback address.
   */
  cdpHost: relayHost,
  /** The DevTools relay's port (the site proxy's control listener serves it under /cdp/). */
  cdpPort: z.number({ error: "must be a TCP port number, e.g. 9222" }).int().min(1).max(65535).default(9222),
  /** The env CA certificate (PEM) written by the site proxy to a shared volume; trusted before launch. */
  caFile: z
    .string({ error: 'must be the absolute path of the env CA (PEM), e.g. "/var/lib/multienv/ca/ca.pem"' })
    .startsWith("/", { error: 'must be the absolute path of the env CA (PEM), e.g. "/var/lib/multienv/ca/ca.pem"' }),
  /** Chromium on a display of Xvfb (started by the launcher, one per Chromium start) instead of headless. */
  headful: z.boolean({ error: "must be true or false" }).default(false),
});

export type BrowserConfig = z.output<typeof browserConfigSchema>;
export type BrowserConfigInput = z.input<typeof browserConfigSchema>;

/**
 * Why the DevTools relay may not listen on `host`, or undefined: an unspecified address would open DevTools on
 * every network the container is on, and a loopback one to nobody but the container itself (the proxy is elsewhere).
 */
export function relayHostProblem(host: string): string | undefined {
  if (isLocalhostName(host)) return "is a localhost name; give the browser's address or name on its computer's network";
  if (!isAddress(host)) return undefined;
  const bare = host.replace(/^\[|\]$/g, "");
  const address = ipaddr.IPv6.isValid(bare) ? ipaddr.process(bare) : ipaddr.parse(new URL(`http://${bare}/`).hostname);
  const range = address.range();
  if (range === "unspecified")
    return "is an unspecified address, which listens on every network; give the browser's address on its computer's network";
  if (range === "loopback")
    return "is a loopback address, which only the browser's own container reaches; give its address on its computer's network";
  return undefined;
}

/**
 * The browser launcher's own operations, answered by its DevTools relay beside DevTools (so they are reached the way
 * DevTools is: the gateway's `/computers/<name>/cdp/...`, the site proxy's `/cdp/...`). POST only; each answers JSON.
 * `freshProfile` ends the running Chromium and puts one on a new, empty profile at a blank tab in its place (the
 * launcher's standby, else one started then) (`FreshProfileAnswer`, once it answers on DevTools), the old profile
 * deleted by the next operation's start; `startTabs` opens the start tabs and closes every other tab
 * (`StartTabsAnswer`); `blankTab` closes every tab but a new blank one (`{}`). They run one at a time, in the order
 * asked. A reset ends an episode with `freshProfile`, then has the proxy's connections ended and its log marked, and
 * opens the start tabs once the sites are emptied and the captures started over.
 */
export const BROWSER_OPERATION_PATHS = {
  freshProfile: "/multienv/fresh-profile",
  startTabs: "/multienv/start-tabs",
  blankTab: "/multienv/blank-tab",
} as const;

export interface FreshProfileAnswer {
  /** The profile now in use: 1 at start, one more after each fresh profile. */
  profile: number;
  /** From the request to the new Chromium in use, in the launcher. */
  seconds: number;
  /**
   * Whether the launcher's standby (a Chromium it started ahead on that new, empty profile, up when asked) was
   * promoted; false when there was none that answered and a Chromium started for this fresh profile was waited for.
   */
  standby?: boolean;
}

export interface StartTabsAnswer {
  startTabs: number;
}
