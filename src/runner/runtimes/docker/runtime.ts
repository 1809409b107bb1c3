// The docker target's runtime (../env-runtime.ts): the stack's containers, found in its state with the engine each is
// on (stackContainers), asked of and restarted on that engine through dockerode.
import { containerStates } from "./containers";
import { engineClient, stackContainers, type StackContainer, type StateResource } from "../../../engines/docker";
import type { EnvRuntime } from "../env-runtime";

/** Removes a capture sidecar's files and restarts it, so the next episode's captures start empty. */
async function restartCapture(sidecar: StackContainer): Promise<void> {
  const container = engineClient(sidecar.engine).getContainer(sidecar.name);
  // The current run's files and any earlier run's (`.run<K>.`): the next episode's captures start from run 1.
  const files = `/captures/${sidecar.captureOf}.pcap* /captures/${sidecar.captureOf}.run*.pcap*`;
  const exec = await container.exec({ Cmd: ["sh", "-c", `rm -f ${files}`] });
  await exec.start({ Detach: true });
  for (let i = 0; i < 100; i++) {
    if (!(await exec.inspect()).Running) break;
    await new Promise((r) => setTimeout(r, 20));
  }
  await container.restart({ t: 1 });
}

export function dockerRuntime(resources: StateResource[]): EnvRuntime {
  const containers = stackContainers(resources);
  return {
    kind: "docker",
    // A capture sidecar restarts alone: its site container goes on.
    capturesStartSitesOver: false,
    states: () => containerStates(containers),
    async startOver({ servers, captures }) {
      await Promise.all(
        servers.map(async (site) => {
          const server = containers.find((c) => c.role === "server" && c.site === site);
          if (server === undefined)
            throw new Error(
              `site ${site} declares no reset operation and its server container is not in the stack's state`,
            );
          await engineClient(server.engine).getContainer(server.name).restart({ t: 1 });
        }),
      );
      // After the servers: a sidecar joins its site container's network namespace, which a restarting server has not.
      if (captures) await Promise.all(containers.filter((c) => c.role === "capture").map(restartCapture));
    },
    // The engine's containers, networks and volumes are the state's resources: the destroy removed each.
    checkDestroyed: async () => ({ gone: [], left: [] }),
  };
}
