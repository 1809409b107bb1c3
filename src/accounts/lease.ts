// The lease of one account of a pool to one holder (one stack of one state: store.ts), the same on every store: keep
// the account the holder holds (its lease extended), else take a free one, else wait, saying which stacks hold them,
// until one is freed or the wait is over; then fail in one line naming the pool and its holders. A new lease also
// waits its turn among the pool's sign-ins (`signInsPerMinute`), so parallel tasks do not all sign in at once.
import type { AccountRow, Holder, Lease, LeaseStore } from "./store";

/** How often a waiting request asks the store again. */
const POLL_MS = 500;

export const HOUR_MS = 3_600_000;

/** How long an `up` waits for a free account, in seconds: the runner's `up --account-wait` sets it for the program. */
export const ACCOUNT_WAIT_ENV = "MULTIENV_ACCOUNT_WAIT_SECONDS";
export const DEFAULT_ACCOUNT_WAIT_SECONDS = 600;

export interface LeaseRequest {
  pool: string;
  /** Who asks: the lease's own id and the stack's name. */
  holder: Holder;
  /** The pool's accounts by name: the store is brought in line with them first. */
  accounts: readonly string[];
  /** How long a lease lasts unless the holder asks again. */
  leaseHours: number;
  /** How long to wait for a free account before failing. */
  waitMs: number;
  /** Spaces the pool's new leases (each one a sign-in) this many a minute, across every stack; none when unset. */
  signInsPerMinute?: number;
  /** Told each time the holders change while waiting. */
  log?: (line: string) => void;
}

/** A lease that could not be had: its message names the pool and its holders. */
export class LeaseError extends Error {
  override name = "LeaseError";
}

/** "a (held by x until ...), b (...)" */
export function holdersText(rows: readonly AccountRow[]): string {
  return rows
    .map((r) => `${r.name} by ${r.heldBy ?? "nobody"}${r.until ? ` until ${r.until.toISOString()}` : ""}`)
    .join(", ");
}

/** A duration as people say it: 90 s, 10 min, 1.5 h. */
export function durationText(ms: number): string {
  if (ms < 120_000) return `${Math.round(ms / 1000)} s`;
  if (ms < 2 * HOUR_MS) return `${Math.round(ms / 60_000)} min`;
  return `${(ms / HOUR_MS).toFixed(1)} h`;
}

/** The one line a request that waited in vain fails with. */
function exhausted(pool: string, holders: string, waitMs: number): string {
  return `pool ${pool}: every account is leased (${holders}) and none was freed within ${durationText(waitMs)}; try again once one of those stacks is down, wait longer (--account-wait), or free one with \`multienv accounts ${pool} --release <account>\``;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Leases (or keeps) an account of the pool for the holder; throws a LeaseError when none is freed in time. */
export async function leaseAccount(store: LeaseStore, request: LeaseRequest): Promise<Lease> {
  const { pool, holder } = request;
  if (request.accounts.length === 0) throw new LeaseError(`pool ${pool} has no accounts; add accounts.<name> to it`);
  await store.syncPool(pool, request.accounts);
  const deadline = Date.now() + request.waitMs;
  let told = "";
  for (;;) {
    const lease = await store.tryLease(pool, holder, request.leaseHours * HOUR_MS);
    if (lease !== undefined) {
      if (!lease.kept && request.signInsPerMinute !== undefined) {
        const wait = await store.reserveSignIn(pool, 60_000 / request.signInsPerMinute);
        if (wait > 0) {
          request.log?.(
            `pool ${pool}: signing in in ${durationText(wait)} (at most ${request.signInsPerMinute} a minute)`,
          );
          await sleep(wait);
        }
      }
      return lease;
    }
    const holders = holdersText(await store.accounts(pool));
    if (Date.now() >= deadline) {
      throw new LeaseError(exhausted(pool, holders, request.waitMs));
    }
    if (holders !== told) {
      request.log?.(
        `pool ${pool}: every account is leased (${holders}); waiting up to ${durationText(deadline - Date.now())} for one`,
      );
      told = holders;
    }
    await sleep(Math.min(POLL_MS * (0.5 + Math.random()), Math.max(0, deadline - Date.now())));
  }
}

/**
 * Waits, without taking one, until an account of the pool is free (or its lease past), or one is held under
 * `holderName`, telling `log` the holders each time they change; throws the same LeaseError as leaseAccount when the
 * wait is over. Lets a program say who holds the accounts before it declares the lease, which then takes one at once
 * unless another stack was quicker. The program does not know its lease's id (its state does), so an account held
 * under its name counts as perhaps its own: when it is another state's stack of that name, the lease waits itself.
 */
export async function awaitFreeAccount(
  store: LeaseStore,
  request: Omit<LeaseRequest, "holder"> & { holderName: string },
): Promise<void> {
  const { pool, holderName } = request;
  await store.syncPool(pool, request.accounts);
  const deadline = Date.now() + request.waitMs;
  let told = "";
  for (;;) {
    const rows = await store.accounts(pool);
    const now = Date.now();
    if (
      rows.some((r) => r.heldBy === holderName || r.holderId === null || (r.until !== null && r.until.getTime() < now))
    )
      return;
    const holders = holdersText(rows);
    if (now >= deadline) throw new LeaseError(exhausted(pool, holders, request.waitMs));
    if (holders !== told) {
      request.log?.(
        `pool ${pool}: every account is leased (${holders}); waiting up to ${durationText(deadline - now)} for one`,
      );
      told = holders;
    }
    await sleep(Math.min(POLL_MS * (0.5 + Math.random()), Math.max(0, deadline - Date.now())));
  }
}
