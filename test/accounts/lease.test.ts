// Leases from separate processes at once, on both stores for real (the embedded SQLite file and a PostgreSQL server
// started here): twenty `up`-equivalent requests against a pool of five never hold one account twice, at most five
// hold one while the rest wait, and each freed account goes to a waiting request; a process killed while holding a
// lease loses it once the lease expires. A holder is one stack of one state: the same stack name leasing from two
// states (two processes, each its own lease resource) gets two accounts or waits, and one's release leaves the
// other's lease held. The machine's default store is one file whichever checkout or backend leases from it.
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { startPostgres } from "../helpers/postgres";
import { cleanup, tempDir } from "../helpers/processes";
import { until } from "../helpers/until";
import { event, openStoreFor, startWorker, type Where } from "./helpers";

afterEach(cleanup);

async function twentyOnFive(where: Where): Promise<void> {
  const accounts = ["acct-1", "acct-2", "acct-3", "acct-4", "acct-5"];
  const workers = Array.from({ length: 20 }, (_, i) =>
    startWorker(where, `task-${String(i + 1).padStart(2, "0")}`, { accounts, leaseHours: 1, waitMs: 240_000 }),
  );
  const store = await openStoreFor(where);
  const holding = () => workers.filter((w) => event(w, "leased") && !event(w, "released"));

  // Five hold, one account each; the fifteen others say they wait, naming the holders.
  await until(
    "five leases and fifteen waiting",
    () => {
      const failed = workers.find((w) => event(w, "failed"));
      if (failed) throw new Error(`${failed.holder}: ${String(event(failed, "failed")!.message)}`);
      return holding().length === 5 && workers.filter((w) => event(w, "waiting")).length >= 15;
    },
    120_000,
    50,
  );
  const waiting = workers.filter((w) => !event(w, "leased"));
  expect(waiting).toHaveLength(15);
  for (const w of waiting)
    expect(String(event(w, "waiting")!.line)).toMatch(/^pool gh: every account is leased \(acct-1 by task-/);

  let released = 0;
  const order: string[] = [];
  while (holding().length > 0) {
    const current = holding();
    // Never one account held twice, never more than five held, and the store says the same.
    const held = current.map((w) => String(event(w, "leased")!.account));
    expect(new Set(held).size).toBe(held.length);
    expect(held.length).toBeLessThanOrEqual(5);
    const rows = await store.accounts("gh");
    expect(
      rows
        .filter((r) => r.heldBy !== null)
        .map((r) => [r.name, r.heldBy])
        .sort(),
    ).toEqual(current.map((w) => [String(event(w, "leased")!.account), w.holder]).sort());

    // Free the oldest lease: one waiting request, if any is left, takes exactly that account.
    const leaving = current[0];
    const account = String(event(leaving, "leased")!.account);
    const before = workers.filter((w) => event(w, "leased")).length;
    leaving.child.stdin!.write("release\n");
    await until(`${leaving.holder} released`, () => event(leaving, "released"), 30_000);
    expect(await leaving.exited).toBe(0);
    released++;
    order.push(account);
    if (workers.some((w) => !event(w, "leased"))) {
      const taker = await until(
        `a waiting request taking ${account}`,
        () => {
          const now = workers.filter((w) => event(w, "leased"));
          return now.length > before ? now : undefined;
        },
        60_000,
      );
      expect(taker.length).toBe(before + 1);
      const newcomer = holding().find((w) => !current.includes(w))!;
      expect(event(newcomer, "leased")!.account).toBe(account);
    }
  }
  expect(released).toBe(20);
  expect((await store.accounts("gh")).every((r) => r.heldBy === null)).toBe(true);
}

async function killedHolderExpires(where: Where): Promise<void> {
  // Two requests on a pool of one, with leases of fifteen seconds (15/3600 of an hour): one holds, the other waits.
  const options = { accounts: ["only"], leaseHours: 15 / 3600, waitMs: 120_000 };
  const pair = [startWorker(where, "task-a", options), startWorker(where, "task-b", options)];
  const holder = await until("one lease", () => pair.find((w) => event(w, "leased")), 60_000);
  const waiter = pair.find((w) => w !== holder)!;
  await until("the other waiting", () => event(waiter, "waiting"), 60_000);
  expect(String(event(waiter, "waiting")!.line)).toContain(`only by ${holder.holder} until`);
  // The holder dies without releasing: the waiter takes the account once the lease is past.
  holder.child.kill("SIGKILL");
  await holder.exited;
  const leased = await until(
    "the lease taken after expiry",
    () => event(waiter, "leased") ?? event(waiter, "failed"),
    90_000,
  );
  expect(leased).toMatchObject({ event: "leased", account: "only", kept: false });
  const rows = await (await openStoreFor(where)).accounts("gh");
  expect(rows).toEqual([expect.objectContaining({ name: "only", heldBy: waiter.holder })]);
}

/** Sign-ins of one pool, reserved through two connections: each slot a full interval after the one before. */
async function signInsSpaced(where: Where): Promise<void> {
  const [one, two] = [await openStoreFor(where), await openStoreFor(where)];
  const minute = 60_000;
  const waits = [
    await one.reserveSignIn("gh", minute),
    await two.reserveSignIn("gh", minute),
    await one.reserveSignIn("gh", minute),
  ];
  expect(waits[0]).toBe(0);
  // Each later sign-in waits for the slots before it, whoever asked: at least one interval less what has passed
  // since (far less than a minute).
  expect(waits[1]).toBeGreaterThan(minute / 2);
  expect(waits[2]).toBeGreaterThan(waits[1] + minute / 2);
  // Another pool has slots of its own.
  expect(await two.reserveSignIn("other", minute)).toBe(0);
}

/**
 * `task-17` deployed from two states (each its own process and its own AccountLease resource, as two machines or
 * two checkouts would): two accounts, never one; the first one's `down` frees its own and leaves the other's held;
 * on a pool of one the second waits, then fails naming the holder.
 */
async function oneNameTwoStates(where: Where): Promise<void> {
  const options = { accounts: ["acct-1", "acct-2"], leaseHours: 1, waitMs: 60_000, resource: true };
  const [first, second] = [startWorker(where, "task-17", options), startWorker(where, "task-17", options)];
  const leased = await until(
    "both leases",
    () => {
      const failed = [first, second].find((w) => event(w, "failed"));
      if (failed) throw new Error(String(event(failed, "failed")!.message));
      return event(first, "leased") && event(second, "leased")
        ? [first, second].map((w) => event(w, "leased")!)
        : undefined;
    },
    60_000,
  );
  expect(new Set(leased.map((l) => l.account)).size).toBe(2);
  expect(leased[0].leaseId).not.toBe(leased[1].leaseId);
  const store = await openStoreFor(where);
  const held = (await store.accounts("gh")).map((r) => [r.name, r.heldBy, r.holderId]);
  expect(held.sort()).toEqual(leased.map((l) => [l.account, "task-17", l.leaseId]).sort());

  first.child.stdin!.write("release\n");
  await until("the first released", () => event(first, "released"), 30_000);
  const after = await store.accounts("gh");
  expect(after.find((r) => r.name === leased[0].account)).toMatchObject({ heldBy: null, holderId: null });
  expect(after.find((r) => r.name === leased[1].account)).toMatchObject({
    heldBy: "task-17",
    holderId: leased[1].leaseId,
  });

  // A pool of one: the same name from another state does not get the account its namesake holds.
  const single = { pool: "solo", accounts: ["only"], leaseHours: 1, waitMs: 3_000, resource: true };
  const holder = startWorker(where, "task-18", single);
  await until("task-18 leased", () => event(holder, "leased"), 60_000);
  const namesake = startWorker(where, "task-18", single);
  expect(await namesake.exited).toBe(1);
  expect(String(event(namesake, "failed")!.message)).toMatch(
    /^pool solo: every account is leased \(only by task-18 until .*\) and none was freed within 3 s/,
  );
  expect((await store.accounts("solo")).find((r) => r.name === "only")).toMatchObject({
    heldBy: "task-18",
    holderId: event(holder, "leased")!.leaseId,
  });
}

describe("leases on the embedded SQLite store", () => {
  const where = (): Where => ({ sqliteFile: path.join(tempDir(), "state-dir", "..", "accounts.sqlite") });

  it("twenty requests from separate processes on a pool of five: each account held once, the rest wait, freed ones are taken", async () => {
    await twentyOnFive(where());
  }, 300_000);

  it("a process killed while holding a lease loses it once the lease expires", async () => {
    await killedHolderExpires(where());
  }, 180_000);

  it("spaces a pool's sign-ins across connections", async () => {
    await signInsSpaced(where());
  });

  it("the same stack name from two states gets two accounts or waits, and one's down leaves the other's lease", async () => {
    await oneNameTwoStates(where());
  }, 180_000);

  it("the default store is the machine's: two checkouts with their own state lease from one file, never one account twice", async () => {
    const machine = tempDir("machine-");
    const checkouts = [tempDir("checkout-a-"), tempDir("checkout-b-")];
    const options = (dir: string) => ({
      accounts: ["acct-1", "acct-2"],
      leaseHours: 1,
      waitMs: 60_000,
      resource: true,
      cwd: dir,
      // Each checkout's own state, as the runner's default (.multienv/state) or a `pulumi login` would give it.
      env: { MULTIENV_CACHE: machine, PULUMI_BACKEND_URL: `file://${path.join(dir, ".multienv", "state")}` },
    });
    const workers = checkouts.map((dir) => startWorker({}, "task-17", options(dir)));
    const leased = await until(
      "a lease in each checkout",
      () => {
        const failed = workers.find((w) => event(w, "failed"));
        if (failed) throw new Error(String(event(failed, "failed")!.message));
        return workers.every((w) => event(w, "leased")) ? workers.map((w) => event(w, "leased")!) : undefined;
      },
      60_000,
    );
    expect(leased.map((l) => l.sqliteFile)).toEqual([
      path.join(machine, "accounts.sqlite"),
      path.join(machine, "accounts.sqlite"),
    ]);
    expect(new Set(leased.map((l) => l.account)).size).toBe(2);
  }, 180_000);
});

describe("leases on PostgreSQL", () => {
  it("twenty requests from separate processes on a pool of five: each account held once, the rest wait, freed ones are taken", async () => {
    const server = await startPostgres();
    await twentyOnFive({ store: server.url, sqliteFile: "/nonexistent/unused.sqlite" });
  }, 300_000);

  it("a process killed while holding a lease loses it once the lease expires", async () => {
    const server = await startPostgres();
    await killedHolderExpires({ store: server.url, sqliteFile: "/nonexistent/unused.sqlite" });
  }, 180_000);

  it("spaces a pool's sign-ins across connections", async () => {
    const server = await startPostgres();
    await signInsSpaced({ store: server.url, sqliteFile: "/nonexistent/unused.sqlite" });
  });

  it("the same stack name from two states gets two accounts or waits, and one's down leaves the other's lease", async () => {
    const server = await startPostgres();
    await oneNameTwoStates({ store: server.url, sqliteFile: "/nonexistent/unused.sqlite" });
  }, 180_000);
});
