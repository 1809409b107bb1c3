// What each container of a stack is doing now, asked of the engine it runs on (dockerode, through
// src/engines/docker.ts): the containers come from the stack's state (stackContainers), so a stack on remote hosts is
// asked there.
import type Docker from "dockerode";
import { engineClient, isNotFound, type EngineTarget, type StackContainer } from "../../../engines/docker";
import { errorMessage } from "../../errors";
import type { ContainerState } from "../env-runtime";

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
