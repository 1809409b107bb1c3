// The browser computer's configuration: one JSON document in MULTIENV_BROWSER_CONFIG
// (docs/contracts.md "Service config extensions"). Bad input is one line naming the field.

export interface BrowserConfig {
  /** The computer's site proxy, e.g. `http://demo-desk-proxy:3128`: Chromium's only way out. */
  proxy: string;
  /** Opened as tabs each time Chromium starts. */
  startTabs: string[];
  /** DevTools port on every address of the container (the site proxy relays it to the gateway). */
  cdpPort: number;
  /** The env CA certificate (PEM) written by the site proxy to a shared volume; trusted before launch. */
  caFile: string;
}

export class BrowserConfigError extends Error {}

const NAME = "MULTIENV_BROWSER_CONFIG";

export function parseBrowserConfig(text: string | undefined): BrowserConfig {
  if (text === undefined || text.trim() === "") throw new BrowserConfigError(`${NAME} is not set: give it the browser's JSON config {proxy, startTabs, cdpPort, caFile}`);
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (e) {
    throw new BrowserConfigError(`${NAME} is not JSON (${(e as Error).message}): give it the browser's JSON config {proxy, startTabs, cdpPort, caFile}`);
  }
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) throw new BrowserConfigError(`${NAME} must be a JSON object {proxy, startTabs, cdpPort, caFile}`);
  const o = raw as Record<string, unknown>;
  const known = new Set(["proxy", "startTabs", "cdpPort", "caFile"]);
  for (const key of Object.keys(o)) if (!known.has(key)) throw new BrowserConfigError(`${NAME}.${key}: unknown field; the fields are proxy, startTabs, cdpPort, caFile`);
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
  const cdpPort = o.cdpPort ?? 9222;
  if (typeof cdpPort !== "number" || !Number.isInteger(cdpPort) || cdpPort < 1 || cdpPort > 65535) throw new BrowserConfigError(`${NAME}.cdpPort: must be a TCP port number, e.g. 9222`);
  if (typeof o.caFile !== "string" || !o.caFile.startsWith("/")) throw new BrowserConfigError(`${NAME}.caFile: must be the absolute path of the env CA (PEM), e.g. "/var/lib/multienv/ca/ca.pem"`);
  return { proxy: o.proxy, startTabs: startTabs as string[], cdpPort, caFile: o.caFile };
}
