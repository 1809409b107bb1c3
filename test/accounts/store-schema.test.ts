// One lease store under two older schemas, on both stores for real (a SQLite file, a PostgreSQL server started here):
// a database made by the warm pools' schema (member states and the claim queue, holders by name) or by the lease ids'
// schema (holder ids, no states) opens, twice, into the one schema with nothing of its leases lost: an account's old
// lease goes by its stack's legacy id, a claim made before still renews under its id, a keeper's work is still its
// own. And the store's one-row-per-holder-id index lets a keeper hold several members at once (each under an id of
// the member's own) while it refuses one id two rows.
import * as path from "node:path";
import Database from "better-sqlite3";
import { Client } from "pg";
import { afterEach, describe, expect, it } from "vitest";
import { legacyHolderId, openLeaseStore, type LeaseStore } from "../../src/accounts";
import { keeperHolder } from "../../src/runner/pools/claims";
import { startPostgres } from "../helpers/postgres";
import { cleanup, onCleanup, tempDir } from "../helpers/processes";

afterEach(cleanup);

/** A database of one store kind: its raw SQL (to make an old schema), and the store opened on it. */
interface Kind {
  exec(sql: string): Promise<void>;
  open(): Promise<LeaseStore>;
  /** The table's name in this kind (PostgreSQL's are prefixed). */
  t(table: string): string;
  /** A time `ms` from now, as this kind writes `until`. */
  at(ms: number): string;
}

function sqliteKind(): Kind {
  const file = path.join(tempDir("multienv-schema-"), "accounts.sqlite");
  return {
    exec: async (sql) => {
      const db = new Database(file);
      db.exec(sql);
      db.close();
    },
    open: () => openLeaseStore({ sqliteFile: file }),
    t: (table) => table,
    at: (ms) => String(Date.now() + ms),
  };
}

async function postgresKind(): Promise<Kind> {
  const server = await startPostgres();
  return {
    exec: async (sql) => {
      const client = new Client({ connectionString: server.url });
      await client.connect();
      await client.query(sql).finally(() => client.end());
    },
    open: () => openLeaseStore({ store: server.url, sqliteFile: "/nonexistent/unused.sqlite" }),
    t: (table) => `multienv_${table}`,
    at: (ms) => `now() + interval '${ms} milliseconds'`,
  };
}

/** The warm pools' schema, before holders had ids: one account per pool and holder name. */
function warmSchema(k: Kind, timestamp: string): string {
  return `
CREATE TABLE ${k.t("accounts")} (pool TEXT NOT NULL, name TEXT NOT NULL, held_by TEXT, since ${timestamp},
  until ${timestamp}, state TEXT, PRIMARY KEY (pool, name));
CREATE UNIQUE INDEX ${k.t("accounts_one_per_holder")} ON ${k.t("accounts")} (pool, held_by) WHERE held_by IS NOT NULL;
CREATE TABLE ${k.t("pools")} (pool TEXT PRIMARY KEY, next_sign_in ${timestamp} NOT NULL);
CREATE TABLE ${k.t("claim_queue")} (ticket ${timestamp === "INTEGER" ? "INTEGER PRIMARY KEY AUTOINCREMENT" : "BIGSERIAL PRIMARY KEY"},
  pool TEXT NOT NULL, holder TEXT NOT NULL, until ${timestamp} NOT NULL);
CREATE TABLE ${k.t("warm_pools")} (pool TEXT PRIMARY KEY, settings TEXT NOT NULL);
INSERT INTO ${k.t("accounts")} (pool, name, held_by, since, until, state) VALUES
  ('gh', 'acct-1', 'task-1', ${k.at(0)}, ${k.at(3_600_000)}, NULL),
  ('gh', 'acct-2', NULL, NULL, NULL, NULL),
  ('warm:t', 't-w1', 't.claim-one', ${k.at(0)}, ${k.at(3_600_000)}, 'claimed'),
  ('warm:t', 't-w2', 'resetting:t-w2:keeper-a', ${k.at(0)}, ${k.at(3_600_000)}, 'resetting'),
  ('warm:t', 't-w3', NULL, NULL, NULL, 'ready');`;
}

/** The lease ids' schema: holder ids, no member states, no claim queue. */
function leasesSchema(k: Kind, timestamp: string): string {
  return `
CREATE TABLE ${k.t("accounts")} (pool TEXT NOT NULL, name TEXT NOT NULL, held_by TEXT, holder_id TEXT,
  since ${timestamp}, until ${timestamp}, PRIMARY KEY (pool, name));
CREATE TABLE ${k.t("pools")} (pool TEXT PRIMARY KEY, next_sign_in ${timestamp} NOT NULL);
CREATE UNIQUE INDEX ${k.t("accounts_one_per_lease")} ON ${k.t("accounts")} (pool, holder_id) WHERE holder_id IS NOT NULL;
INSERT INTO ${k.t("accounts")} (pool, name, held_by, holder_id, since, until) VALUES
  ('gh', 'acct-1', 'task-1', 'lease-id-1', ${k.at(0)}, ${k.at(3_600_000)}),
  ('gh', 'acct-2', NULL, NULL, NULL, NULL);`;
}

/** Opens the store twice, as two upgraded processes would one after the other; the second store is the test's. */
async function openTwice(k: Kind): Promise<LeaseStore> {
  await (await k.open()).close();
  const store = await k.open();
  onCleanup(() => store.close());
  return store;
}

async function fromWarmSchema(k: Kind, timestamp: string): Promise<void> {
  await k.exec(warmSchema(k, timestamp));
  const store = await openTwice(k);

  // The account's lease goes by its stack's legacy id, so the stack asking under it keeps its account.
  const rows = await store.accounts("gh");
  expect(rows.find((r) => r.name === "acct-1")).toMatchObject({ heldBy: "task-1", holderId: legacyHolderId("task-1") });
  expect(await store.tryLease("gh", { id: legacyHolderId("task-1"), name: "task-1" }, 60_000)).toMatchObject({
    account: "acct-1",
    kept: true,
  });
  // Holders by name are gone: another lease of the same stack name gets the other account.
  expect(await store.tryLease("gh", { id: "lease-id-2", name: "task-1" }, 60_000)).toMatchObject({
    account: "acct-2",
    kept: false,
  });

  // The claim made before renews under its id (and only under it); the keeper's reset is still its own.
  expect((await store.accounts("warm:t")).find((r) => r.name === "t-w1")).toMatchObject({
    holderId: "t.claim-one",
    state: "claimed",
  });
  expect(await store.renew("warm:t", "t-w1", "t.claim-one", 120_000)).toMatchObject({ account: "t-w1", kept: true });
  expect(await store.renew("warm:t", "t-w1", legacyHolderId("t.claim-one"), 120_000)).toBeUndefined();
  expect(
    await store.moveMember(
      "warm:t",
      "t-w2",
      { state: "resetting", holder: "resetting:t-w2:keeper-a" },
      { state: "ready" },
    ),
  ).toBe(true);
  // A lease of the warm pool's name never takes a member, ready and free though it is.
  expect(await store.tryLease("warm:t", { id: "intruder", name: "intruder" }, 60_000)).toBeUndefined();
  expect((await store.accounts("warm:t")).filter((r) => r.holderId === "intruder")).toEqual([]);
}

async function fromLeasesSchema(k: Kind, timestamp: string): Promise<void> {
  await k.exec(leasesSchema(k, timestamp));
  const store = await openTwice(k);

  // The lease keeps its id; no state came with it.
  expect((await store.accounts("gh")).find((r) => r.name === "acct-1")).toMatchObject({
    heldBy: "task-1",
    holderId: "lease-id-1",
    state: null,
  });
  expect(await store.renew("gh", "acct-1", "lease-id-1", 60_000)).toMatchObject({ account: "acct-1", kept: true });
  // The warm pools' tables and column are there: a member is registered, claimed through the queue and renewed.
  await store.setMember("warm:t", "t-w1", "ready");
  const ticket = await store.enqueue("warm:t", "t.claim-two", 10_000);
  expect(await store.claim("warm:t", ticket, { id: "t.claim-two", name: "claim two" }, 60_000, 10_000)).toMatchObject({
    account: "t-w1",
  });
  expect(await store.renew("warm:t", "t-w1", "t.claim-two", 120_000)).toMatchObject({ account: "t-w1", kept: true });
  await store.setPoolSettings("warm:t", '{"size":1}');
  expect(await store.poolSettings("warm:t")).toBe('{"size":1}');
}

async function keeperHoldsSeveral(k: Kind): Promise<void> {
  const store = await openTwice(k);
  const pool = "warm:t";
  for (const name of ["t-w1", "t-w2", "t-w3"]) await store.setMember(pool, name, "claimed", `t.claim-${name}`, 1);
  await new Promise((done) => setTimeout(done, 20));
  // One keeper takes back every expired claim at once, each member under an id of its own.
  const taken = await store.takeExpired(pool, (name) => keeperHolder("resetting", name, "keeper-a"), 60_000);
  expect(taken.map((r) => r.name).sort()).toEqual(["t-w1", "t-w2", "t-w3"]);
  expect((await store.accounts(pool)).map((r) => [r.state, r.holderId])).toEqual([
    ["resetting", "resetting:t-w1:keeper-a"],
    ["resetting", "resetting:t-w2:keeper-a"],
    ["resetting", "resetting:t-w3:keeper-a"],
  ]);
  // The index those ids live with: one holder id never holds two rows of a pool.
  await store.setMember(pool, "t-w4", "deploying", "one-id", 60_000);
  await expect(store.setMember(pool, "t-w5", "deploying", "one-id", 60_000)).rejects.toThrow(/unique|UNIQUE/);
}

describe("the lease store's schema on SQLite", () => {
  it("a database of the warm pools' schema opens twice into the one schema, its leases and claims kept", async () => {
    await fromWarmSchema(sqliteKind(), "INTEGER");
  });

  it("a database of the lease ids' schema opens twice into the one schema and serves warm pools", async () => {
    await fromLeasesSchema(sqliteKind(), "INTEGER");
  });

  it("a keeper holds several members at once, each under its own holder id; one id is refused a second row", async () => {
    await keeperHoldsSeveral(sqliteKind());
  });
});

describe("the lease store's schema on PostgreSQL", () => {
  it("a database of the warm pools' schema opens twice into the one schema, its leases and claims kept", async () => {
    await fromWarmSchema(await postgresKind(), "TIMESTAMPTZ");
  }, 120_000);

  it("a database of the lease ids' schema opens twice into the one schema and serves warm pools", async () => {
    await fromLeasesSchema(await postgresKind(), "TIMESTAMPTZ");
  }, 120_000);

  it("a keeper holds several members at once, each under its own holder id; one id is refused a second row", async () => {
    await keeperHoldsSeveral(await postgresKind());
  }, 120_000);
});
