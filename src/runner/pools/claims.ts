// Claims of a warm pool's envs: a claim is a lease of a ready member in the lease store whose holder id is the claim's
// id, with a time to live its holder renews (`renew`, as any lease); claims beyond the ready members wait in the
// store's queue, served in the order they arrived across every process sharing the store. What a claim returns is what
// the agent needs: each computer's DevTools URL, its agent token and start tabs; never the control token.
import type { AccountRow, LeaseStore } from "../../accounts";
import { errorMessage, RunnerError } from "../errors";
import { processForwards, type MemberForwards } from "./forwards";
import {
  claimHolderName,
  episodeOf,
  newClaimId,
  openPoolStore,
  poolOf,
  projectDirOf,
  readHandles,
  taskOfClaim,
  type ComputerHandle,
  type MemberHandles,
  type PoolOptions,
} from "./pool";

/** How long a waiting claim's place in the queue lasts unless it asks again (it asks every POLL_MS). */
const QUEUE_MS = 10_000;
/** How often a waiting claim asks the store again. */
const POLL_MS = 100;
export const DEFAULT_TTL_SECONDS = 600;

export interface ClaimRequest {
  task: string;
  /** How long the claim lasts unless renewed (default 600 s). */
  ttlSeconds?: number;
  /** How long to wait for a ready env (default 0: answer at once). */
  waitSeconds?: number;
}

export interface Claim {
  /** Renews and releases the claim: keep it as a secret. */
  id: string;
  /** The episode's id: its evidence goes to artifacts/<task>/episodes/<episode>/. */
  episode: string;
  stack: string;
  expiresAt: string;
  computers: Record<string, ComputerHandle>;
}

/** A pool's counts, as `GET /v1/pools` shows them. */
export interface PoolState {
  task: string;
  size: number;
  ready: number;
  claimed: number;
  resetting: number;
  failed: number;
  /** Members being deployed. */
  deploying: number;
  /** Claims waiting in the queue. */
  waiting: number;
  /** How many envs of the task admission allows (null until an env's idle memory is measured). */
  admits: number | null;
}

/** No env was ready within the wait: the message says so; `state` is the pool's. */
export class PoolBusyError extends RunnerError {
  override name = "PoolBusyError";
  constructor(
    message: string,
    readonly state: Omit<PoolState, "size" | "admits">,
  ) {
    super(message);
  }
}

/** A claim that is not held (never was, released, or taken back after its time to live). */
export class ClaimGoneError extends RunnerError {
  override name = "ClaimGoneError";
}

/**
 * What a waiting claim sleeps on between asks: `POLL_MS`, or less when this process's keeper makes a member ready
 * (serve's), so a claim waiting for a release's reset is served as the reset ends, not up to a poll later. Claims and
 * keepers in other processes are still met by the poll.
 */
export class Readiness {
  private readonly waiters = new Set<() => void>();

  wait(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timeout);
        this.waiters.delete(done);
        resolve();
      };
      const timeout = setTimeout(done, ms);
      this.waiters.add(done);
    });
  }

  /** A member became ready: every waiting claim asks again now. */
  ready(): void {
    for (const wake of [...this.waiters]) wake();
  }
}

const timer = new Readiness();

export function countsOf(
  task: string,
  rows: readonly AccountRow[],
  waiting: number,
): Omit<PoolState, "size" | "admits"> {
  const count = (state: string) => rows.filter((r) => r.state === state).length;
  return {
    task,
    ready: count("ready"),
    claimed: count("claimed"),
    resetting: count("resetting"),
    failed: count("failed"),
    deploying: count("deploying"),
    waiting,
  };
}

/** Runs `use` on the pool store `options` name, or on `store` when given (kept open: serve's). */
export async function withStore<T>(
  options: PoolOptions & { openStore?: LeaseStore },
  use: (store: LeaseStore) => Promise<T>,
): Promise<T> {
  if (options.openStore !== undefined) return use(options.openStore);
  const store = await openPoolStore(options);
  try {
    return await use(store);
  } finally {
    await store.close();
  }
}

export type ClaimOptions = PoolOptions & {
  openStore?: LeaseStore;
  signal?: AbortSignal;
  /** Wakes the claim when this process's keeper makes a member ready (serve's). */
  readiness?: Readiness;
  /** Where the claim's kubernetes port-forwards are kept (serve's own); default the process's. */
  forwards?: MemberForwards;
};

/** A member's computers as the claimer dials them, or why it cannot be handed out. */
async function reachable(
  handles: MemberHandles | undefined,
  forwards: MemberForwards,
): Promise<Record<string, ComputerHandle> | string> {
  if (handles === undefined) return "has no handles";
  try {
    return await forwards.computersOf(handles);
  } catch (error) {
    return `cannot be reached (${errorMessage(error).split("\n")[0]})`;
  }
}

/**
 * Claims a ready env of the task: at once when one is ready and no earlier claim waits, else in arrival order as envs
 * become ready, for up to `waitSeconds`; then a PoolBusyError with the pool's counts.
 */
export async function claimEnv(request: ClaimRequest, options: ClaimOptions = {}): Promise<Claim> {
  const { task } = request;
  const ttlMs = (request.ttlSeconds ?? DEFAULT_TTL_SECONDS) * 1000;
  const projectDir = projectDirOf(options);
  const pool = poolOf(task);
  return withStore(options, async (store) => {
    const id = newClaimId(task);
    const deadline = Date.now() + (request.waitSeconds ?? 0) * 1000;
    const holder = { id, name: claimHolderName(id) };
    let ticket = await store.enqueue(pool, holder.name, QUEUE_MS);
    // The transaction that serves a ticket also removes it: only a claim that stops waiting leaves the queue.
    let served = false;
    try {
      for (;;) {
        const lease = await store.claim(pool, ticket, holder, ttlMs, QUEUE_MS);
        served = lease !== undefined;
        if (lease !== undefined) {
          const handles = readHandles(projectDir, task, lease.account);
          const computers = await reachable(handles, options.forwards ?? processForwards);
          if (typeof computers !== "string")
            return {
              id,
              episode: episodeOf(id, lease.since),
              stack: lease.account,
              expiresAt: lease.until.toISOString(),
              computers,
            };
          // A member that cannot be reached (no handles, its gateway's pod gone) cannot be handed out: it is failed
          // (the keeper replaces it), and the claim takes a new ticket, so it waits behind the claims that arrived
          // meanwhile.
          await store.moveMember(pool, lease.account, { state: "claimed", holder: id }, { state: "failed" });
          options.log?.(`pool ${task}: ${lease.account} ${computers}; it is failed and will be replaced`);
          ticket = await store.enqueue(pool, holder.name, QUEUE_MS);
          served = false;
          continue;
        }
        if (Date.now() >= deadline || options.signal?.aborted) {
          const state = countsOf(task, await store.accounts(pool), await store.queueLength(pool));
          throw new PoolBusyError(
            `pool ${task}: no env was ready within ${request.waitSeconds ?? 0} s (ready ${state.ready}, claimed ${state.claimed}, resetting ${state.resetting}, deploying ${state.deploying}, failed ${state.failed}, waiting ${state.waiting}); wait longer, or grow the pool with \`multienv warm ${task} --size N\``,
            state,
          );
        }
        await (options.readiness ?? timer).wait(Math.min(POLL_MS, Math.max(0, deadline - Date.now())));
      }
    } finally {
      if (!served) await store.leaveQueue(pool, ticket);
    }
  });
}

/** The member a claim holds (in state claimed), or a ClaimGoneError. */
async function heldMember(store: LeaseStore, id: string): Promise<AccountRow> {
  const task = taskOfClaim(id);
  const row = (await store.accounts(poolOf(task))).find((r) => r.holderId === id && r.state === "claimed");
  if (row === undefined)
    throw new ClaimGoneError(
      `claim ${id}: not held (released, or taken back when its time to live ran out); claim another env`,
    );
  return row;
}

/** Extends the claim to `ttlSeconds` from now. */
export async function renewClaim(
  id: string,
  ttlSeconds: number = DEFAULT_TTL_SECONDS,
  options: PoolOptions & { openStore?: LeaseStore } = {},
): Promise<{ id: string; expiresAt: string }> {
  const task = taskOfClaim(id);
  return withStore(options, async (store) => {
    const row = await heldMember(store, id);
    // The one lease mechanism: the claim's lease renewed under its id, only while the claim still holds the member
    // (between the read above and here a keeper may have taken it back).
    const lease = await store.renew(poolOf(task), row.name, id, ttlSeconds * 1000);
    if (lease === undefined) throw new ClaimGoneError(`claim ${id}: not held; claim another env`);
    return { id, expiresAt: lease.until.toISOString() };
  });
}

/** How long a keeper holds a member it resets or deploys before another may take it over. */
export const KEEPER_HOLD_MS = 15 * 60_000;

/** The holder of a member a keeper works on: unique per member and per keeper. */
export function keeperHolder(what: string, member: string, keeper: string): string {
  return `${what}:${member}:${keeper}`;
}

/** What ending a claim hands its resetter. */
export interface EndedClaim {
  task: string;
  member: string;
  episode: string;
  /** The member's holder while it resets. */
  holder: string;
}

/** Ends a claim: its member moves to resetting, held by `keeper`; the caller then resets it (resetMember). */
export async function endClaim(store: LeaseStore, id: string, keeper: string): Promise<EndedClaim> {
  const task = taskOfClaim(id);
  const row = await heldMember(store, id);
  const holder = keeperHolder("resetting", row.name, keeper);
  const moved = await store.moveMember(
    poolOf(task),
    row.name,
    { state: "claimed", holder: id },
    { state: "resetting", holder, leaseMs: KEEPER_HOLD_MS },
  );
  if (!moved) throw new ClaimGoneError(`claim ${id}: not held (taken back meanwhile); claim another env`);
  return { task, member: row.name, episode: episodeOf(id, row.since ?? new Date()), holder };
}
