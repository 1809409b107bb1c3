// The replay server's JSON config (MULTIENV_REPLAY_SERVER_CONFIG) and its control token
// (MULTIENV_REPLAY_SERVER_TOKEN): its one schema, read by the replay server (src/replay-server/).
import { z } from "zod";

export const REPLAY_SERVER_ENV = {
  config: "MULTIENV_REPLAY_SERVER_CONFIG",
  token: "MULTIENV_REPLAY_SERVER_TOKEN",
} as const;

const port = z.number().int().min(0).max(65535);
const listen = z.strictObject({ host: z.string().min(1), port });
const names = z.array(z.string().min(1, "an empty name"));

export const replayServerConfigSchema = z.strictObject({
  /** The site's listener: every request on it is answered from the recording (the gateway's frontend upstream). */
  listen,
  /** The runner's listener (through the gateway): `/healthz`, the counters, the episode reset. Bearer token. */
  control: listen,
  /** The HAR 1.2 file to serve, as the container sees it. */
  recording: z.string().min(1, "the path of a HAR file"),
  /** Query parameters left out of every comparison (volatile ones: cache busters, timestamps). */
  ignoreParams: names.default([]),
  /**
   * Body fields left out of every comparison: a form field's name, or a JSON member's name (at any depth) or its
   * dotted path from the top (`meta.sentAt`).
   */
  ignoreBodyFields: names.default([]),
  /** A request body larger than this is refused (413) rather than held to compare. */
  maxBodyBytes: z
    .number()
    .int()
    .positive()
    .default(16 * 1024 * 1024),
  headersTimeoutMs: z.number().int().positive().default(30_000),
  /**
   * A directory the server owns where the episode's counters and what it served are kept (`episode.json`, replaced
   * whole at the end of each loop turn that changed them), so a restarted server goes on with the episode: its
   * repeats where they were, its counters. Without it a restart starts a new episode.
   */
  stateDir: z.string().min(1, "a directory the replay server can write").optional(),
});

export type ReplayServerConfig = z.output<typeof replayServerConfigSchema>;

/** Counters of one episode's exchanges: answered from an exact match, a fuzzy one, or missed (404). */
export interface ReplayCounters {
  exact: number;
  fuzzy: number;
  missed: number;
}

/** The control listener's routes. */
export const REPLAY_CONTROL_PATHS = {
  health: "/healthz",
  counters: "/replay/v1/counters",
  reset: "/replay/v1/reset",
} as const;

/** The response header that says how the replay server answered: `exact`, `fuzzy`, `miss` or `refused`. */
export const REPLAY_HEADER = "X-Agentenv-Replay";

/**
 * On a miss, the recorded URL nearest the one asked for, for the site proxy's `replay-miss` line. The gateway lets it
 * through from replay servers alone, so no site's own answer can put words in that line.
 */
export const REPLAY_NEAREST_HEADER = "X-Agentenv-Replay-Nearest";
