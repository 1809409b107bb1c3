// The node side of src/plan/targets/ssh.ts: the directory the shell steps' SSH files and shared connections live in,
// as node computes it, for the docker provider's options (which name the shared connection's socket there).
import path from "node:path";

/** The directory `SSH_DIR_SHELL` names, as node computes it. */
export function sshDir(): string {
  return path.join(process.env.TMPDIR || "/tmp", `multienv-ssh-${process.getuid?.() ?? 0}`);
}
