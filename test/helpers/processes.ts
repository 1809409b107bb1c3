// Processes and files a test starts and must leave nothing of: the cleanup registry every helper registers on, temp
// directories, a service process and its JSON log lines, a child's lines awaited, a child stopped on cleanup.
import { spawn, type ChildProcess } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";

/** The repository root. */
export const ROOT = path.resolve(__dirname, "../..");

const cleanups: (() => unknown)[] = [];

/** Runs everything registered with `onCleanup`, newest first; call from afterEach/afterAll. */
export async function cleanup(): Promise<void> {
  while (cleanups.length > 0) await cleanups.pop()!();
}

export function onCleanup(fn: () => unknown): void {
  cleanups.push(fn);
}

/** A temp directory, removed on cleanup. */
export function tempDir(prefix = "multienv-test-"): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  onCleanup(() => fs.rmSync(dir, { recursive: true, force: true, maxRetries: 10, retryDelay: 100 }));
  return dir;
}

/** A service process (the gateway, a capture server) spawned with `args`, its JSON log lines collected. */
export interface ServiceProcess {
  process: ChildProcess;
  /** Every JSON line it printed so far. */
  logs: Array<Record<string, unknown>>;
  waitForLog(
    predicate: (line: Record<string, unknown>) => boolean,
    timeoutMs?: number,
  ): Promise<Record<string, unknown>>;
  /** Resolves with its `listening` line; rejects if it exits first. */
  listening: Promise<Record<string, unknown>>;
  stop(): Promise<void>;
}

/** Spawns `node <args>` with `env` added to this process's, collecting the JSON lines it prints. */
export function spawnService(args: string[], env: Record<string, string>): ServiceProcess {
  const child = spawn(process.execPath, args, { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
  const logs: Array<Record<string, unknown>> = [];
  const waiters: Array<() => void> = [];
  let buffered = "";
  let stderr = "";
  child.stdout!.setEncoding("utf8");
  child.stdout!.on("data", (text: string) => {
    buffered += text;
    let newline;
    while ((newline = buffered.indexOf("\n")) !== -1) {
      const line = buffered.slice(0, newline);
      buffered = buffered.slice(newline + 1);
      try {
        logs.push(JSON.parse(line));
      } catch {
        logs.push({ event: "unparsed", line });
      }
      for (const wake of waiters.splice(0)) wake();
    }
  });
  child.stderr!.on("data", (chunk) => (stderr += chunk));
  const waitForLog: ServiceProcess["waitForLog"] = (predicate, timeoutMs = 10_000) =>
    new Promise((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`no matching log line; have ${JSON.stringify(logs)}; stderr ${stderr}`)),
        timeoutMs,
      );
      const look = () => {
        const found = logs.find(predicate);
        if (found) {
          clearTimeout(timer);
          resolve(found);
        } else waiters.push(look);
      };
      look();
    });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const listening = new Promise<Record<string, unknown>>((resolve, reject) => {
    child.once("exit", (code) => reject(new Error(`${args.at(-1)} exited ${code}: ${stderr}`)));
    // A loaded machine may take long to start a service of several workers (each compiles its TypeScript).
    waitForLog((line) => line.event === "listening", 60_000).then(resolve, reject);
  });
  listening.catch(() => undefined);
  return {
    process: child,
    logs,
    waitForLog,
    listening,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
      await exited;
    },
  };
}

/** Reads JSON lines from a child's stdout until `match` is seen. */
export function waitForLine(
  child: ChildProcess,
  match: (line: Record<string, unknown>) => boolean,
  what: string,
  timeoutMs = 20_000,
): Promise<Record<string, unknown>> {
  return new Promise((resolvePromise, reject) => {
    let buffered = "";
    let stderr = "";
    const timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}; stderr: ${stderr}`)), timeoutMs);
    child.stderr?.on("data", (d: Buffer) => (stderr += d.toString()));
    child.stdout!.on("data", (d: Buffer) => {
      buffered += d.toString();
      for (const line of buffered.split("\n")) {
        if (!line.startsWith("{")) continue;
        try {
          const parsed = JSON.parse(line) as Record<string, unknown>;
          if (match(parsed)) {
            clearTimeout(timer);
            resolvePromise(parsed);
          }
        } catch {
          // a partial line; wait for the rest
        }
      }
    });
    child.once("exit", (code) => reject(new Error(`${what}: exited ${code} first; stderr: ${stderr}`)));
  });
}

/** Stops `child` on cleanup; with `group`, its whole process group (Chromium's helpers write its profile too). */
export function stopOnCleanup(child: ChildProcess, { group = false } = {}): void {
  const signal = (name: NodeJS.Signals) => {
    try {
      if (group && child.pid !== undefined) process.kill(-child.pid, name);
      else child.kill(name);
    } catch {
      // already gone
    }
  };
  onCleanup(async () => {
    if (child.exitCode !== null || child.signalCode !== null) {
      if (group) signal("SIGKILL");
      return;
    }
    const exited = new Promise((done) => child.once("exit", done));
    signal("SIGTERM");
    const timer = setTimeout(() => signal("SIGKILL"), 3_000);
    await exited;
    clearTimeout(timer);
    if (group) signal("SIGKILL");
  });
}

/** A shell command, run inside a container or pod, that prints the status file of each zombie process it sees. */
export const LIST_ZOMBIES = ["sh", "-c", "grep -l '^State:.Z' /proc/[0-9]*/status || true"];
