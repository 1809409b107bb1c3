// The account pools' test helpers: a lease request as a process of its own (lease-worker.ts), its JSON lines, and a
// store opened for a test's own reading.
import { spawn, type ChildProcess } from "node:child_process";
import * as path from "node:path";
import { pathToFileURL } from "node:url";
import { openLeaseStore, type LeaseStore } from "../../src/accounts";
import { onCleanup, ROOT } from "../helpers/processes";

export interface Worker {
  holder: string;
  child: ChildProcess;
  lines: Record<string, unknown>[];
  exited: Promise<number | null>;
}

export interface Where {
  store?: string;
  /** Unset: the machine's default store, as the worker's environment finds it. */
  sqliteFile?: string;
}

export interface WorkerOptions {
  accounts: string[];
  leaseHours: number;
  waitMs: number;
  /** Lease and release through the AccountLease resource's own operations, as the engine runs them. */
  resource?: boolean;
  /** The worker's working directory (a checkout) and environment over this one's. */
  cwd?: string;
  env?: NodeJS.ProcessEnv;
  /** Default gh. */
  pool?: string;
}

/** tsx's loader by its path, so a worker whose working directory is elsewhere (another checkout) still loads it. */
const TSX = pathToFileURL(require.resolve("tsx", { paths: [ROOT] })).href;

/** Starts one lease request as a process of its own; killed at cleanup if it still runs. */
export function startWorker(where: Where, holder: string, options: WorkerOptions): Worker {
  const { cwd, env, pool, ...rest } = options;
  const args = { ...where, pool: pool ?? "gh", holder, ...rest };
  const child = spawn(
    process.execPath,
    [`--import=${TSX}`, path.join(__dirname, "lease-worker.ts"), JSON.stringify(args)],
    {
      cwd: cwd ?? ROOT,
      env: { ...process.env, ...env },
      stdio: ["pipe", "pipe", "inherit"],
    },
  );
  const lines: Record<string, unknown>[] = [];
  let buffered = "";
  child.stdout!.setEncoding("utf8").on("data", (text: string) => {
    buffered += text;
    let newline;
    while ((newline = buffered.indexOf("\n")) !== -1) {
      lines.push(JSON.parse(buffered.slice(0, newline)) as Record<string, unknown>);
      buffered = buffered.slice(newline + 1);
    }
  });
  const exited = new Promise<number | null>((done) => child.once("exit", (code) => done(code)));
  onCleanup(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    return exited;
  });
  return { holder, child, lines, exited };
}

/** The first line of the worker with this `event`. */
export const event = (w: Worker, name: string) => w.lines.find((l) => l.event === name);

/** The store of `where`, for the test to read; closed at cleanup. */
export async function openStoreFor(where: Where): Promise<LeaseStore> {
  const store = await openLeaseStore({ store: where.store, sqliteFile: where.sqliteFile ?? "/nonexistent/unused" });
  onCleanup(() => store.close());
  return store;
}
