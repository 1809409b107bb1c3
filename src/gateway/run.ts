// The gateway process: reads MULTIENV_GATEWAY_CONFIG and MULTIENV_CONTROL_TOKEN, resolves its
// listeners' host names, then serves.
//
// With `workers` > 1 (default: one per core less one) the main process forks that many node
// cluster workers sharing the listening sockets and restarts any that dies; with 1 it
// serves itself. Once serving it prints one line
// `{"event":"listening","host","port","workers","listeners":[{listener,host,address,port}]}`
// (`port` is the published listener's bound one, so `port: 0` works). A bad config, token or
// an unresolvable host exits 2 with one line naming the field.
import cluster from "node:cluster";
import { resolveBindings, type Binding } from "./bind";
import { parseGatewayConfig, readControlToken, CONFIG_ENV, type GatewayConfig } from "./config";
import { ServiceConfigError } from "../protocol/service-config";
import { logJsonLine } from "../service-kit/log";
import type { DispatcherFor } from "./proxy";
import { start } from "./server";
import { TakeoverRelay } from "./takeovers";

/** How the primary hands its resolved bindings to the workers it forks (they must bind the same sockets). */
const BINDINGS_ENV = "MULTIENV_GATEWAY_WORKER_BINDINGS";

function exitWith(message: string, code: number): never {
  process.stderr.write(`multienv-gateway: ${message}\n`);
  process.exit(code);
}

function load(): { config: GatewayConfig; token: string } {
  try {
    return { config: parseGatewayConfig(process.env[CONFIG_ENV]), token: readControlToken(process.env) };
  } catch (error) {
    if (error instanceof ServiceConfigError) exitWith(error.message, 2);
    throw error;
  }
}

async function bindings(config: GatewayConfig): Promise<Binding[]> {
  if (cluster.isWorker && process.env[BINDINGS_ENV]) return JSON.parse(process.env[BINDINGS_ENV]) as Binding[];
  try {
    return await resolveBindings(config);
  } catch (error) {
    if (error instanceof ServiceConfigError) exitWith(error.message, 2);
    throw error;
  }
}

type WorkerMessage = { event: "listening"; bound: Binding[] } | { event: "takeover-state" };

function announce(config: GatewayConfig, bound: Binding[]): void {
  const published = bound.find((b) => b.listener === "published")!;
  logJsonLine("listening", {
    host: config.listen.host,
    port: published.port,
    workers: config.workers,
    listeners: bound,
  });
}

function serveInProcess(
  config: GatewayConfig,
  token: string,
  wanted: Binding[],
  dispatcherFor: DispatcherFor | undefined,
  onListening: (bound: Binding[]) => void,
): void {
  start(config, token, { bindings: wanted, dispatcherFor })
    .then((running) => {
      onListening(running.bound);
      const stop = () => running.close().then(() => process.exit(0));
      process.once("SIGTERM", stop);
      process.once("SIGINT", stop);
    })
    .catch((error: Error) =>
      exitWith(`cannot listen on ${wanted.map((b) => `${b.address}:${b.port}`).join(", ")}: ${error.message}`, 1),
    );
}

function runPrimary(config: GatewayConfig, wanted: Binding[]): void {
  let stopping = false;
  let announced = false;
  const listening = new Set<number>();
  // A takeover made on one worker holds the agent's connections on every worker (takeovers.ts).
  const takeovers = new TakeoverRelay();
  const fork = () => {
    const worker = cluster.fork({ [BINDINGS_ENV]: JSON.stringify(wanted) });
    worker.once("online", () => takeovers.toNewWorker(worker));
    worker.on("message", (message: WorkerMessage) => {
      takeovers.fromWorker(
        message,
        worker,
        Object.values(cluster.workers ?? {}).filter((w) => w !== undefined),
      );
      if (message?.event !== "listening") return;
      listening.add(worker.id);
      if (!announced && listening.size === config.workers) {
        announced = true;
        announce(config, message.bound);
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

/**
 * Runs the gateway as configured by the environment. `dispatcherFor` replaces the upstream
 * client (bench/gateway.ts measures the one the gateway used before undici this way); a
 * script calling this is the entry point of every worker too, so each gets the same.
 */
export async function runGateway(options: { dispatcherFor?: DispatcherFor } = {}): Promise<void> {
  // A bug must not pass silently: say what happened as a log line, then die (the primary, or
  // the container's restart policy, starts a fresh process).
  process.on("uncaughtException", (error) => {
    logJsonLine("crashed", { pid: process.pid, error: error.stack ?? String(error) });
    process.exit(1);
  });
  const { config, token } = load();
  const wanted = await bindings(config);
  if (config.workers === 1)
    serveInProcess(config, token, wanted, options.dispatcherFor, (bound) => announce(config, bound));
  else if (cluster.isPrimary) runPrimary(config, wanted);
  else
    serveInProcess(config, token, wanted, options.dispatcherFor, (bound) =>
      process.send?.({ event: "listening", bound } satisfies WorkerMessage),
    );
}
