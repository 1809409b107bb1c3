// What the runner does to a deployed env's workloads at run time, whichever target runs them: a Docker engine's
// containers (docker/runtime.ts) or a cluster's pods (kubernetes/runtime.ts). `status` and `ls` read their states,
// `reset` starts sites and captures over, `down` checks nothing is left. runtimes.ts picks one from the stack's state.
import type { ContainerState } from "./docker/containers";

export interface EnvRuntime {
  /** `docker` (an engine's containers, local or remote) or `kubernetes` (a cluster's pods). */
  readonly kind: "docker" | "kubernetes";
  /** Each of the env's containers (or pods) and its state now. */
  states(): Promise<ContainerState[]>;
  /**
   * Starts sites over: the server of each site in `servers` (its data goes with it) and, with `captures`, every
   * capture (its files removed, a new one begun). Resolves once each is running again.
   */
  startOver(request: { servers: string[]; captures: boolean }): Promise<void>;
  /**
   * Whether starting the captures over starts their sites' containers over too (a pod is recreated with its
   * capture): a site's reset operation then waits for it, since a request in flight would meet a server going away.
   */
  readonly capturesStartSitesOver: boolean;
  /**
   * After a destroy, what the target must no longer hold (a kubernetes stack's namespace) checked: `gone` names what
   * was checked and is gone, `left` what is still there, a line each saying how to remove it.
   */
  checkDestroyed(): Promise<{ gone: string[]; left: string[] }>;
}
