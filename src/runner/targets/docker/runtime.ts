// The docker target's runtime (../env-runtime.ts): the stack's containers, found in its state with the engine each is
// on (stackContainers), asked of and restarted on that engine through dockerode.
import type Docker from "dockerode";
import {
  CAPTURE_BEGAN_LINE,
  CAPTURE_RESTART,
  CAPTURE_START_OVER_COMMAND,
  CAPTURE_STOP_SIGNAL,
} from "../../../plan/wiring";
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

/** How long a sidecar's script may take to start its capture over in place before the sidecar is restarted instead. */
const IN_PLACE_MS = 15_000;

/** The text of a container's log as the engine answers it (framed per stream when the container has no TTY). */
function logText(raw: Buffer): string {
  const parts: Buffer[] = [];
  // Each frame: stream (1 byte), three zeros, its length (big-endian), then that many bytes.
  for (let at = 0; at + 8 <= raw.length && raw[1 + at] === 0;) {
    const length = raw.readUInt32BE(at + 4);
    parts.push(raw.subarray(at + 8, at + 8 + length));
    at += 8 + length;
  }
  return parts.length > 0 ? Buffer.concat(parts).toString("utf8") : raw.toString("utf8");
}

/**
 * The number of the capture a sidecar's script last said it began (CAPTURE_BEGAN_LINE: 0 at its start, one more at
 * each start over in place), read from the end of its output through the engine; undefined when no such line is there
 * (a script from before, or a log the engine cannot read back).
 */
async function captureBegun(container: Docker.Container): Promise<number | undefined> {
  // The script prints a handful of lines at each start over (its own and tcpdump's): its last one is in these.
  const raw = (await container.logs({ stdout: true, stderr: true, follow: false, tail: 100 })) as unknown as Buffer;
  const pattern = new RegExp(`^${CAPTURE_BEGAN_LINE} (\\d+)$`, "gm");
  const counts = [...logText(raw).matchAll(pattern)].map((m) => Number(m[1]));
  return counts.at(-1);
}

/**
 * Starts a capture over in place, as its script does on USR1 (its tcpdump ends, which writes its files whole, its
 * files go and a new tcpdump begins): the signal sent through the engine to the script (the sidecar's PID 1, which
 * traps it), and the new capture confirmed by the script's CAPTURE_BEGAN_LINE on its output, read through the engine
 * too; no process started in the container, where five `docker exec`s at once took 0.7-1.3 s of a reset on two cores.
 * True once the script said its new tcpdump writes, with a number above the one it said before: a script started
 * again by Docker meanwhile (its count from 0, the ended episode's files kept under run numbers) is not taken for one
 * that started over. False when it did not within IN_PLACE_MS; undefined when its script prints no such line (one
 * from before), which is then asked with CAPTURE_START_OVER_COMMAND.
 */
async function signalCaptureOver(container: Docker.Container): Promise<boolean | undefined> {
  const before = await captureBegun(container).catch(() => undefined);
  if (before === undefined) return undefined;
  await container.kill({ signal: "SIGUSR1" });
  for (const until = Date.now() + IN_PLACE_MS; Date.now() < until; await sleep(25)) {
    const now = await captureBegun(container).catch(() => undefined);
    if (now !== undefined && now > before) return true;
  }
  return false;
}

/**
 * Starts a capture over: in place when its script can (signalCaptureOver, or CAPTURE_START_OVER_COMMAND for a sidecar
 * from before: its tcpdump ends, its files go and a new one begins, in a fraction of a second), else, or when its
 * site's server was just restarted (the sidecar must join the server's new network namespace), its files removed and
 * the sidecar restarted. The sidecar shares its site container's network namespace, so a server restarted just before
 * may take the sidecar down with it and Docker restarts it: the removal's exec is then gone before it ran to its end
 * ("no such exec"), and it is run again once the sidecar is back, rather than failing the reset or leaving the last
 * episode's files behind.
 */
async function startCaptureOver(sidecar: StackContainer, serverRestarted: boolean): Promise<"in place" | "restarted"> {
  const container = engineClient(sidecar.engine).getContainer(sidecar.name);
  if (!serverRestarted) {
    // A signal through the engine would leave a sidecar declared otherwise stopped for good at its next exit
    // (CAPTURE_STOP_SIGNAL says why): one deployed before it was declared so is asked with the exec.
    const survivesSignal = sidecar.stopSignal === CAPTURE_STOP_SIGNAL && sidecar.restart === CAPTURE_RESTART;
    const signalled = survivesSignal ? await signalCaptureOver(container).catch(() => false) : undefined;
    if (signalled) return "in place";
    if (signalled === undefined) {
      const code = await execExitCode(container, CAPTURE_START_OVER_COMMAND, IN_PLACE_MS).catch(() => -1);
      if (code === 0) return "in place";
    }
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
