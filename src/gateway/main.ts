// multienv-gateway: reads MULTIENV_GATEWAY_CONFIG and MULTIENV_CONTROL_TOKEN, then serves.
//
// With `workers` > 1 (default: one per core) the main process forks that many node
// cluster workers sharing the listening socket and restarts any that dies; with 1 it
// serves itself. Once serving it prints one line `{"event":"listening","host","port","workers"}`
// (port is the bound one, so `port: 0` works). A bad config exits 2 with one line naming the field.
import cluster from "node:cluster";
import { ConfigError, parseGatewayConfig, readControlToken, CONFIG_ENV, type GatewayConfig } from "./config";
import { logJsonLine } from "./log";
import { start } from "./server";

function exitWith(message: string, code: number): never {
  process.stderr.write(`multienv-gateway: ${message}\n`);
  process.exit(code);
}

function load(): { config: GatewayConfig; token: string } {
  try {
    return { config: parseGatewayConfig(process.env[CONFIG_ENV]), token: readControlToken(process.env) };
  } catch (error) {
    if (error instanceof ConfigError) exitWith(error.message, 2);
    throw error;
  }
}

type WorkerMessage = { event: "listening"; port: number };

function serveInProcess(config: GatewayConfig, token: string, onListening: (port: number) => void): void {
  start(config, token)
    .then((running) => {
      onListening(running.port);
      const stop = () => running.close().then(() => process.exit(0));
      process.once("SIGTERM", stop);
      process.once("SIGINT", stop);
    })
    .catch((error: Error) => exitWith(`cannot listen on ${config.listen.host}:${config.listen.port}: ${error.message}`, 1));
}

function runPrimary(config: GatewayConfig): void {
  let stopping = false;
  let announced = false;
  const listening = new Set<number>();
  const fork = () => {
    const worker = cluster.fork();
    worker.on("message", (message: WorkerMessage) => {
      if (message?.event !== "listening") return;
      listening.add(worker.id);
      if (!announced && listening.size === config.workers) {
        announced = true;
        logJsonLine("listening", { host: config.listen.host, port: message.port, workers: config.workers });
      }
    });
  };
  cluster.on("exit", (worker, code, signal) => {
    listening.delete(worker.id);
    if (stopping) return;
    // A worker that cannot listen fails the same way every time: give up rather than spin.
    if (!announced) exitWith(`a worker exited (${signal ?? code}) before listening`, 1);
    logJsonLine("worker-restarted", { pid: worker.process.pid, code, signal });
    fork();
  });
  const stop = () => {
    stopping = true;
    for (const worker of Object.values(cluster.workers ?? {})) worker?.kill("SIGTERM");
    setTimeout(() => process.exit(0), 2_000).unref();
    cluster.on("exit", () => {
      if (Object.keys(cluster.workers ?? {}).length === 0) process.exit(0);
    });
  };
  process.once("SIGTERM", stop);
  process.once("SIGINT", stop);
  for (let i = 0; i < config.workers; i++) fork();
}

// A bug must not pass silently: say what happened as a log line, then die (the primary, or
// the container's restart policy, starts a fresh process).
process.on("uncaughtException", (error) => {
  logJsonLine("crashed", { pid: process.pid, error: error.stack ?? String(error) });
  process.exit(1);
});

const { config, token } = load();
if (config.workers === 1) {
  serveInProcess(config, token, (port) => logJsonLine("listening", { host: config.listen.host, port, workers: 1 }));
} else if (cluster.isPrimary) {
  runPrimary(config);
} else {
  serveInProcess(config, token, (port) => process.send?.({ event: "listening", port } satisfies WorkerMessage));
}
