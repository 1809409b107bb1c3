// What the proxy process and its supervisor agree on: where the configuration is, the exit status that means
// "do not start me again", and the two words they exchange over the IPC channel. Kept apart from config.ts so the
// supervisor loads none of the proxy's code (zod, TLS) itself.

import { ENV_VARS } from "../protocol/env";

/** The environment variable holding the proxy's JSON configuration (named once, with the others, in src/plan). */
export const CONFIG_ENV = ENV_VARS.siteProxyConfig;

/** The environment variable holding the token the control listener requires (`Authorization: Bearer <token>`). */
export const TOKEN_ENV = ENV_VARS.siteProxyToken;

/** Exit status for a configuration the proxy cannot start with; the supervisor does not restart on it. */
export const BAD_CONFIG_EXIT = 2;

/** Set (to "1") in the environment of a proxy process the supervisor started. */
export const STANDBY_ENV = "MULTIENV_SITE_PROXY_STANDBY";

/** A proxy started by the supervisor loads everything, says `ready`, and serves only once told `start`. */
export const StandbyMessage = {
  /** Proxy -> supervisor: loaded and configured, waiting to be told to serve. */
  ready: "ready",
  /** Supervisor -> proxy: start serving now. */
  start: "start",
} as const;
