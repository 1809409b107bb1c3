// The few words the supervisor and its proxy processes exchange over the IPC channel.
// A proxy started by the supervisor loads everything, says `ready`, and serves only once told `start`.

/** Set (to "1") in the environment of a proxy process the supervisor started. */
export const STANDBY_ENV = "MULTIENV_SITE_PROXY_STANDBY";

export const StandbyMessage = {
  /** Proxy -> supervisor: loaded and configured, waiting to be told to serve. */
  ready: "ready",
  /** Supervisor -> proxy: start serving now. */
  start: "start",
} as const;
