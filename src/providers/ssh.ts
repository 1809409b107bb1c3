// The providers' side of src/plan/ssh.ts: the same setup script (config, pinned key, shared connection), run
// before a provider opens sessions to a host, and the `ssh` arguments of a session.
import { execFile } from "node:child_process";
import path from "node:path";
import { sshAlias, sshSetup, type SshEndpoint } from "../plan/ssh";

/** The directory `SSH_DIR_SHELL` names, as node computes it. */
export function sshDir(): string {
  return path.join(process.env.TMPDIR || "/tmp", `multienv-ssh-${process.getuid?.() ?? 0}`);
}

/** Writes the host's files and starts its shared connection unless it is up; resolves once that is done. */
export function prepareSsh(endpoint: SshEndpoint): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile("/bin/sh", ["-c", sshSetup(endpoint)], { timeout: 60_000 }, (error, _stdout, stderr) =>
      error
        ? reject(
            new Error(`ssh setup for ${endpoint.user}@${endpoint.host} failed: ${(stderr || error.message).trim()}`),
          )
        : resolve(),
    );
  });
}

/** `ssh` arguments for a session on the host (after `prepareSsh`), running `command`. */
export function sshArgs(endpoint: SshEndpoint, command: string[]): string[] {
  const alias = sshAlias(endpoint);
  return ["-F", path.join(sshDir(), `${alias}.conf`), "--", alias, ...command];
}
