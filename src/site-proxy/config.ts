// The site proxy's configuration (docs/design.md "Entry points", docs/contracts.md "Service config extensions"):
// one JSON object in MULTIENV_SITE_PROXY_CONFIG (its schema is src/protocol/site-proxy-config.ts), checked here so
// a mistake is one line naming each field.
import { siteProxyConfigSchema, type SiteProxyConfig } from "../protocol/site-proxy-config";
import { checkServiceConfig, parseServiceConfig, ServiceConfigError } from "../protocol/service-config";
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

/** The fewest characters (whitespace not counted) the control token may have. */
export const MIN_TOKEN_LENGTH = 16;

/** Why `token` cannot guard the control listener, or undefined when it can. */
export function tokenProblem(token: string | undefined): string | undefined {
  if (token === undefined || token === "") return "is not set";
  const visible = token.replace(/\s/g, "").length;
  if (visible === 0) return "is blank";
  if (visible < token.length - visible) return "is mostly whitespace";
  // An Authorization header loses the whitespace around its value: such a token could never be presented.
  if (token.trim() !== token) return "has whitespace around it";
  if (visible < MIN_TOKEN_LENGTH) return `is shorter than ${MIN_TOKEN_LENGTH} characters`;
  return undefined;
}

/** The control listener's token from the environment, or a one-line ServiceConfigError naming the variable. */
export function controlTokenFromEnv(env: NodeJS.ProcessEnv = process.env): string {
  const token = env[TOKEN_ENV];
  const problem = tokenProblem(token);
  if (problem)
    throw new ServiceConfigError(
      `${TOKEN_ENV}: ${problem}; set it to the computer's control token (at least ${MIN_TOKEN_LENGTH} characters, no whitespace)`,
    );
  return token!;
}
