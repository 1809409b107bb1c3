// What each container of a stack is doing now, asked of the engine it runs on (dockerode, through
// src/engines/docker.ts): the containers come from the stack's state (stackContainers), so a stack on remote hosts is
// asked there.
import type Docker from "dockerode";
import { engineClient, isNotFound, type EngineTarget, type StackContainer } from "../../../engines/docker";
import { errorMessage } from "../../errors";

/** A container's state as the engine reports it (or a pod's, as the cluster does: ../kubernetes/runtime.ts). */
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
}

/** Running/healthy out of total. */
export interface ContainerCounts {
  total: number;
  running: number;
  /** Running, and healthy by its healthcheck when it has one. */
  healthy: number;
}

function engineName(engine: EngineTarget): string {
  return engine.host && !engine.host.startsWith("unix://") ? engine.host : "local";
}

/** Ends the keep-alive connections of an engine client (an ssh:// engine holds an ssh process per connection). */
function release(client: Docker): void {
  const agent = (client.modem as { agent?: { destroy?: () => void } } | undefined)?.agent;
  agent?.destroy?.();
}

/** Each container's state, asked of its engine (all at once); one unreachable engine marks its containers alone. */
export async function containerStates(containers: StackContainer[]): Promise<ContainerState[]> {
  const clients = new Map<string, Docker>();
  const clientOf = (engine: EngineTarget) => {
    const key = JSON.stringify([engine.host ?? "", engine.sshOpts ?? []]);
    if (!clients.has(key)) clients.set(key, engineClient(engine));
    return clients.get(key)!;
  };
  try {
    return await Promise.all(
      containers.map(async (container): Promise<ContainerState> => {
        const base = {
          name: container.name,
          ...(container.role ? { role: container.role } : {}),
          ...(container.site ? { site: container.site } : {}),
          ...(container.computer ? { computer: container.computer } : {}),
          engine: engineName(container.engine),
        };
        try {
          const info = await clientOf(container.engine).getContainer(container.name).inspect();
          const health = info.State.Health?.Status;
          return { ...base, state: info.State.Status, ...(health && health !== "none" ? { health } : {}) };
        } catch (error) {
          if (isNotFound(error)) return { ...base, state: "missing" };
          return { ...base, state: "unknown", error: errorMessage(error).split("\n")[0] };
        }
      }),
    );
  } finally {
    for (const client of clients.values()) release(client);
  }
}

/** True when the container runs and its healthcheck, if it has one, says healthy (a pod: it is Ready). */
export function isHealthy(container: Pick<ContainerState, "state" | "health">): boolean {
  return (
    container.state === "running" &&
    (container.health === undefined || container.health === "healthy" || container.health === "ready")
  );
}

export function countContainers(states: Pick<ContainerState, "state" | "health">[]): ContainerCounts {
  return {
    total: states.length,
    running: states.filter((s) => s.state === "running").length,
    healthy: states.filter(isHealthy).length,
  };
}

/** What is wrong with a container, in words (`exited`, `running but unhealthy`), or undefined when nothing is. */
export function containerProblem(container: ContainerState): string | undefined {
  if (isHealthy(container)) return undefined;
  const where = container.kind === "pod" ? "cluster" : "engine";
  if (container.error !== undefined) return `its ${where} (${container.engine}) did not answer: ${container.error}`;
  if (container.state === "missing") return `not on its ${where} (${container.engine})`;
  const reason = container.reason !== undefined ? ` (${container.reason})` : "";
  if (container.state !== "running") return `${container.state}${reason}`;
  return `running but ${container.health}${reason}`;
}
