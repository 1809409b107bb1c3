// The browser computer's configuration: one JSON document in MULTIENV_BROWSER_CONFIG
// (docs/contracts.md "Service config extensions"). Bad input is one line naming the field.
import ipaddr from "ipaddr.js";
import { isAddress, isLocalhostName } from "../plan/names";

export interface BrowserConfig {
  /** The computer's site proxy, e.g. `http://demo-desk-proxy:3128`: Chromium's only way out. */
  proxy: string;
  /** Opened as tabs each time Chromium starts. */
  startTabs: string[];
  /**
   * Where the DevTools relay listens: the browser's own address (or a name for it) on its computer's network, where
   * only its site proxy is. Never an unspecified or loopback address.
   */
  cdpHost: string;
  /** The DevTools relay's port (the site proxy's control listener serves it under /cdp/). */
  cdpPort: number;
  /** The env CA certificate (PEM) written by the site proxy to a shared volume; trusted before launch. */
  caFile: string;
}

export class BrowserConfigError extends Error {}

const NAME = "MULTIENV_BROWSER_CONFIG";

export function parseBrowserConfig(text: string | undefined): BrowserConfig {
  if (text === undefined || text.trim() === "") throw new BrowserConfigError(`${NAME} is not set: give it the browser's JSON config {proxy, startTabs, cdpHost, cdpPort, caFile}`);
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (e) {
    throw new BrowserConfigError(`${NAME} is not JSON (${(e as Error).message}): give it the browser's JSON config {proxy, startTabs, cdpHost, cdpPort, caFile}`);
  }
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) throw new BrowserConfigError(`${NAME} must be a JSON object {proxy, startTabs, cdpHost, cdpPort, caFile}`);
  const o = raw as Record<string, unknown>;
  const known = new Set(["proxy", "startTabs", "cdpHost", "cdpPort", "caFile"]);
  for (const key of Object.keys(o)) if (!known.has(key)) throw new BrowserConfigError(`${NAME}.${key}: unknown field; the fields are proxy, startTabs, cdpHost, cdpPort, caFile`);
  if (typeof o.proxy !== "string" || !/^https?:\/\/[^/]+\/?$/.test(o.proxy)) throw new BrowserConfigError(`${NAME}.proxy: must be the site proxy's URL, e.g. "http://desk-proxy:3128"`);
  const startTabs = o.startTabs ?? [];
  if (!Array.isArray(startTabs) || startTabs.some((t) => typeof t !== "string")) throw new BrowserConfigError(`${NAME}.startTabs: must be a list of URLs`);
  startTabs.forEach((t: string, i: number) => {
    try {
      new URL(t);
    } catch {
      throw new BrowserConfigError(`${NAME}.startTabs[${i}]: "${t}" is not a URL`);
    }
  });
  if (typeof o.cdpHost !== "string" || o.cdpHost.trim() === "") throw new BrowserConfigError(`${NAME}.cdpHost: must be the browser's address or name on its computer's network, e.g. "demo-desk-browser"`);
  const hostProblem = relayHostProblem(o.cdpHost);
  if (hostProblem) throw new BrowserConfigError(`${NAME}.cdpHost: "${o.cdpHost}" ${hostProblem}`);
  const cdpPort = o.cdpPort ?? 9222;
  if (typeof cdpPort !== "number" || !Number.isInteger(cdpPort) || cdpPort < 1 || cdpPort > 65535) throw new BrowserConfigError(`${NAME}.cdpPort: must be a TCP port number, e.g. 9222`);
  if (typeof o.caFile !== "string" || !o.caFile.startsWith("/")) throw new BrowserConfigError(`${NAME}.caFile: must be the absolute path of the env CA (PEM), e.g. "/var/lib/multienv/ca/ca.pem"`);
  return { proxy: o.proxy, startTabs: startTabs as string[], cdpHost: o.cdpHost, cdpPort, caFile: o.caFile };
}

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
  if (range === "unspecified") return "is an unspecified address, which listens on every network; give the browser's address on its computer's network";
  if (range === "loopback") return "is a loopback address, which only the browser's own container reaches; give its address on its computer's network";
  return undefined;
}
