// Stand-in VMs for the tests and benches: each a network namespace on this machine with its own dockerd and
// sshd (privileged containers cannot start here, so no VM-in-a-container), joined to the host by a veth pair on
// 10.213.<index>.0/24, the host at .1 and the stand-in at .2. Everything it makes is named after it, and
// `stop` removes it all. Only addresses of these namespaces are ever contacted.
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import type { SshEndpoint } from "../../src/plan/targets/ssh";
import { startSshd, type TestSshd } from "./sshd";

export interface StandinVm {
  name: string;
  namespace: string;
  /** The stand-in's address, as the runner and the other stand-ins reach it. */
  address: string;
  /** Its dockerd's socket (on this machine's filesystem). */
  dockerSocket: string;
  ssh: SshEndpoint;
  sshd: TestSshd;
  /** Stops sshd alone: the host is then unreachable over SSH, as a VM whose SSH is gone. */
  stopSshd(): Promise<void>;
  /** Starts it again (same host key): SSH is back. */
  startSshd(): Promise<void>;
  stop(): Promise<void>;
}

const run = (cmd: string, args: string[]) => execFileSync(cmd, args, { stdio: ["ignore", "pipe", "pipe"] }).toString();

/**
 * A stand-in VM `name` (up to 8 lowercase letters and digits) at 10.213.<index>.2, started afresh: whatever an
 * earlier run left under that name is removed first.
 */
export async function startStandinVm(name: string, index: number): Promise<StandinVm> {
  if (!/^[a-z0-9]{1,8}$/.test(name) || index < 1 || index > 250)
    throw new Error(`stand-in ${name}/${index}: a short lowercase name and an index 1-250`);
  const namespace = `mev-${name}`;
  const hostIf = `mevh-${name}`;
  const innerIf = `mevn-${name}`;
  const root = `/var/lib/multienv-standin/${name}`;
  const runDir = `/run/multienv-standin/${name}`;
  const address = `10.213.${index}.2`;
  await stopStandinVm(name);
  fs.mkdirSync(root, { recursive: true });
  fs.mkdirSync(runDir, { recursive: true });
  run("ip", ["netns", "add", namespace]);
  run("ip", ["link", "add", hostIf, "type", "veth", "peer", "name", innerIf]);
  run("ip", ["link", "set", innerIf, "netns", namespace]);
  run("ip", ["addr", "add", `10.213.${index}.1/24`, "dev", hostIf]);
  run("ip", ["link", "set", hostIf, "up"]);
  const inNs = (...args: string[]) => run("ip", ["netns", "exec", namespace, ...args]);
  inNs("ip", "addr", "add", `${address}/24`, "dev", innerIf);
  inNs("ip", "link", "set", innerIf, "up");
  inNs("ip", "link", "set", "lo", "up");
  inNs("ip", "route", "add", "default", "via", `10.213.${index}.1`);
  // Stand-ins reach each other through this machine, as VMs of one subnet do: only between their own links.
  for (const chain of [
    ["-i", hostIf, "-o", "mevh-+"],
    ["-i", "mevh-+", "-o", hostIf],
  ]) {
    execFileSync("sh", [
      "-c",
      `iptables -C FORWARD ${chain.join(" ")} -j ACCEPT 2>/dev/null || iptables -I FORWARD ${chain.join(" ")} -j ACCEPT`,
    ]);
  }
  const dockerSocket = `${runDir}/docker.sock`;
  // nsenter, not `ip netns exec`: that remounts /sys for the namespace, which hides the cgroup mounts dockerd needs.
  const dockerd: ChildProcess = spawn(
    "nsenter",
    [
      `--net=/var/run/netns/${namespace}`,
      "dockerd",
      "--data-root",
      `${root}/docker`,
      "--exec-root",
      `${runDir}/exec`,
      "--pidfile",
      `${runDir}/docker.pid`,
      "-H",
      `unix://${dockerSocket}`,
      "--cgroup-parent",
      `multienv-standin-${name}`,
      "--bridge",
      "none",
    ],
    {
      stdio: ["ignore", fs.openSync(`${runDir}/dockerd.log`, "w"), fs.openSync(`${runDir}/dockerd.err`, "w")],
      detached: true,
    },
  );
  dockerd.unref();
  fs.writeFileSync(`${runDir}/dockerd.launcher.pid`, String(dockerd.pid));
  const deadline = Date.now() + 60_000;
  while (!fs.existsSync(dockerSocket) || !dockerAnswers(dockerSocket)) {
    if (Date.now() > deadline)
      throw new Error(
        `stand-in ${name}: dockerd did not start: ${fs.readFileSync(`${runDir}/dockerd.err`, "utf8").slice(-2000)}`,
      );
    await new Promise((r) => setTimeout(r, 250));
  }
  const sshd = await startSshd({ host: address, port: 22, dockerSocket, netns: namespace });
  fs.writeFileSync(`${runDir}/sshd.dir`, path.dirname(sshd.identityFile));
  const ssh: SshEndpoint = { host: address, user: sshd.user, hostKey: sshd.hostKey, identityFile: sshd.identityFile };
  return {
    name,
    namespace,
    address,
    dockerSocket,
    ssh,
    sshd,
    stopSshd: () => sshd.stop(),
    startSshd: () => sshd.restart(),
    async stop() {
      await sshd.stop();
      await stopStandinVm(name);
    },
  };
}

function dockerAnswers(socket: string): boolean {
  try {
    execFileSync("docker", ["-H", `unix://${socket}`, "version", "--format", "{{.Server.Version}}"], {
      stdio: "ignore",
      timeout: 5000,
    });
    return true;
  } catch {
    return false;
  }
}

/** Removes a stand-in and everything it made (its containers with its dockerd, its namespace, its rules). */
export async function stopStandinVm(name: string): Promise<void> {
  const runDir = `/run/multienv-standin/${name}`;
  const pidFile = `${runDir}/docker.pid`;
  if (fs.existsSync(pidFile)) {
    const pid = Number(fs.readFileSync(pidFile, "utf8"));
    try {
      process.kill(pid, "SIGTERM");
      for (let i = 0; i < 100; i++) {
        process.kill(pid, 0);
        await new Promise((r) => setTimeout(r, 100));
      }
    } catch {
      /* gone */
    }
  }
  const hostIf = `mevh-${name}`;
  for (const chain of [
    ["-i", hostIf, "-o", "mevh-+"],
    ["-i", "mevh-+", "-o", hostIf],
  ]) {
    execFileSync("sh", ["-c", `while iptables -D FORWARD ${chain.join(" ")} -j ACCEPT 2>/dev/null; do :; done`]);
  }
  execFileSync("sh", ["-c", `ip link del ${hostIf} 2>/dev/null; ip netns del mev-${name} 2>/dev/null; true`]);
  // What its dockerd left mounted (container namespaces, layers), then its files: a stand-in is made anew each time.
  const root = `/var/lib/multienv-standin/${name}`;
  const mounts = fs
    .readFileSync("/proc/mounts", "utf8")
    .split("\n")
    .map((l) => l.split(" ")[1])
    .filter((m) => m && (m.startsWith(`${runDir}/`) || m.startsWith(`${root}/`)));
  // A lazy unmount of a parent may already have taken a child with it: what is no longer mounted is left.
  for (const m of mounts.reverse()) {
    try {
      execFileSync("umount", ["-l", m], { stdio: "ignore" });
    } catch {
      if (
        fs
          .readFileSync("/proc/mounts", "utf8")
          .split("\n")
          .some((l) => l.split(" ")[1] === m)
      )
        throw new Error(`cannot unmount ${m}`);
    }
  }
  fs.rmSync(runDir, { recursive: true, force: true });
  fs.rmSync(root, { recursive: true, force: true });
}
