// The site proxy container's entrypoint: runs the proxy as a child process and starts it again, within 2 s,
// whenever it dies, writing a `restarted` line to the proxy's log. The browser never falls back to a direct
// connection, so a dead proxy must not stay dead.
//
// Usage: supervisor [command args...]; without arguments it runs this checkout's bin/multienv-site-proxy.js
// (the image passes `node /app/site-proxy.js`). The child inherits the environment, so the same
// MULTIENV_SITE_PROXY_CONFIG configures it.
import { type ChildProcess, spawn } from "node:child_process";
import * as path from "node:path";
import { BAD_CONFIG_EXIT, CONFIG_ENV } from "./config";
import { appendEventSync } from "./log";

const FIRST_DELAY_MS = 100;
/** Backoff for a proxy that keeps dying at once; still well inside the 2 s a browser may wait. */
const MAX_DELAY_MS = 1_000;
/** A child that ran this long is considered healthy: the next restart is immediate again. */
const HEALTHY_AFTER_MS = 10_000;

function logPath(): string | undefined {
  try {
    const log = (JSON.parse(process.env[CONFIG_ENV] ?? "") as { log?: unknown }).log;
    return typeof log === "string" ? log : undefined;
  } catch {
    return undefined; // the proxy itself reports a bad configuration
  }
}

function main(): void {
  const [command, ...args] = process.argv.length > 2 ? process.argv.slice(2) : [process.execPath, path.resolve(__dirname, "../../bin/multienv-site-proxy.js")];
  const log = logPath();
  let child: ChildProcess;
  let stopping = false;
  let delay = FIRST_DELAY_MS;

  const start = (previous?: { pid: number; exitCode: number | null; signal: string | null }) => {
    const startedAt = Date.now();
    child = spawn(command, args, { stdio: "inherit" });
    if (previous && log) {
      try {
        appendEventSync(log, { event: "restarted", pid: child.pid ?? -1, previousPid: previous.pid, exitCode: previous.exitCode, signal: previous.signal });
      } catch (err) {
        process.stderr.write(`multienv-site-proxy supervisor: cannot write the log ${log}: ${(err as Error).message}\n`);
      }
    }
    const pid = child.pid ?? -1;
    child.once("error", (err) => process.stderr.write(`multienv-site-proxy supervisor: cannot run ${command}: ${err.message}\n`));
    child.once("exit", (exitCode, signal) => {
      if (stopping) process.exit(0);
      if (exitCode === BAD_CONFIG_EXIT) process.exit(BAD_CONFIG_EXIT);
      delay = Date.now() - startedAt > HEALTHY_AFTER_MS ? FIRST_DELAY_MS : delay;
      process.stderr.write(`multienv-site-proxy supervisor: the proxy (pid ${pid}) exited (${signal ?? exitCode}); starting it again in ${delay} ms\n`);
      setTimeout(() => start({ pid, exitCode, signal }), delay);
      delay = Math.min(delay * 2, MAX_DELAY_MS);
    });
  };

  for (const signal of ["SIGTERM", "SIGINT"] as const) {
    process.on(signal, () => {
      stopping = true;
      if (child.exitCode !== null || child.signalCode !== null) process.exit(0);
      child.kill(signal);
      setTimeout(() => process.exit(0), 3_000).unref();
    });
  }
  start();
}

main();
