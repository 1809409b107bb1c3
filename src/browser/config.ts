// The browser computer's configuration: one JSON document in MULTIENV_BROWSER_CONFIG (docs/contracts.md "Service
// config extensions"; its schema is src/protocol/browser-config.ts). Bad input is one line naming each field.
import { browserConfigSchema, type BrowserConfig } from "../protocol/browser-config";
import { ENV_VARS } from "../protocol/env";
import { parseServiceConfig } from "../protocol/service-config";

export { relayHostProblem, type BrowserConfig } from "../protocol/browser-config";

export function parseBrowserConfig(text: string | undefined): BrowserConfig {
  return parseServiceConfig(
    ENV_VARS.browserConfig,
    text,
    browserConfigSchema,
    "the browser's JSON config {proxy, startTabs, cdpHost, cdpPort, caFile, headful}",
  );
}
