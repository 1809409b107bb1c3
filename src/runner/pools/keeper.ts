// The keeper of warm pools: brings each pool to its size and keeps it there. Each turn, for a pool: claims whose
// holders stopped renewing are taken back (collected, reset, ready again); a failed member (its reset or deploy
// failed) and a member of an older stack file are replaced; missing members are deployed while admission allows; extra
// ones are destroyed once free. Every move of a member is a compare-and-set in the lease store, so several keepers
// (serve on many machines, a `multienv warm` beside a serve) never work on one member at once; a keeper that dies
// mid-work lets another take the member over once its hold runs out.
import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import type { AccountRow, LeaseStore } from "../../accounts";
import { errorMessage, RunnerError } from "../errors";
import { DEFAULT_DEPLOY_CONCURRENCY } from "../stack/concurrency";
import {
  admission,
  availableMemory,
  clusterAvailableMemory,
  namespaceMemory,
  stackMemory,
  type Admission,
} from "./admission";
import type { MemberForwards } from "./forwards";
import {
  countsOf,
  endClaim,
  KEEPER_HOLD_MS,
  keeperHolder,
  withStore,
  type EndedClaim,
  type PoolState,
  type Readiness,
} from "./claims";
import { deployMember, destroyMember, resetMember } from "./members";
import {
  episodeOf,
  memberName,
  poolOf,
  projectDirOf,
  readHandles,
  readSettings,
  stackFileHash,
  writeSettings,
  type PoolOptions,
  type PoolSettings,
} from "./pool";

/** How long a failed member waits before its replacement is tried again, so a broken stack file does not spin. */
const RETRY_MS = 30_000;

export interface KeeperOptions extends PoolOptions {
  /** Deploys under way at once, across the keeper's pools (default DEFAULT_DEPLOY_CONCURRENCY). */
  deployConcurrency?: number;
  /** The machine's free memory in bytes, as admission counts it (default: MemAvailable, `availableMemory`). */
  availableMemory?: () => Promise<number>;
  /** Told each time this keeper makes a member ready, so the process's waiting claims ask at once (serve's). */
  readiness?: Readiness;
  /** The port-forwards of the claims this keeper's process hands out (serve's): closed when a member goes. */
  forwards?: MemberForwards;
}

export class PoolKeeper {
  /** This keeper, in the holders it writes: host, process, and a random part. */
  readonly id = `${hostname()}.${process.pid}.${randomBytes(4).toString("hex")}`;
  /** The work under way, per member. */
  private readonly jobs = new Map<string, Promise<void>>();
  private readonly lastFailure = new Map<string, number>();
  private deploys = 0;
  /** What admission last said, per task: told once each time it changes. */
  private readonly told = new Map<string, string>();

  constructor(
    readonly store: LeaseStore,
    readonly options: KeeperOptions,
  ) {}

  private log(line: string): void {
    this.options.log?.(line);
  }

  /** Runs `work` on `member` in the background unless work on it is under way. */
  private start(member: string, work: () => Promise<void>): void {
    if (this.jobs.has(member)) return;
    const job = work()
      .catch((error: unknown) => this.log(`warning: ${member}: ${errorMessage(error).split("\n")[0]}`))
      .finally(() => this.jobs.delete(member));
    this.jobs.set(member, job);
  }

  /** Waits for the work under way. */
  async idle(): Promise<void> {
    while (this.jobs.size > 0) await Promise.all(this.jobs.values());
  }

  busy(member: string): boolean {
    return this.jobs.has(member);
  }

  /** Resets a member whose claim ended, then marks it ready, or failed when the reset fails (never handed out). */
  async finishReset(ended: Omit<EndedClaim, "episode"> & { episode?: string }): Promise<boolean> {
    const pool = poolOf(ended.task);
    const from = { state: "resetting" as const, holder: ended.holder };
    try {
      await resetMember(ended.task, ended.member, ended.episode, { ...this.options, log: undefined });
      const handles = readHandles(projectDirOf(this.options), ended.task, ended.member);
      if (handles === undefined) throw new Error("its handles are gone");
      const ready = await this.store.moveMember(pool, ended.member, from, { state: "ready" });
      if (ready) this.options.readiness?.ready();
      return ready;
    } catch (error) {
      this.log(
        `pool ${ended.task}: ${ended.member} failed its reset (${errorMessage(error).split("\n")[0]}); it is replaced`,
      );
      await this.store.moveMember(pool, ended.member, from, { state: "failed" });
      return false;
    }
  }

  /** Ends a claim and resets its member in the background (serve's release); the episode's id. */
  async release(id: string, collect: boolean): Promise<EndedClaim> {
    const ended = await endClaim(this.store, id, this.id);
    this.start(ended.member, async () => {
      await this.finishReset({ ...ended, episode: collect ? ended.episode : undefined });
    });
    return ended;
  }

  /** The pool's state and what admission allows. */
  async state(task: string): Promise<PoolState & { why: string }> {
    const pool = poolOf(task);
    const [settings, rows, waiting] = await Promise.all([
      readSettings(this.store, task),
      this.store.accounts(pool),
      this.store.queueLength(pool),
    ]);
    const counts = countsOf(task, rows, waiting);
    const allowed = await this.admission(settings, counts);
    return { ...counts, size: settings?.size ?? 0, admits: allowed.admits, why: allowed.why };
  }

  private async admission(settings: PoolSettings | undefined, counts: ReturnType<typeof countsOf>): Promise<Admission> {
    const settled = counts.ready + counts.claimed + counts.resetting + counts.failed;
    const available = await (
      this.options.availableMemory ??
      (settings?.cluster !== undefined
        ? () => clusterAvailableMemory(settings.cluster!, this.options.env)
        : availableMemory)
    )();
    return admission(settings?.idleMemoryBytes, available, settled, counts.deploying);
  }

  /** One turn of the keeper on a pool. */
  async tick(task: string): Promise<void> {
    const pool = poolOf(task);
    const settings = await readSettings(this.store, task);
    if (settings === undefined) return;
    const projectDir = projectDirOf(this.options);

    // Claims not renewed, and keepers gone mid-work: taken back, each by one keeper.
    const taken = await this.store.takeExpired(
      pool,
      (name) => keeperHolder("resetting", name, this.id),
      KEEPER_HOLD_MS,
    );
    for (const row of taken) {
      const episode =
        row.state === "claimed" && row.holderId !== null ? episodeOf(row.holderId, row.since ?? new Date()) : undefined;
      this.log(`pool ${task}: ${row.name} taken back (${row.state} by a holder that stopped renewing)`);
      const holder = keeperHolder("resetting", row.name, this.id);
      this.start(row.name, async () => {
        await this.finishReset({ task, member: row.name, holder, episode });
      });
    }

    let rows = await this.store.accounts(pool);
    // Failed members and ready members of an older stack file: replaced (destroyed, deployed again); in a pool above
    // its size (a drain) they are not deployed again but go first among the extra members, below.
    const worn = new Set<string>();
    for (const row of rows) {
      const stale =
        row.state === "ready" &&
        settings.stackFileHash !== undefined &&
        readHandles(projectDir, task, row.name)?.stackFileHash !== settings.stackFileHash;
      const failedLongEnough = row.state === "failed" && Date.now() - (this.lastFailure.get(row.name) ?? 0) > RETRY_MS;
      if (row.state === "failed" || stale) worn.add(row.name);
      if ((failedLongEnough || stale) && row.holderId === null && !this.busy(row.name) && rows.length <= settings.size)
        this.replace(task, row, settings);
    }

    rows = await this.store.accounts(pool);
    const counts = countsOf(task, rows, 0);
    if (settings.idleMemoryBytes === undefined && counts.ready > 0) {
      const first = rows.find((r) => r.state === "ready")!;
      // A kubernetes member (its handles name its gateway pod) is measured on its cluster, a docker one on the engine.
      const forward = readHandles(projectDir, task, first.name)?.portForward;
      const cluster = forward && { kubeconfig: forward.kubeconfig, context: forward.context };
      const bytes = await (
        cluster ? namespaceMemory(cluster, forward.namespace, this.options.env) : stackMemory(first.name)
      ).catch(() => 0);
      if (bytes > 0) {
        settings.idleMemoryBytes = bytes;
        if (cluster) settings.cluster = cluster;
        await writeSettings(this.store, task, settings);
        this.log(`pool ${task}: an idle env takes ${(bytes / 1024 ** 2).toFixed(0)} MiB (measured on ${first.name})`);
      }
    }

    // Grow: one member at a time until the first is measured, then as admission allows.
    if (rows.length < settings.size) {
      const allowed = await this.admission(settings, counts);
      const limit = allowed.admits ?? (rows.length === 0 ? 1 : rows.length);
      if (rows.length >= limit && allowed.admits !== null) {
        const line = `pool ${task}: admission allows ${allowed.admits} env(s) of ${settings.size} (${allowed.why}); the pool stays at ${rows.length}`;
        if (this.told.get(task) !== line) this.log(line);
        this.told.set(task, line);
      }
      const names = new Set(rows.map((r) => r.name));
      let n = 1;
      for (let have = rows.length; have < Math.min(settings.size, limit); have++) {
        if (this.deploys >= (this.options.deployConcurrency ?? DEFAULT_DEPLOY_CONCURRENCY)) break;
        while (names.has(memberName(task, n)) || this.busy(memberName(task, n))) n++;
        const member = memberName(task, n);
        names.add(member);
        this.deploy(task, member, settings);
      }
    }

    // Shrink: free members beyond the size are destroyed (their last episode collected first).
    if (rows.length > settings.size) {
      const extra = rows
        .filter((r) => (r.state === "ready" || r.state === "failed") && r.holderId === null && !this.busy(r.name))
        // A member whose destroy just failed is not tried again at once: a drain stops saying so (warmPool).
        .filter((r) => r.state !== "failed" || Date.now() - (this.lastFailure.get(r.name) ?? 0) > RETRY_MS)
        .sort(
          (a, b) =>
            Number(worn.has(b.name)) - Number(worn.has(a.name)) ||
            b.name.localeCompare(a.name, undefined, { numeric: true }),
        )
        .slice(0, rows.length - settings.size);
      for (const row of extra) {
        const holder = keeperHolder("draining", row.name, this.id);
        if (
          !(await this.store.moveMember(
            pool,
            row.name,
            { state: row.state!, holder: null },
            { state: "resetting", holder, leaseMs: KEEPER_HOLD_MS },
          ))
        )
          continue;
        this.start(row.name, async () => {
          this.log(`pool ${task}: destroying ${row.name} (the pool's size is ${settings.size})`);
          try {
            await this.options.forwards?.close(row.name);
            await destroyMember(row.name, { ...this.options, log: undefined });
          } catch (error) {
            // Failed, not held for the keeper's 15 minutes: a drain says so at once instead of waiting on it.
            this.lastFailure.set(row.name, Date.now());
            await this.store.moveMember(pool, row.name, { state: "resetting", holder }, { state: "failed" });
            throw new RunnerError(
              `pool ${task}: ${row.name} failed to be destroyed: ${errorMessage(error).split("\n")[0]}`,
            );
          }
          await this.store.setMember(pool, row.name, undefined);
        });
      }
    }
  }

  private deploy(task: string, member: string, settings: PoolSettings): void {
    const pool = poolOf(task);
    const holder = keeperHolder("deploying", member, this.id);
    this.deploys++;
    this.start(member, async () => {
      try {
        await this.store.setMember(pool, member, "deploying", holder, KEEPER_HOLD_MS);
        this.log(`pool ${task}: deploying ${member}…`);
        const started = Date.now();
        await deployMember(
          task,
          member,
          settings.stackFileHash ?? (await stackFileHash(projectDirOf(this.options), task)),
          {
            ...this.options,
            log: undefined,
          },
        );
        if (await this.store.moveMember(pool, member, { state: "deploying", holder }, { state: "ready" }))
          this.options.readiness?.ready();
        this.log(`pool ${task}: ${member} ready (${((Date.now() - started) / 1000).toFixed(1)} s)`);
      } catch (error) {
        this.lastFailure.set(member, Date.now());
        await this.store.moveMember(pool, member, { state: "deploying", holder }, { state: "failed" });
        throw new RunnerError(`pool ${task}: ${member} failed to deploy: ${errorMessage(error).split("\n")[0]}`);
      } finally {
        this.deploys--;
      }
    });
  }

  private replace(task: string, row: AccountRow, settings: PoolSettings): void {
    const pool = poolOf(task);
    const holder = keeperHolder("deploying", row.name, this.id);
    this.start(row.name, async () => {
      if (
        !(await this.store.moveMember(
          pool,
          row.name,
          { state: row.state!, holder: null },
          { state: "deploying", holder, leaseMs: KEEPER_HOLD_MS },
        ))
      )
        return;
      this.log(
        `pool ${task}: replacing ${row.name} (${row.state === "failed" ? "it failed" : "its stack file changed"})`,
      );
      await this.options.forwards?.close(row.name);
      await destroyMember(row.name, { ...this.options, log: undefined }).catch(() => undefined);
      await this.store.setMember(pool, row.name, undefined);
      this.deploy(task, row.name, settings);
    });
  }
}

/**
 * Sets the task's pool to `size` and returns once it is there: `size` members ready (deployed as needed, with
 * progress), or none left for 0 (each collected and destroyed once its claim ends). Throws in one line when admission
 * refuses the size or a deploy fails.
 */
export async function warmPool(task: string, size: number, options: KeeperOptions = {}): Promise<PoolState> {
  if (!Number.isInteger(size) || size < 0)
    throw new RunnerError(`pool ${task}: --size ${size} is not a whole number of envs; pass 0 or more`);
  return withStore(options, async (store) => {
    const projectDir = projectDirOf(options);
    const hash = size > 0 ? await stackFileHash(projectDir, task) : undefined;
    const before = await readSettings(store, task);
    await writeSettings(store, task, { ...before, size, ...(hash ? { stackFileHash: hash } : {}) });
    const keeper = new PoolKeeper(store, options);
    let lastLine = "";
    for (;;) {
      await keeper.tick(task);
      const state = await keeper.state(task);
      const members = state.ready + state.claimed + state.resetting + state.failed + state.deploying;
      if (state.ready === size && members === size) {
        // The work under way (a destroy's last steps) ends before the command does.
        await keeper.idle();
        return state;
      }
      if (state.admits !== null && state.admits < size && members >= state.admits && state.deploying === 0)
        throw new RunnerError(
          `pool ${task}: only ${state.admits} env(s) fit, not ${size}: ${state.why}; the pool keeps ${members}; ask for ${state.admits} or fewer, or free memory`,
        );
      const line = `pool ${task}: ${state.ready}/${size} ready (deploying ${state.deploying}, claimed ${state.claimed}, resetting ${state.resetting}, failed ${state.failed})`;
      if (line !== lastLine) options.log?.(line);
      lastLine = line;
      const failedNow =
        state.failed > 0 &&
        state.deploying === 0 &&
        !(await store.accounts(poolOf(task))).some((r) => keeper.busy(r.name));
      if (failedNow)
        throw new RunnerError(
          `pool ${task}: ${state.failed} env(s) failed to deploy or reset (see the lines above); fix the stack file, then run \`multienv warm ${task} --size ${size}\` again`,
        );
      await new Promise((r) => setTimeout(r, 1000));
    }
  });
}

/** Releases a claim: its episode collected (unless `collect` is false), the env reset and ready again. */
export async function releaseEnv(
  id: string,
  options: PoolOptions & { collect?: boolean } = {},
): Promise<{ id: string; episode: string; stack: string; ready: boolean }> {
  return withStore(options, async (store) => {
    const keeper = new PoolKeeper(store, options);
    const ended = await endClaim(store, id, keeper.id);
    const ready = await keeper.finishReset({
      ...ended,
      episode: options.collect === false ? undefined : ended.episode,
    });
    return { id, episode: ended.episode, stack: ended.member, ready };
  });
}
