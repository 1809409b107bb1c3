// The capture server's configuration: MULTIENV_CAPTURE_SERVER_CONFIG (JSON; its schema is in
// src/protocol/gateway-config.ts, as the capture server ships in the gateway's image) and MULTIENV_CAPTURE_TOKEN.
// Every problem is reported on one line naming its field, e.g. `MULTIENV_CAPTURE_SERVER_CONFIG.container: ...`.
import { CAPTURE_SERVER_ENV, captureServerConfigSchema, type CaptureServerConfig } from "../protocol/gateway-config";
import { parseServiceConfig, tokenFromEnv } from "../protocol/service-config";

export const CONFIG_ENV = CAPTURE_SERVER_ENV.config;
export const TOKEN_ENV = CAPTURE_SERVER_ENV.token;

/** Config and token from the environment; throws ServiceConfigError naming every problem of the config on one line. */
export function readCaptureServerEnv(env: NodeJS.ProcessEnv): { config: CaptureServerConfig; token: string } {
  const config = parseServiceConfig(
    CONFIG_ENV,
    env[CONFIG_ENV],
    captureServerConfigSchema,
    "the capture server's JSON config",
  );
  const token = tokenFromEnv(TOKEN_ENV, env, `captureServerToken(control token, "${config.container}")`);
  return { config, token };
}
