// The pieces of the capture collector: a local command (src/providers LocalCommand) the program declares when capture
// is on or the computers keep request logs, whose *delete* step runs the same collection `multienv collect` does. It
// depends on the gateway, the captures volume and the computers' proxies, so on a plain `pulumi destroy` the engine
// deletes it (and so collects) while they still exist. Everything the delete step needs travels in its environment,
// which Pulumi keeps (encrypted, since the control token is a secret) in the resource's state.
//
// Pure: the program builds these from the plan and its outputs; `multienv collect --from-env` reads them back.
import type { GatewayTunnel } from "./targets/ssh";
import type { LiveReason, LiveWebsiteMark, Plan } from "./types";
import type { GatewayPortForward } from "../protocol/port-forward";

/** The environment variables the delete step reads. */
export const COLLECTOR_ENV = {
  stack: "MULTIENV_STACK",
  gatewayUrl: "MULTIENV_GATEWAY_URL",
  controlToken: "MULTIENV_CONTROL_TOKEN",
  /** JSON CollectorContext. */
  context: "MULTIENV_COLLECT_CONTEXT",
  /** Optional: where to store artifacts (default artifacts/<stack> under the project directory). */
  artifactsDir: "MULTIENV_ARTIFACTS_DIR",
  /**
   * Remote hosts: JSON GatewayTunnel, the SSH tunnel `gatewayUrl` is the local end of. The delete step brings it
   * up first: a `pulumi destroy` from a new shell (or after a reboot) finds it down.
   */
  gatewayTunnel: "MULTIENV_GATEWAY_TUNNEL",
  /**
   * Kubernetes: JSON GatewayPortForward, the gateway's pod (`gatewayUrl` names it, never dialled). The delete step
   * opens a port-forward to it for the collection's duration.
   */
  gatewayPortForward: "MULTIENV_GATEWAY_PORT_FORWARD",
} as const;

/** What the collection needs to know about the env besides how to reach its gateway. */
export interface CollectorContext {
  computers: string[];
  syntheticDomains: string[];
  /** Live sites served from a recording: their replay servers' counters are collected. */
  replayedSites?: string[];
  live: boolean;
  /**
   * Why the env is live: each live site served live and each computer reaching the public web; absent in the context
   * of an env deployed before it, whose live sites alone were named.
   */
  liveReasons?: LiveReason[];
  liveWebsites: LiveWebsiteMark[];
  captureTraffic: boolean;
}

/** The collection context of a planned env. */
export function collectorContext(
  plan: Pick<Plan, "computers" | "websites" | "live" | "liveReasons" | "liveWebsites" | "capture">,
): CollectorContext {
  return {
    computers: plan.computers.map((c) => c.name),
    // A replayed site's names are routed inside the env as a synthetic site's are.
    syntheticDomains: plan.websites.flatMap((w) =>
      !w.live ? w.domains : w.replay ? [...w.domains, ...w.allowHosts] : [],
    ),
    replayedSites: plan.websites.filter((w) => w.replay !== undefined).map((w) => w.name),
    live: plan.live,
    liveReasons: plan.liveReasons,
    liveWebsites: plan.liveWebsites,
    captureTraffic: plan.capture.enabled,
  };
}

export interface CaptureCollectorOptions {
  /** Make a failed collection fail the delete step, so `pulumi destroy` stops before the captures are gone. */
  failOnCaptureError?: boolean;
}

/**
 * The collector command's commands. `create` does nothing (the collector exists only to be deleted); `delete` runs
 * the collection from the project directory (where Pulumi runs the project's dynamic providers),
 * closing the computers' browsers first so the connections they hold end up in the site-proxy logs.
 */
export function captureCollectorCommands(options: CaptureCollectorOptions = {}): { create: string; delete: string } {
  const flags = options.failOnCaptureError ? " --fail-on-capture-error" : "";
  return {
    create: "true",
    delete: `node bin/multienv.js collect --from-env --end-connections${flags}`,
  };
}

/** The delete step's environment (values may be Pulumi Outputs in the program; here they are the plain strings). */
export function captureCollectorEnvironment(values: {
  stack: string;
  gatewayUrl: string;
  controlToken: string;
  context: CollectorContext;
  gatewayTunnel?: GatewayTunnel;
  gatewayPortForward?: GatewayPortForward;
}): Record<string, string> {
  return {
    [COLLECTOR_ENV.stack]: values.stack,
    [COLLECTOR_ENV.gatewayUrl]: values.gatewayUrl,
    [COLLECTOR_ENV.controlToken]: values.controlToken,
    [COLLECTOR_ENV.context]: JSON.stringify(values.context),
    ...(values.gatewayTunnel === undefined
      ? {}
      : { [COLLECTOR_ENV.gatewayTunnel]: JSON.stringify(values.gatewayTunnel) }),
    ...(values.gatewayPortForward === undefined
      ? {}
      : { [COLLECTOR_ENV.gatewayPortForward]: JSON.stringify(values.gatewayPortForward) }),
  };
}

/** A JSON variable of the collector's environment, parsed; undefined when unset, a one-line error when not JSON. */
function jsonVariable<T>(env: NodeJS.ProcessEnv, name: string): T | undefined {
  const text = env[name];
  if (!text) return undefined;
  try {
    return JSON.parse(text) as T;
  } catch (error) {
    throw new Error(`collect --from-env: ${name} is not JSON (${(error as Error).message})`, { cause: error });
  }
}

/** Reads the collector's environment back; a one-line error naming the variable when one is missing or bad. */
export function readCollectorEnvironment(env: NodeJS.ProcessEnv): {
  stack: string;
  gatewayUrl: string;
  controlToken: string;
  context: CollectorContext;
  artifactsDir?: string;
  gatewayTunnel?: GatewayTunnel;
  gatewayPortForward?: GatewayPortForward;
} {
  const required = (name: string) => {
    const value = env[name];
    if (value === undefined || value === "")
      throw new Error(`collect --from-env: ${name} is not set; the capture collector's delete step sets it`);
    return value;
  };
  const stack = required(COLLECTOR_ENV.stack);
  const gatewayUrl = required(COLLECTOR_ENV.gatewayUrl);
  const controlToken = required(COLLECTOR_ENV.controlToken);
  let context: CollectorContext;
  try {
    const parsed = JSON.parse(required(COLLECTOR_ENV.context)) as Partial<CollectorContext>;
    context = {
      computers: parsed.computers ?? [],
      syntheticDomains: parsed.syntheticDomains ?? [],
      live: parsed.live === true,
      ...(parsed.liveReasons === undefined ? {} : { liveReasons: parsed.liveReasons }),
      liveWebsites: parsed.liveWebsites ?? [],
      captureTraffic: parsed.captureTraffic !== false,
    };
  } catch (error) {
    if (error instanceof SyntaxError)
      throw new Error(`collect --from-env: ${COLLECTOR_ENV.context} is not JSON (${error.message})`, { cause: error });
    throw error;
  }
  const gatewayTunnel = jsonVariable<GatewayTunnel>(env, COLLECTOR_ENV.gatewayTunnel);
  const gatewayPortForward = jsonVariable<GatewayPortForward>(env, COLLECTOR_ENV.gatewayPortForward);
  return {
    stack,
    gatewayUrl,
    controlToken,
    context,
    artifactsDir: env[COLLECTOR_ENV.artifactsDir] || undefined,
    ...(gatewayTunnel === undefined ? {} : { gatewayTunnel }),
    ...(gatewayPortForward === undefined ? {} : { gatewayPortForward }),
  };
}
