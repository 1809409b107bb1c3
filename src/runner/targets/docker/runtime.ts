// The docker target's runtime (../env-runtime.ts): the stack's containers, found in its state with the engine each is
// on (stackContainers), asked of and restarted on that engine through dockerode.
import type Docker from "dockerode";
import { CAPTURE_START_OVER_COMMAND } from "../../../plan/wiring";
import { containerStates } from "./containers";
import { engineClient, stackContainers, type StackContainer, type StateResource } from "../../../engines/docker";
import type { EnvRuntime } from "../env-runtime";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Runs `script` (sh -c) in a container and resolves with its exit code, polling it for at most `ms`. */
async function execExitCode(container: Docker.Container, script: string, ms: number): Promise<number | undefined> {
  const exec = await container.exec({ Cmd: ["sh", "-c", script] });
  await exec.start({ Detach: true });
  let state = await exec.inspect();
  for (const until = Date.now() + ms; state.Running && Date.now() < until; state = await exec.inspect())
    await sleep(20);
  return state.Running ? undefined : (state.ExitCode ?? undefined);
}

/**
 * Starts a capture over: in place when its script can (CAPTURE_START_OVER_COMMAND: its tcpdump ends, its files go and a
 * new one begins, in a fraction of a second), else, or when its site's server was just restarted (the sidecar must
 * join the server's new network namespace), its files removed and the sidecar restarted. The sidecar shares its site
 * container's network namespace, so a server restarted just before may take the sidecar down with it and Docker
 * restarts it: the removal's exec is then gone before it ran to its end ("no such exec"), and it is run again once
 * the sidecar is back, rather than failing the reset or leaving the last episode's files behind.
 */
async function startCaptureOver(sidecar: StackContainer, serverRestarted: boolean): Promise<"in place" | "restarted"> {
  const container = engineClient(sidecar.engine).getContainer(sidecar.name);
  if (!serverRestarted) {
    const code = await execExitCode(container, CAPTURE_START_OVER_COMMAND, 15_000).catch(() => -1);
    if (code === 0) return "in place";
  }
  // The current run's files and any earlier run's (`.run<K>.`): the next episode's captures start from run 1.
  const files = `/captures/${sidecar.captureOf}.pcap* /captures/${sidecar.captureOf}.run*.pcap*`;
  for (let attempt = 1; ; attempt++) {
    try {
      const code = await execExitCode(container, `rm -f ${files}`, 2_000);
      if (code === 0) break;
      throw new Error(`removing ${sidecar.name}'s captures exited ${code ?? "(still running)"}`);
    } catch (error) {
      if (attempt === 5) throw error;
      // The sidecar is restarting (or was between two of its starts): ask again once it runs.
      await sleep(200 * attempt);
    }
  }
  await container.restart({ t: 1 });
  return "restarted";
}

export function dockerRuntime(resources: StateResource[]): EnvRuntime {
  const containers = stackContainers(resources);
  return {
    kind: "docker",
    // A capture sidecar restarts alone: its site container goes on.
    capturesStartSitesOver: false,
    states: () => containerStates(containers),
    async startOver({ servers, captures, done = () => undefined }) {
      await Promise.all(
        servers.map(async (site) => {
          const server = containers.find((c) => c.role === "server" && c.site === site);
          if (server === undefined)
            throw new Error(
              `site ${site} declares no reset operation and its server container is not in the stack's state`,
            );
          await engineClient(server.engine).getContainer(server.name).restart({ t: 1 });
          done(`${server.name} restarted`);
        }),
      );
      // After the servers: a sidecar joins its site container's network namespace, which a restarting server has not.
      const restarted = new Set(servers.map((site) => `${site}-server`));
      if (captures)
        await Promise.all(
          containers
            .filter((c) => c.role === "capture")
            .map(async (sidecar) =>
              done(
                `${sidecar.name} started over ${await startCaptureOver(sidecar, restarted.has(sidecar.captureOf!))}`,
              ),
            ),
        );
    },
    // The engine's containers, networks and volumes are the state's resources: the destroy removed each.
    checkDestroyed: async () => ({ gone: [], left: [] }),
    // An engine removes a container whatever its state: nothing to help.
    destroying: (destroy) => destroy(),
  };
}
