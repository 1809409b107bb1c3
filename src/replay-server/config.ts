// The replay server's configuration: MULTIENV_REPLAY_SERVER_CONFIG (JSON; its schema is in
// src/protocol/replay-server-config.ts) and MULTIENV_REPLAY_SERVER_TOKEN (the control listener's bearer token).
// Every problem is reported on one line naming its field, e.g. `MULTIENV_REPLAY_SERVER_CONFIG.recording: ...`.
import { REPLAY_SERVER_ENV, replayServerConfigSchema, type ReplayServerConfig } from "../protocol/replay-server-config";
import { parseServiceConfig, tokenFromEnv } from "../protocol/service-config";

/** Config and token from the environment; throws ServiceConfigError naming every problem on one line. */
export function readReplayServerEnv(env: NodeJS.ProcessEnv): { config: ReplayServerConfig; token: string } {
  const config = parseServiceConfig(
    REPLAY_SERVER_ENV.config,
    env[REPLAY_SERVER_ENV.config],
    replayServerConfigSchema,
    "the replay server's JSON config",
  );
  const token = tokenFromEnv(REPLAY_SERVER_ENV.token, env, "the replay server's control token");
  return { config, token };
}
