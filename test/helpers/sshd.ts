// A real OpenSSH server for tests: its own host key, one authorized client key, on an address of this machine
// (loopback, or a stand-in VM's namespace), sessions' `docker` pointed at a given engine socket. Its log
// counts the connections that authenticated, so a test can tell a shared connection from one per session.
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { freePort } from "./ports";

export const SSHD = "/usr/sbin/sshd";

export interface TestSshd {
  host: string;
  port: number;
  user: string;
  /** The server's public host key line. */
  hostKey: string;
  /** The client's private key file. */
  identityFile: string;
  /** Connections that authenticated so far. */
  logins(): number;
  log(): string;
  stop(): Promise<void>;
  /** Starts the server again after `stop`, with the same host key, address and client key. */
  restart(): Promise<void>;
}

/** A key pair made by ssh-keygen: [private key file, public key line]. */
export function keyPair(dir: string, name: string): [string, string] {
  const file = path.join(dir, name);
  execFileSync("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-C", name, "-f", file]);
  return [file, fs.readFileSync(`${file}.pub`, "utf8").trim()];
}

export async function startSshd(options: {
  host?: string;
  port?: number;
  dockerSocket: string;
  netns?: string;
  maxSessions?: number;
}): Promise<TestSshd> {
  if (!fs.existsSync(SSHD)) throw new Error(`${SSHD} is missing: install openssh-server (scripts/setup.sh does)`);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "multienv-sshd-"));
  const [hostKeyFile, hostKey] = keyPair(dir, "host");
  const [identityFile, clientKey] = keyPair(dir, "client");
  fs.writeFileSync(path.join(dir, "authorized_keys"), `${clientKey}\n`);
  const host = options.host ?? "127.0.0.1";
  const port = options.port ?? (await freePort(host));
  const logFile = path.join(dir, "sshd.log");
  fs.writeFileSync(
    path.join(dir, "sshd_config"),
    [
      `ListenAddress ${host}:${port}`,
      `HostKey ${hostKeyFile}`,
      `AuthorizedKeysFile ${path.join(dir, "authorized_keys")}`,
      `PidFile ${path.join(dir, "sshd.pid")}`,
      "PermitRootLogin prohibit-password",
      "PasswordAuthentication no",
      "KbdInteractiveAuthentication no",
      "UsePAM no",
      "StrictModes no",
      `MaxSessions ${options.maxSessions ?? 64}`,
      "MaxStartups 100:30:200",
      `SetEnv DOCKER_HOST=unix://${options.dockerSocket}`,
      "AllowTcpForwarding local",
      "LogLevel INFO",
      "",
    ].join("\n"),
  );
  fs.mkdirSync("/run/sshd", { recursive: true });
  const argv = [SSHD, "-D", "-e", "-f", path.join(dir, "sshd_config"), "-E", logFile];
  const read = () => (fs.existsSync(logFile) ? fs.readFileSync(logFile, "utf8") : "");
  const launch = async (): Promise<ChildProcess> => {
    const before = (read().match(/Server listening on/g) ?? []).length;
    const child: ChildProcess = options.netns
      ? spawn("nsenter", [`--net=/var/run/netns/${options.netns}`, ...argv], { stdio: "ignore" })
      : spawn(argv[0], argv.slice(1), { stdio: "ignore" });
    const deadline = Date.now() + 10_000;
    for (;;) {
      if ((read().match(/Server listening on/g) ?? []).length > before) return child;
      if (child.exitCode !== null || Date.now() > deadline) throw new Error(`sshd did not start: ${read()}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  };
  let child = await launch();
  return {
    host,
    port,
    user: os.userInfo().username,
    hostKey,
    identityFile,
    logins: () => (read().match(/Accepted publickey/g) ?? []).length,
    log: read,
    async stop() {
      // Its connections too (a shared one the runner still holds among them), as when a machine's SSH is gone.
      execFileSync("sh", ["-c", `pkill -TERM -P ${child.pid} 2>/dev/null; true`]);
      if (child.exitCode === null) {
        child.kill("SIGTERM");
        await new Promise((r) => child.once("exit", r));
      }
    },
    async restart() {
      child = await launch();
    },
  };
}
