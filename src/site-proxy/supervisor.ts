// The site proxy container's entrypoint: runs the proxy as a child process and starts it again, well within 2 s,
// whenever it dies, writing a `restarted` line to the proxy's log. The browser never falls back to a direct
// connection, so a dead proxy must not stay dead.
//
// A second proxy process waits beside the serving one with its code already loaded (a cold start of node, the
// TLS libraries and the config takes about a second on a busy machine). When the serving one dies the waiting one
// is told to start, which takes milliseconds, and a new one is started to wait in its place.
//
// Usage: supervisor [node-script args...]; without arguments it runs this checkout's bin/multienv-site-proxy.js
// (the image passes its bundled proxy). The children inherit the environment, so the same
// MULTIENV_SITE_PROXY_CONFIG configures them.
import { type ChildProcess, fork } from "node:child_process";
import * as path from "node:path";
import { appendEventSync } from "./log";
import { BAD_CONFIG_EXIT, CONFIG_ENV, STANDBY_ENV, StandbyMessage } from "./supervision";

/** Wait before starting a new process after one died young, doubling while they keep dying young. */
const FIRST_DELAY_MS = 100;
const MAX_DELAY_MS = 1_000;
/** A process that lived this long was healthy: the next replacement starts without delay again. */
const HEALTHY_AFTER_MS = 10_000;

interface Proxy {
  child: ChildProcess;
  ready: boolean;
}

interface Death {
  pid: number;
  exitCode: number | null;
  signal: string | null;
}

function logPath(): string | undefined {
  try {
    const log = (JSON.parse(process.env[CONFIG_ENV] ?? "") as { log?: unknown }).log;
    return typeof log === "string" ? log : undefined;
  } catch {
    return undefined; // the proxy itself reports a bad configuration
  }
}

function say(text: string): void {
  process.stderr.write(`multienv-site-proxy supervisor: ${text}\n`);
}

function main(): void {
  const [script, ...args] =
    process.argv.length > 2 ? process.argv.slice(2) : [path.resolve(__dirname, "../../bin/multienv-site-proxy.js")];
  const log = logPath();
  let stopping = false;
  let serving: Proxy | undefined;
  let waiting: Proxy | undefined;
  /** The serving process that died and has not been replaced yet. */
  let unreplaced: Death | undefined;
  let delay = 0;
  let spawnTimer: NodeJS.Timeout | undefined;

  function tryServe(): void {
    if (stopping || serving !== undefined || !waiting?.ready) return;
    serving = waiting;
    waiting = undefined;
    serving.child.send(StandbyMessage.start);
    if (unreplaced && log) {
      try {
        appendEventSync(log, {
          event: "restarted",
          pid: serving.child.pid ?? -1,
          previousPid: unreplaced.pid,
          exitCode: unreplaced.exitCode,
          signal: unreplaced.signal,
        });
      } catch (err) {
        say(`cannot write the log ${log}: ${(err as Error).message}`);
      }
    }
    unreplaced = undefined;
    keepOneWaiting();
  }

  function keepOneWaiting(): void {
    if (stopping || waiting !== undefined || spawnTimer !== undefined) return;
    spawnTimer = setTimeout(() => {
      spawnTimer = undefined;
      if (!stopping && waiting === undefined) waiting = spawnProxy();
    }, delay);
  }

  function spawnProxy(): Proxy {
    const child = fork(script, args, {
      env: { ...process.env, [STANDBY_ENV]: "1" },
      stdio: ["ignore", "inherit", "inherit", "ipc"],
    });
    const proxy: Proxy = { child, ready: false };
    const bornAt = Date.now();
    child.on("message", (message) => {
      if (message !== StandbyMessage.ready) return;
      proxy.ready = true;
      tryServe();
      if (proxy === waiting) say(`pid ${child.pid} is ready to take over`);
    });
    child.on("error", (err) => say(`proxy process ${child.pid}: ${err.message}`));
    child.once("exit", (exitCode, signal) => {
      if (stopping) return;
      if (exitCode === BAD_CONFIG_EXIT) process.exit(BAD_CONFIG_EXIT); // starting it again would not help
      delay = Date.now() - bornAt > HEALTHY_AFTER_MS ? 0 : Math.min(Math.max(delay * 2, FIRST_DELAY_MS), MAX_DELAY_MS);
      if (proxy === serving) {
        serving = undefined;
        unreplaced = { pid: child.pid ?? -1, exitCode, signal };
        say(`the proxy (pid ${child.pid}) exited (${signal ?? exitCode}); the waiting one takes over`);
        tryServe();
      } else if (proxy === waiting) {
        waiting = undefined;
      }
      keepOneWaiting();
    });
    return proxy;
  }

  // The first process serves as soon as it is ready; then a second is started to wait.
  waiting = spawnProxy();

  for (const signal of ["SIGTERM", "SIGINT"] as const) {
    process.on(signal, () => {
      stopping = true;
      clearTimeout(spawnTimer);
      const alive = [serving, waiting].filter(
        (p): p is Proxy => p !== undefined && p.child.exitCode === null && p.child.signalCode === null,
      );
      if (alive.length === 0) process.exit(0);
      let left = alive.length;
      for (const p of alive) {
        p.child.once("exit", () => --left === 0 && process.exit(0));
        p.child.kill(signal);
      }
      setTimeout(() => process.exit(0), 3_000).unref();
    });
  }
}

main();
