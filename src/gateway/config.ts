// The gateway's configuration: MULTIENV_GATEWAY_CONFIG (JSON; its schema is src/protocol/gateway-config.ts) and
// MULTIENV_CONTROL_TOKEN. Every problem is reported on one line naming its field, e.g.
// `MULTIENV_GATEWAY_CONFIG.sites.shop.server: expected an http:// URL`.
import { ENV_VARS } from "../protocol/env";
import { gatewayConfigSchema, type GatewayConfig } from "../protocol/gateway-config";
import { parseServiceConfig, tokenFromEnv } from "../protocol/service-config";

export {
  gatewayConfigSchema,
  type GatewayConfig,
  type GatewayConfigInput,
  type SiteUpstreams,
} from "../protocol/gateway-config";

export const CONFIG_ENV = ENV_VARS.gatewayConfig;
export const TOKEN_ENV = ENV_VARS.controlToken;

/** Parses the config JSON text; throws ServiceConfigError naming every problem on one line. */
export function parseGatewayConfig(text: string | undefined): GatewayConfig {
  return parseServiceConfig(CONFIG_ENV, text, gatewayConfigSchema, "the gateway's JSON config");
}

/**
 * The control token from the environment; throws ServiceConfigError when it is missing or could be guessed or mangled.
 */
export function readControlToken(env: NodeJS.ProcessEnv): string {
  return tokenFromEnv(TOKEN_ENV, env, "the deploy's control token");
}
