// The site proxy's configuration (docs/design.md "Entry points", docs/contracts.md "Service config extensions"):
// one JSON object in MULTIENV_SITE_PROXY_CONFIG (its schema is src/protocol/site-proxy-config.ts), checked here so
// a mistake is one line naming each field.
import { siteProxyConfigSchema, type SiteProxyConfig } from "../protocol/site-proxy-config";
import { checkServiceConfig, parseServiceConfig, tokenFromEnv } from "../protocol/service-config";
import { CONFIG_ENV, TOKEN_ENV } from "./supervision";

export { siteProxyConfigSchema, type SiteProxyConfig } from "../protocol/site-proxy-config";

/** `raw` (decoded JSON) as the proxy's config; throws ServiceConfigError naming every problem. */
export function parseSiteProxyConfig(raw: unknown): SiteProxyConfig {
  return checkServiceConfig(CONFIG_ENV, raw, siteProxyConfigSchema);
}

/** Reads and checks the configuration from the environment. */
export function configFromEnv(env: NodeJS.ProcessEnv = process.env): SiteProxyConfig {
  return parseServiceConfig(CONFIG_ENV, env[CONFIG_ENV], siteProxyConfigSchema, "the proxy's JSON configuration");
}

/** The control listener's token from the environment, or a one-line ServiceConfigError naming the variable. */
export function controlTokenFromEnv(env: NodeJS.ProcessEnv = process.env): string {
  return tokenFromEnv(TOKEN_ENV, env, "the computer's control token");
}
