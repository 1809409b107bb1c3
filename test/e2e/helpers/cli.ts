// The multienv CLI as a user runs it (bin/multienv.js, a process of its own), in the repository, on the e2e run's
// state backend and passphrase: test/e2e/setup.ts puts them in this process's environment, which the CLI inherits.
import { spawn } from "node:child_process";
import path from "node:path";
import { REPO } from "./env";

/** How a CLI run ended: its pid (the one its lock rows and others' waiting lines name), exit code and output. */
export interface CliRun {
  pid: number;
  /** The exit code; null when it was killed (by its timeout, or a signal). */
  code: number | null;
  stdout: string;
  stderr: string;
}

/** A CLI process under way: its pid at once, how it ended once it has. */
export interface CliProcess {
  pid: number;
  done: Promise<CliRun>;
}

/**
 * Starts `multienv <args>` and returns at once, so several can be started at the same moment. A run that outlasts
 * `timeoutMs` is killed (SIGKILL), its code then null, so a hung command fails its test instead of hanging it.
 */
export function startMultienv(args: string[], timeoutMs = 240_000): CliProcess {
  const child = spawn(process.execPath, [path.join(REPO, "bin/multienv.js"), ...args], {
    cwd: REPO,
    env: process.env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  const pid = child.pid!;
  let stdout = "";
  let stderr = "";
  child.stdout.setEncoding("utf8").on("data", (text: string) => (stdout += text));
  child.stderr.setEncoding("utf8").on("data", (text: string) => (stderr += text));
  const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
  const done = new Promise<CliRun>((resolve, reject) => {
    child.once("error", (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.once("close", (code) => {
      clearTimeout(timer);
      resolve({ pid, code, stdout, stderr });
    });
  });
  return { pid, done };
}

/** `multienv <args>` to its end. */
export function multienv(args: string[], timeoutMs?: number): Promise<CliRun> {
  return startMultienv(args, timeoutMs).done;
}
