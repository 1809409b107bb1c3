// A task stack's outputs (docs/design.md "Outputs"), as plain data: what MultiEnv exports and what the runner reads.
// The types live here once, so the program and the runner cannot drift apart.
import type { SelfTestOutput } from "../protocol/self-test";
import type { ComputerNetwork, LiveReason, LiveWebsiteMark, Reaching, ReplayedWebsiteMark } from "./types";

export type { SelfTestCheckResult, SelfTestOutput, SelfTestResults } from "../protocol/self-test";

export interface WebsiteOutput {
  /** False for a replayed live site: it is served from its recording. */
  live: boolean;
  /** True for a live site served from its recording (`replayedWebsites` has the recording). */
  replayed?: boolean;
  /** Replayed sites: the further names its recording answers at (routed inside the env like its domains). */
  allowHosts?: string[];
  domains: string[];
  /** The site's server through the gateway, `<gatewayUrl>/svc/<site>/`. */
  svcUrl: string;
  /** Synthetic sites only: its pages through the gateway, `<gatewayUrl>/website/<site>/`. */
  browseUrl?: string;
}

export interface ComputerOutput {
  network: ComputerNetwork;
  reaching: Reaching;
  siteTable: Record<string, string[]>;
  /** The tabs its browser opens at launch (and a reset opens again). */
  startTabs: string[];
  /**
   * DevTools through the gateway: opened by this computer's agent token (the secret output `agentTokens`, what an
   * agent is given) or the control token, as `Authorization: Bearer <token>`.
   */
  cdpUrl: string;
}

/**
 * The secret output `agentTokens`: computer -> its agent token, accepted by the gateway on that computer's `cdpUrl`
 * alone (`computerAgentToken` in src/protocol/auth.ts).
 */
export type AgentTokensOutput = Record<string, string>;

/** The stack outputs, the control token and the agent tokens aside (secrets, read by name). */
export interface StackOutputValues {
  gatewayUrl: string;
  websites: Record<string, WebsiteOutput>;
  computers: Record<string, ComputerOutput>;
  /** True when the env is live: `liveReasons` says why. */
  live: boolean;
  /** Each live site served live and each computer reaching the public web; empty when the env is reproducible. */
  liveReasons: LiveReason[];
  liveWebsites: LiveWebsiteMark[];
  replayedWebsites: ReplayedWebsiteMark[];
  reproducible: boolean;
  captureTraffic: boolean;
  selfTest: SelfTestOutput;
}
