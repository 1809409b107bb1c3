// What the runner does to a deployed env's workloads at run time, whichever target runs them: a Docker engine's
// containers (docker/runtime.ts) or a cluster's pods (kubernetes/runtime.ts). `status` and `ls` read their states,
// `reset` starts sites and captures over, `down` checks nothing is left. runtimes.ts picks one from the stack's state.
// A container's state and a pod's are one shape (ContainerState), read alike by `status` and `ls` whatever the target.

export interface EnvRuntime {
  /** `docker` (an engine's containers, local or remote) or `kubernetes` (a cluster's pods). */
  readonly kind: "docker" | "kubernetes";
  /** Each of the env's containers (or pods) and its state now. */
  states(): Promise<ContainerState[]>;
  /**
   * Starts sites over: the server of each site in `servers` (its data goes with it) and, with `captures`, every
   * capture (its files removed, a new one begun). Resolves once each is running again; `done`, when given, is told
   * as each one is (a reset logs where its time goes).
   */
  startOver(request: { servers: string[]; captures: boolean; done?: (what: string) => void }): Promise<void>;
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
  /**
   * Runs `destroy`, finishing what the target cannot finish alone meanwhile (kubernetes: a pod on a node that is not
   * Ready never finishes terminating, and its namespace never goes, so it is force-deleted); `log` is told each thing
   * done, one line each.
   */
  destroying<T>(destroy: () => Promise<T>, log: (line: string) => void): Promise<T>;
}

/** A container's state as the engine reports it (or a pod's, as the cluster does: kubernetes/runtime.ts). */
export interface ContainerState {
  name: string;
  /** Set for a pod of the kubernetes target; a Docker container has none. */
  kind?: "pod";
  role?: string;
  site?: string;
  computer?: string;
  /** `local`, or the engine's `ssh://` host; for a pod, `<context>/<namespace>`. */
  engine: string;
  /**
   * Docker's state (`running`, `exited`, `restarting`, ...), `missing` when the engine has no such container; for a
   * pod its phase in lower case (`running`, `pending`, `failed`), `missing` when the cluster has no such pod.
   */
  state: string;
  /**
   * Its healthcheck's verdict (`healthy`, `unhealthy`, `starting`); absent for a container without one. A pod's is
   * its Ready condition: `ready` or `not ready`.
   */
  health?: string;
  /** A pod's container restarts, sidecars included. */
  restarts?: number;
  /** Why a pod's container waits or ended (`CrashLoopBackOff`, `ErrImageNeverPull`), when one does. */
  reason?: string;
  /** Why the engine could not be asked, when it could not. */
  error?: string;
  /** A pod's node. */
  node?: string;
  /** Why a pod's node is not Ready, when it is not: the pod is lost with it (its own status is then stale). */
  nodeNotReady?: string;
  /** A website pod that captures (its capture sidecars are in it, and lost with it). */
  captures?: boolean;
}

/** Running/healthy out of total. */
export interface ContainerCounts {
  total: number;
  running: number;
  /** Running, and healthy by its healthcheck when it has one. */
  healthy: number;
}

/**
 * True when the container runs and its healthcheck, if it has one, says healthy (a pod: it is Ready, on a node that
 * is Ready).
 */
export function isHealthy(container: Pick<ContainerState, "state" | "health" | "nodeNotReady">): boolean {
  return (
    container.nodeNotReady === undefined &&
    container.state === "running" &&
    (container.health === undefined || container.health === "healthy" || container.health === "ready")
  );
}

export function countContainers(states: Pick<ContainerState, "state" | "health" | "nodeNotReady">[]): ContainerCounts {
  return {
    total: states.length,
    running: states.filter((s) => s.state === "running").length,
    healthy: states.filter(isHealthy).length,
  };
}

/**
 * The part of the env a container or pod is, in words (`site shop's server, with its capture`, `the gateway`,
 * `computer desk's browser`); undefined when its labels do not say.
 */
export function partOf(container: Pick<ContainerState, "role" | "site" | "computer" | "captures">): string | undefined {
  const { role, site, computer } = container;
  const capture = container.captures ? ", with its capture" : "";
  if (role === "gateway") return "the gateway";
  if (site !== undefined && role !== undefined)
    return `site ${site}'s ${role === "replay" ? "replay server" : role}${capture}`;
  if (computer !== undefined && role !== undefined)
    return `computer ${computer}'s ${role === "browser" ? "browser" : "site proxy"}`;
  return undefined;
}

/** What is wrong with a container, in words (`exited`, `running but unhealthy`), or undefined when nothing is. */
export function containerProblem(container: ContainerState): string | undefined {
  if (isHealthy(container)) return undefined;
  const where = container.kind === "pod" ? "cluster" : "engine";
  if (container.nodeNotReady !== undefined)
    return `gone with its node ${container.node ?? "?"}, which is not Ready: ${container.nodeNotReady}`;
  if (container.error !== undefined) return `its ${where} (${container.engine}) did not answer: ${container.error}`;
  if (container.state === "missing") return `not on its ${where} (${container.engine})`;
  const reason = container.reason !== undefined ? ` (${container.reason})` : "";
  if (container.state !== "running") return `${container.state}${reason}`;
  return `running but ${container.health}${reason}`;
}
