// Across processes: one lifecycle operation at a time on a stack's env and evidence. A `multienv reset` from one CLI,
// another from a second CLI, `multienv serve` resetting a warm pool's member, a `collect` or a `down` each read and
// write run.json, move the episode's evidence into episodes/<n>/ and mark the proxies' logs; two at once would number
// one episode twice, archive one episode's files under another's number, or write a run.json of neither. withStackLock
// (lock.ts) queues them within one process; this is the same promise between processes.
//
// The lock is a row in a small SQLite database beside the stack's artifacts (`<artifacts>/<stack>.lock`), taken and
// checked in one IMMEDIATE transaction: never two holders, whichever processes race. Its holder is a process (pid,
// host, what it does, since when), and a holder that is gone (no such pid on this host: killed, even with SIGKILL,
// or crashed) holds nothing: the next operation takes the lock at once. What it guards is this machine's (the
// stack's artifacts directory), so a process of this host is the holder it has to know; the lease store of the
// account pools (src/accounts/) was not used, since its leases end by time alone (a killed holder would keep the
// stack for a lease's length) and a stack outside any pool has no store configured.
//
// The second operation waits for the first (LOCK_WAIT_MS at most: a reset, a collect or a sign-in takes seconds), with
// one line saying whom it waits for, then refuses with one line naming the holder and what to do.
import { randomUUID } from "node:crypto";
import { mkdirSync } from "node:fs";
import { hostname } from "node:os";
import { dirname } from "node:path";
import Database from "better-sqlite3";
import { RunnerError } from "../errors";

/** How long an operation waits for another process's on the same stack before it refuses. */
export const LOCK_WAIT_MS = 120_000;
const POLL_MS = 100;

/** Who holds a stack's lifecycle lock. */
export interface LockHolder {
  pid: number;
  host: string;
  /** What it does, as its operation says (`resetting`, `collecting`, `destroying`, ...). */
  doing: string;
  /** When it took the lock, ISO 8601. */
  since: string;
}

/** The lock of the stack whose artifacts are in `artifactsDir`: a file beside that directory, which it outlives. */
export function lifecycleLockFile(artifactsDir: string): string {
  return `${artifactsDir.replace(/\/+$/, "")}.lock`;
}

/** True when the holder may still run: a process of this host by that pid exists (another host's cannot be asked). */
function alive(holder: LockHolder): boolean {
  if (holder.host !== hostname()) return true;
  // This process's own lock is never left taken (released in a finally), and its operations on a stack are queued.
  if (holder.pid === process.pid) return false;
  try {
    process.kill(holder.pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

function openLock(file: string): Database.Database {
  mkdirSync(dirname(file), { recursive: true });
  const db = new Database(file, { timeout: 10_000 });
  db.exec(
    "CREATE TABLE IF NOT EXISTS holder (one INTEGER PRIMARY KEY CHECK (one = 1), token TEXT NOT NULL, pid INTEGER NOT NULL, host TEXT NOT NULL, doing TEXT NOT NULL, since TEXT NOT NULL)",
  );
  return db;
}

/** Takes the lock for `me` unless a live holder has it; that holder when it does. */
function tryTake(file: string, token: string, me: LockHolder): LockHolder | undefined {
  const db = openLock(file);
  try {
    return db
      .transaction((): LockHolder | undefined => {
        const held = db.prepare("SELECT pid, host, doing, since FROM holder").get() as LockHolder | undefined;
        if (held !== undefined && alive(held)) return held;
        db.prepare("INSERT OR REPLACE INTO holder (one, token, pid, host, doing, since) VALUES (1, ?, ?, ?, ?, ?)").run(
          token,
          me.pid,
          me.host,
          me.doing,
          me.since,
        );
        return undefined;
      })
      .immediate();
  } finally {
    db.close();
  }
}

function release(file: string, token: string): void {
  const db = openLock(file);
  try {
    db.prepare("DELETE FROM holder WHERE token = ?").run(token);
  } finally {
    db.close();
  }
}

function describeHolder(holder: LockHolder): string {
  const where = holder.host === hostname() ? "" : ` on ${holder.host}`;
  return `process ${holder.pid}${where} (${holder.doing} it since ${holder.since})`;
}

export interface LifecycleLockOptions {
  stack: string;
  /** What the operation does, for the holder's line others read (`resetting`). */
  doing: string;
  log?: (line: string) => void;
  /** How long to wait for another process's operation (LOCK_WAIT_MS). */
  waitMs?: number;
}

/**
 * Runs `operation` holding the stack's lifecycle lock (the stack whose artifacts are in `artifactsDir`): once no
 * other live process holds it, waiting at most `waitMs`; refuses with one line naming the holder otherwise.
 */
export async function withLifecycleLock<T>(
  artifactsDir: string,
  options: LifecycleLockOptions,
  operation: () => Promise<T>,
): Promise<T> {
  const file = lifecycleLockFile(artifactsDir);
  const token = randomUUID();
  const me: LockHolder = { pid: process.pid, host: hostname(), doing: options.doing, since: "" };
  const deadline = Date.now() + (options.waitMs ?? LOCK_WAIT_MS);
  let told: string | undefined;
  for (;;) {
    const holder = tryTake(file, token, { ...me, since: new Date().toISOString() });
    if (holder === undefined) break;
    const who = describeHolder(holder);
    if (Date.now() >= deadline) {
      const gone =
        holder.host === hostname()
          ? ""
          : `; if that process is gone (another machine's cannot be checked from here), delete ${file}`;
      throw new RunnerError(
        `stack ${options.stack}: not ${options.doing}: ${who} still holds it after ${Math.round((options.waitMs ?? LOCK_WAIT_MS) / 1000)} s; run this again once it is done${gone}`,
      );
    }
    if (told !== who) options.log?.(`stack ${options.stack}: waiting for ${who} to finish`);
    told = who;
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
  try {
    return await operation();
  } finally {
    release(file, token);
  }
}
