// Leases from separate processes at once, on both stores for real (the embedded SQLite file and a PostgreSQL server
// started here): twenty `up`-equivalent requests against a pool of five never hold one account twice, at most five
// hold one while the rest wait, and each freed account goes to a waiting request; a process killed while holding a
// lease loses it once the lease expires.
import { spawn, type ChildProcess } from "node:child_process";
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { openLeaseStore, type LeaseStore } from "../../src/accounts";
import { startPostgres } from "../helpers/postgres";
import { cleanup, onCleanup, ROOT, tempDir } from "../helpers/processes";
import { until } from "../helpers/until";

afterEach(cleanup);

interface Worker {
  holder: string;
  child: ChildProcess;
  lines: Record<string, unknown>[];
  exited: Promise<number | null>;
}

interface Where {
  store?: string;
  sqliteFile: string;
}

function startWorker(
  where: Where,
  holder: string,
  options: { accounts: string[]; leaseHours: number; waitMs: number },
): Worker {
  const args = { ...where, pool: "gh", holder, ...options };
  const child = spawn(
    process.execPath,
    ["--import=tsx", path.join(__dirname, "lease-worker.ts"), JSON.stringify(args)],
    {
      cwd: ROOT,
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

const event = (w: Worker, name: string) => w.lines.find((l) => l.event === name);

async function openStoreFor(where: Where): Promise<LeaseStore> {
  const store = await openLeaseStore(where);
  onCleanup(() => store.close());
  return store;
}

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
});
