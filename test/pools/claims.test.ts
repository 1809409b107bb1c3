// Claims of a warm pool, on both lease stores for real (the embedded SQLite file and a PostgreSQL server started
// here), from separate processes at once. The pool's members are registered in the store as ready without a deploy:
// a claim reads the store and the members' handles alone, never the engine, so the claim path is tested whole without
// one (the members' deploy and reset are the e2e tier's, test/e2e/warm-pools.test.ts).
import { afterEach, describe, expect, it } from "vitest";
import { holdersText, openLeaseStore, type LeaseStore } from "../../src/accounts";
import { ClaimGoneError, PoolBusyError, PoolKeeper, claimEnv, poolOf, renewClaim } from "../../src/runner/pools";
import { startPostgres } from "../helpers/postgres";
import { cleanup, onCleanup } from "../helpers/processes";
import { until } from "../helpers/until";
import { envOf, holds, mostAtOnce, project, registerReady, startWorker, type Project } from "./helpers";

afterEach(cleanup);

const TASK = "shop";

interface Where {
  p: Project;
  store: LeaseStore;
  url?: string;
}

async function where(kind: "sqlite" | "postgres"): Promise<Where> {
  const p = project(TASK);
  const url = kind === "postgres" ? (await startPostgres()).url : undefined;
  const store = await openLeaseStore({ store: url, sqliteFile: p.sqliteFile });
  onCleanup(() => store.close());
  return { p, store, url };
}

describe.each(["sqlite", "postgres"] as const)("warm pool claims on %s", (kind) => {
  it("50 claims from 10 processes against a pool of 3: one holder per env, at most 3 held, every claim served", async () => {
    const w = await where(kind);
    await registerReady(w.store, w.p, TASK, 3);
    const workers = Array.from({ length: 10 }, () =>
      startWorker({ ...w.p, store: w.url, task: TASK, claims: 5, holdMs: 30, waitSeconds: 550 }),
    );
    const codes = await Promise.all(workers.map((x) => x.exited));
    expect(workers.flatMap((x) => x.lines).filter((l) => l.event === "failed")).toEqual([]);
    expect(codes).toEqual(Array(10).fill(0));
    const spans = holds(workers);
    expect(spans).toHaveLength(50);
    expect(new Set(spans.map((s) => s.id)).size).toBe(50);
    for (const s of spans)
      for (const o of spans)
        if (o !== s && o.stack === s.stack)
          expect(o.to <= s.from || s.to <= o.from, `${s.stack} held twice`).toBe(true);
    expect(mostAtOnce(spans)).toBeLessThanOrEqual(3);
    const rows = await w.store.accounts(poolOf(TASK));
    expect(rows.map((r) => r.state)).toEqual(["ready", "ready", "ready"]);
    expect(await w.store.queueLength(poolOf(TASK))).toBe(0);
  }, 600_000);

  it("claims waiting for an env are served in the order they arrived, across processes", async () => {
    const w = await where(kind);
    await registerReady(w.store, w.p, TASK, 1);
    const held = await claimEnv({ task: TASK }, { projectDir: w.p.projectDir, env: envOf(w.p), store: w.url });
    const workers = [];
    for (let i = 0; i < 4; i++) {
      workers.push(startWorker({ ...w.p, store: w.url, task: TASK, claims: 1, holdMs: 20, waitSeconds: 550 }));
      // The next one arrives once this one waits in the queue.
      await until(`claim ${i + 1} waiting`, async () => (await w.store.queueLength(poolOf(TASK))) === i + 1, 300_000);
    }
    expect(
      await w.store.moveMember(poolOf(TASK), held.stack, { state: "claimed", holder: held.id }, { state: "ready" }),
    ).toBe(true);
    await Promise.all(workers.map((x) => x.exited));
    const order = workers.map((x) => x.lines.find((l) => l.event === "claimed")!.at as number);
    expect([...order].sort((a, b) => a - b)).toEqual(order);
  }, 600_000);
});

describe("a claim's time to live", () => {
  it("a holder killed mid-episode loses its env once its time to live is over: taken back, its id refused, reset before any claim", async () => {
    const w = await where("sqlite");
    const [member] = await registerReady(w.store, w.p, TASK, 1);
    const options = { projectDir: w.p.projectDir, env: envOf(w.p) };
    const holder = startWorker({ ...w.p, task: TASK, claims: 1, holdMs: 600_000, waitSeconds: 10 });
    await until("claimed", async () => holder.lines.some((l) => l.event === "claimed"), 60_000);
    const id = holder.lines.find((l) => l.event === "claimed")!.id as string;
    // The worker's claims last 60 s: this one is cut to 1 s, as a holder that renewed last a second ago.
    expect(await w.store.renew(poolOf(TASK), member, id, 1000)).toBeDefined();
    holder.child.kill("SIGKILL");
    await holder.exited;

    const keeper = new PoolKeeper(w.store, options);
    // Before its time to live is over the env stays the dead holder's: nothing takes it back, no claim gets it.
    expect(await w.store.takeExpired(poolOf(TASK), () => "nobody", 1000)).toEqual([]);
    await expect(claimEnv({ task: TASK }, options)).rejects.toBeInstanceOf(PoolBusyError);
    await until(
      "the claim expired",
      async () => Date.now() > (await w.store.accounts(poolOf(TASK)))[0].until!.getTime(),
      10_000,
    );
    // The keeper's turn takes it back and resets it; meanwhile a late renewal by the dead holder's id is refused.
    const resets: string[] = [];
    const taken = w.store.takeExpired.bind(w.store);
    w.store.takeExpired = async (...args) => {
      const rows = await taken(...args);
      resets.push(...rows.map((r) => r.name));
      return rows;
    };
    await keeper.tick(TASK);
    expect(resets).toEqual([member]);
    await expect(renewClaim(id, 60, options)).rejects.toBeInstanceOf(ClaimGoneError);
    await expect(claimEnv({ task: TASK }, options)).rejects.toBeInstanceOf(PoolBusyError);
    await keeper.idle();
  }, 60_000);

  it("a renewal keeps the claim past its first time to live", async () => {
    const w = await where("sqlite");
    await registerReady(w.store, w.p, TASK, 1);
    const options = { projectDir: w.p.projectDir, env: envOf(w.p) };
    const claim = await claimEnv({ task: TASK, ttlSeconds: 1 }, options);
    const renewed = await renewClaim(claim.id, 120, options);
    expect(Date.parse(renewed.expiresAt)).toBeGreaterThan(Date.parse(claim.expiresAt) + 100_000);
    await new Promise((r) => setTimeout(r, 1500));
    expect(await w.store.takeExpired(poolOf(TASK), () => "keeper", 1000)).toEqual([]);
  });
});

describe("a reset that fails", () => {
  it("leaves the env failed, never claimed: here the member's stack is not in the state, so its reset fails", async () => {
    const w = await where("sqlite");
    const [member] = await registerReady(w.store, w.p, TASK, 1);
    const options = { projectDir: w.p.projectDir, env: envOf(w.p) };
    const keeper = new PoolKeeper(w.store, options);
    const claim = await claimEnv({ task: TASK }, options);
    const ended = await keeper.release(claim.id, false);
    expect(ended.member).toBe(member);
    await keeper.idle();
    expect((await w.store.accounts(poolOf(TASK)))[0]).toMatchObject({ name: member, state: "failed", heldBy: null });
    await expect(claimEnv({ task: TASK, waitSeconds: 1 }, options)).rejects.toBeInstanceOf(PoolBusyError);
  }, 120_000);
});

describe.each(["sqlite", "postgres"] as const)("a claim's id on %s", (kind) => {
  it("is the claim's bearer secret: no listing of the pool's holders shows it (`multienv accounts`, a lease's message)", async () => {
    const w = await where(kind);
    await registerReady(w.store, w.p, TASK, 2);
    const options = { projectDir: w.p.projectDir, env: envOf(w.p), store: w.url };
    const claim = await claimEnv({ task: TASK }, options);
    const rows = await w.store.accounts(poolOf(TASK));
    const held = rows.find((r) => r.name === claim.stack)!;
    // The row's holder id is the claim's (what renews it); the name others read is a digest of it.
    expect(held.holderId).toBe(claim.id);
    expect(held.heldBy).toBe(`claim ${claim.episode.split("-").at(-1)}`);
    expect(holdersText(rows)).not.toContain(claim.id.split(".").at(-1));
    expect((await renewClaim(claim.id, 60, options)).id).toBe(claim.id);
  });
});
