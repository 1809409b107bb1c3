// A task stack's outputs as the runner reads them (docs/design.md "Outputs"), and how they are shown.
// The Automation API hands outputs back decrypted, each flagged `secret`; the control token is one of them.
// Nothing here prints a secret unless the caller asked for it by name.
import { execFileSync } from "node:child_process";
import type { OutputMap } from "@pulumi/pulumi/automation";
import { gatewayTunnelUp, type GatewayTunnel } from "../plan/ssh";
import type { LiveWebsiteMark } from "../plan/types";
import type { ComputerOutput, SelfTestOutput, StackOutputValues, WebsiteOutput } from "../protocol/outputs";

/** What `check --json` and `up` show in place of a secret value. */
export const SECRET_PLACEHOLDER = "[secret]";

/** The outputs the runner relies on, typed (the control token aside: see gatewayAccessOf). */
export type StackOutputs = StackOutputValues;

/** Where to reach a deployed env's gateway as its operator. */
export interface GatewayAccess {
  gatewayUrl: string;
  controlToken: string;
}

/** The outputs in `map`, with defaults for what an older or partial deploy did not export. */
export function readOutputs(map: OutputMap): StackOutputs {
  const value = (key: string) => map[key]?.value;
  const websites = (value("websites") ?? {}) as Record<string, Partial<WebsiteOutput>>;
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
    liveWebsites: (value("liveWebsites") ?? []) as LiveWebsiteMark[],
    reproducible: value("reproducible") !== false,
    captureTraffic: value("captureTraffic") === true,
    selfTest: (value("selfTest") ?? { skipped: true }) as SelfTestOutput,
  };
}

/** The gateway URL and the decrypted control token; a one-line error when the stack does not export them. */
export function gatewayAccessOf(map: OutputMap, stack: string): GatewayAccess {
  const gatewayUrl = map.gatewayUrl?.value;
  const controlToken = map.controlToken?.value;
  if (typeof gatewayUrl !== "string" || gatewayUrl === "" || typeof controlToken !== "string" || controlToken === "") {
    throw new Error(
      `stack ${stack} has no gatewayUrl/controlToken outputs; deploy it first with \`multienv up ${stack}\``,
    );
  }
  // A gateway on a remote host is reached through an SSH tunnel: bring it up again if it went down.
  const tunnel = map.gatewayTunnel?.value as GatewayTunnel | undefined;
  if (tunnel !== undefined) bringTunnelUp(tunnel, stack);
  return { gatewayUrl, controlToken };
}

/**
 * Makes sure the SSH tunnel to a remote gateway is up (on the local port its URL names), starting it when it is not;
 * a one-line error naming the host when it cannot.
 */
export function bringTunnelUp(tunnel: GatewayTunnel, stack: string): void {
  try {
    execFileSync("/bin/sh", ["-c", gatewayTunnelUp(tunnel)], {
      stdio: ["ignore", "ignore", "pipe"],
      timeout: 60_000,
    });
  } catch (error) {
    const stderr = String((error as { stderr?: Buffer }).stderr ?? "")
      .trim()
      .split("\n")
      .at(-1);
    throw new Error(
      `stack ${stack}: the SSH tunnel to the gateway (${tunnel.ssh.user}@${tunnel.ssh.host}) did not come up: ${stderr || (error as Error).message}`,
      { cause: error },
    );
  }
}

/** The synthetic sites' domain patterns: connections to them stay inside the env. */
export function syntheticDomainsOf(outputs: Pick<StackOutputs, "websites">): string[] {
  return Object.values(outputs.websites).flatMap((site) => (site.live ? [] : site.domains));
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
