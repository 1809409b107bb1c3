// A task stack's outputs as the runner reads them (docs/design.md "Outputs"), and how they are shown.
// The Automation API hands outputs back decrypted, each flagged `secret`; the control token is one of them.
// Nothing here prints a secret unless the caller asked for it by name.
import type { OutputMap } from "@pulumi/pulumi/automation";
import type { GatewayTunnel } from "../../plan/targets/ssh";
import { liveWebsiteReason } from "../../plan/live";
import type { LiveReason, LiveWebsiteMark, ReplayedWebsiteMark } from "../../plan/types";
import type {
  AgentTokensOutput,
  ComputerOutput,
  SelfTestOutput,
  StackOutputValues,
  WebsiteOutput,
} from "../../plan/stack-outputs";
import { PORT_FORWARD_SCHEME, type GatewayPortForward } from "../../protocol/port-forward";
import { openGatewayReach, type GatewayReachOptions, type GatewayRoute } from "../../engines/gateway-reach";

/** What `check --json` and `up` show in place of a secret value. */
export const SECRET_PLACEHOLDER = "[secret]";

/** The outputs the runner relies on, typed (the control token aside: see gatewayAccessOf). */
export type StackOutputs = StackOutputValues;

/** Where to reach a deployed env's gateway as its operator. */
export interface GatewayAccess {
  /** A URL this process can dial: on the kubernetes target, the local end of a port-forward to the gateway's pod. */
  gatewayUrl: string;
  controlToken: string;
  /**
   * Computer -> its agent token (the secret output `agentTokens`): what an agent's harness is given to open that
   * computer's DevTools (`cdpUrl`, as `Authorization: Bearer <token>`), where the control token would open everything.
   * Always set when read from a stack (empty for a deploy made before agent tokens).
   */
  agentTokens?: AgentTokensOutput;
  /**
   * Ends what reaching the gateway holds open (the kubernetes target's port-forward); nothing elsewhere. Optional to
   * call: a port-forward holds no process alive.
   */
  close?(): Promise<void>;
  /**
   * Set when the port-forward could not open and the caller asked to go on (GatewayAccessOptions.onUnreachable): why,
   * in a line. `gatewayUrl` is then the output's, which fails every request.
   */
  unreachable?: string;
  /** The kubernetes target's: the port-forward `gatewayUrl` is the local end of (the output gatewayPortForward). */
  portForward?: GatewayPortForward;
}

/** The outputs in `map`, with defaults for what an older or partial deploy did not export. */
export function readOutputs(map: OutputMap): StackOutputs {
  const value = (key: string) => map[key]?.value;
  const websites = (value("websites") ?? {}) as Record<string, Partial<WebsiteOutput>>;
  const liveWebsites = (value("liveWebsites") ?? []) as LiveWebsiteMark[];
  const liveReasons = value("liveReasons");
  return {
    gatewayUrl: String(value("gatewayUrl") ?? ""),
    websites: Object.fromEntries(
      Object.entries(websites).map(([name, site]) => [
        name,
        { ...site, live: site.live === true, domains: site.domains ?? [] } as WebsiteOutput,
      ]),
    ),
    computers: (value("computers") ?? {}) as Record<string, ComputerOutput>,
    live: value("live") === true,
    // A deploy older than `liveReasons` named its live sites alone.
    liveReasons: Array.isArray(liveReasons) ? (liveReasons as LiveReason[]) : liveWebsites.map(liveWebsiteReason),
    liveWebsites,
    replayedWebsites: (value("replayedWebsites") ?? []) as ReplayedWebsiteMark[],
    reproducible: value("reproducible") !== false,
    captureTraffic: value("captureTraffic") === true,
    selfTest: (value("selfTest") ?? { skipped: true }) as SelfTestOutput,
  };
}

/**
 * The gateway's route (its URL and how it is reached), the decrypted control token and agent tokens; a one-line error
 * when the stack does not export the first two.
 */
export function gatewayRouteOf(
  map: OutputMap,
  stack: string,
): { route: GatewayRoute; controlToken: string; agentTokens: AgentTokensOutput } {
  const gatewayUrl = map.gatewayUrl?.value;
  const controlToken = map.controlToken?.value;
  if (typeof gatewayUrl !== "string" || gatewayUrl === "" || typeof controlToken !== "string" || controlToken === "") {
    throw new Error(
      `stack ${stack} has no gatewayUrl/controlToken outputs; deploy it first with \`multienv up ${stack}\``,
    );
  }
  const route: GatewayRoute = {
    gatewayUrl,
    ...(map.gatewayTunnel?.value !== undefined ? { gatewayTunnel: map.gatewayTunnel.value as GatewayTunnel } : {}),
    ...(map.gatewayPortForward?.value !== undefined
      ? { gatewayPortForward: map.gatewayPortForward.value as GatewayPortForward }
      : {}),
  };
  return { route, controlToken, agentTokens: (map.agentTokens?.value ?? {}) as AgentTokensOutput };
}

/**
 * The gateway URL and the control token, reachable from this process (openGatewayReach: a remote host's SSH tunnel
 * brought up, a port-forward opened to the kubernetes target's pod, whose local end is then `gatewayUrl`). Call
 * `close()` when done (a no-op but on kubernetes).
 */
export async function openGatewayAccess(
  map: OutputMap,
  stack: string,
  options: GatewayAccessOptions = {},
): Promise<GatewayAccess & { close(): Promise<void> }> {
  const { route, controlToken, agentTokens } = gatewayRouteOf(map, stack);
  const reach = await openGatewayReach(route, { owner: `stack ${stack}`, ...options });
  return {
    gatewayUrl: reach.url,
    controlToken,
    agentTokens,
    ...(route.gatewayPortForward !== undefined ? { portForward: route.gatewayPortForward } : {}),
    close: reach.close,
    ...(reach.unreachable !== undefined ? { unreachable: reach.unreachable } : {}),
  };
}

export type GatewayAccessOptions = Omit<GatewayReachOptions, "owner">;

/** Runs `use` with the gateway reachable (openGatewayAccess), closing what that opened afterwards. */
export async function withGatewayAccess<T>(
  map: OutputMap,
  stack: string,
  use: (access: GatewayAccess) => Promise<T>,
  options: GatewayAccessOptions = {},
): Promise<T> {
  const access = await openGatewayAccess(map, stack, options);
  try {
    return await use(access);
  } finally {
    await access.close();
  }
}

/** True when `gatewayUrl` names a pod (the kubernetes target), not an address: never dialled as it is. */
export function isPortForwardUrl(gatewayUrl: string): boolean {
  return gatewayUrl.startsWith(PORT_FORWARD_SCHEME);
}

/**
 * `url`, derived from the output `gatewayUrl` (a site's svcUrl or browseUrl, a computer's cdpUrl), on `localUrl`
 * instead: the rest of its path and query kept. A URL not under `gatewayUrl` is returned as it is.
 */
export function rebaseUrl(url: string, gatewayUrl: string, localUrl: string): string {
  const from = gatewayUrl.replace(/\/+$/, "");
  if (url !== from && !url.startsWith(`${from}/`) && !url.startsWith(`${from}?`)) return url;
  return localUrl.replace(/\/+$/, "") + url.slice(from.length);
}

/**
 * The outputs with every URL derived from `gatewayUrl` on `localUrl` (GatewayAccess's): what a test runner dials on
 * the kubernetes target, whose outputs name the gateway's pod. Unchanged where the URLs are already dialable.
 */
export function localOutputs(outputs: StackOutputs, localUrl: string): StackOutputs {
  const rebase = (url: string) => rebaseUrl(url, outputs.gatewayUrl, localUrl);
  return {
    ...outputs,
    gatewayUrl: localUrl,
    websites: Object.fromEntries(
      Object.entries(outputs.websites).map(([name, site]) => [
        name,
        {
          ...site,
          ...(site.svcUrl !== undefined ? { svcUrl: rebase(site.svcUrl) } : {}),
          ...(site.browseUrl !== undefined ? { browseUrl: rebase(site.browseUrl) } : {}),
        },
      ]),
    ),
    computers: Object.fromEntries(
      Object.entries(outputs.computers).map(([name, computer]) => [
        name,
        { ...computer, ...(computer.cdpUrl !== undefined ? { cdpUrl: rebase(computer.cdpUrl) } : {}) },
      ]),
    ),
  };
}

/** The synthetic sites' domain patterns: connections to them stay inside the env. */
export function syntheticDomainsOf(outputs: Pick<StackOutputs, "websites">): string[] {
  return Object.values(outputs.websites).flatMap((site) =>
    site.live ? [] : [...site.domains, ...(site.replayed ? (site.allowHosts ?? []) : [])],
  );
}

/** The outputs as plain values, each secret replaced by SECRET_PLACEHOLDER unless `showSecrets`. */
export function displayOutputs(map: OutputMap, showSecrets = false): Record<string, unknown> {
  return Object.fromEntries(
    Object.entries(map)
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([key, output]) => [key, output.secret && !showSecrets ? SECRET_PLACEHOLDER : output.value]),
  );
}

/** Displayed outputs (see displayOutputs) for a terminal: `key: value` lines, objects as indented JSON. */
export function formatDisplayed(shown: Record<string, unknown>): string {
  return Object.entries(shown)
    .map(
      ([key, value]) =>
        `  ${key}: ${typeof value === "string" ? value : JSON.stringify(value, null, 2).replace(/\n/g, "\n  ")}`,
    )
    .join("\n");
}
