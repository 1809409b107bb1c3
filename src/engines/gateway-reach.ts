// The one way this process reaches a deployed env's gateway, whatever the target: straight at its URL (a Docker engine
// here), through the SSH tunnel to a remote host (brought up again when it went down), or through a port-forward to
// the gateway's pod on a cluster (opened here, closed by the caller). The runner's commands, its collection from the
// capture collector's environment and the program's own dynamic resources (self-test, site cleanup) all come here,
// so a new target is one more case in this file.
import { execFileSync } from "node:child_process";
import { gatewayTunnelUp, type GatewayTunnel } from "../plan/targets/ssh";
import type { GatewayPortForward } from "../protocol/port-forward";
import { openGatewayPortForward } from "./port-forward";

/** How a gateway is reached: the stack's outputs of the same names. */
export interface GatewayRoute {
  /** The output `gatewayUrl`: dialled as it is unless a port-forward names the pod. */
  gatewayUrl: string;
  /** Remote hosts: the SSH tunnel whose local end `gatewayUrl` is. */
  gatewayTunnel?: GatewayTunnel;
  /** Kubernetes: the gateway's pod, which `gatewayUrl` names (`kubernetes://...`, never dialled). */
  gatewayPortForward?: GatewayPortForward;
}

export interface GatewayReachOptions {
  /** Who reaches it, first in an error's line: `stack <name>`, `the self-test`. */
  owner: string;
  /** The environment KUBECONFIG is read from (default process.env). */
  env?: NodeJS.ProcessEnv;
  /**
   * When the gateway cannot be reached (a tunnel that does not come up, a port-forward that does not open): given, it
   * is told why and the reach keeps the output's URL, which fails each request (so a best-effort collection records
   * what it could not store); not given, the error is thrown.
   */
  onUnreachable?: (error: Error) => void;
}

/** The gateway, reachable: a URL this process can dial, and what ends what was opened for it. */
export interface GatewayReach {
  url: string;
  /** Ends the port-forward; a no-op elsewhere. Optional to call: a port-forward holds no process alive. */
  close(): Promise<void>;
  /** Set when it could not be reached and the caller asked to go on (onUnreachable): why, in a line. */
  unreachable?: string;
}

/** Opens the way to the gateway `route` names (see the file's head). */
export async function openGatewayReach(route: GatewayRoute, options: GatewayReachOptions): Promise<GatewayReach> {
  try {
    if (route.gatewayPortForward !== undefined) {
      const opened = await openGatewayPortForward(route.gatewayPortForward, { env: options.env });
      return { url: opened.url, close: opened.close };
    }
    if (route.gatewayTunnel !== undefined) bringTunnelUp(route.gatewayTunnel, options.owner);
    return { url: route.gatewayUrl, close: async () => undefined };
  } catch (thrown) {
    const error = thrown instanceof Error ? thrown : new Error(String(thrown));
    if (options.onUnreachable === undefined) throw error;
    options.onUnreachable(error);
    return { url: route.gatewayUrl, close: async () => undefined, unreachable: error.message.split("\n")[0] };
  }
}

/**
 * Makes sure the SSH tunnel to a remote gateway is up (on the local port its URL names), starting it when it is not;
 * a one-line error naming `owner` and the host when it cannot.
 */
function bringTunnelUp(tunnel: GatewayTunnel, owner: string): void {
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
      `${owner}: the SSH tunnel to the gateway (${tunnel.ssh.user}@${tunnel.ssh.host}) did not come up: ${stderr || (error as Error).message}`,
      { cause: error },
    );
  }
}
