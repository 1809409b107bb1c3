// The embedded lease store: one SQLite database file per machine (location.ts), shared by every stack, checkout and
// process of this machine. better-sqlite3 (a well-kept driver) rather than a lock file of our own: SQLite's own
// locking makes each `BEGIN IMMEDIATE` transaction the database's only writer, so the read of the free accounts and
// the write of the lease cannot interleave with another process's; WAL lets readers (`multienv accounts`) run beside
// a writer, and busy_timeout makes a writer wait its turn rather than fail.
import { mkdirSync } from "node:fs";
import { dirname } from "node:path";
import Database from "better-sqlite3";
import { LEGACY_PREFIX, type AccountRow, type Holder, type Lease, type LeaseStore, type MemberState } from "./store";

/** How long a transaction waits for another process's to end before SQLite gives up (SQLITE_BUSY). */
const BUSY_TIMEOUT_MS = 30_000;

const SCHEMA = `
CREATE TABLE IF NOT EXISTS accounts (
  pool TEXT NOT NULL,
  name TEXT NOT NULL,
  held_by TEXT,
  holder_id TEXT,
  since INTEGER,
  until INTEGER,
  PRIMARY KEY (pool, name)
);
CREATE TABLE IF NOT EXISTS pools (
  pool TEXT PRIMARY KEY,
  next_sign_in INTEGER NOT NULL
);
-- Warm pools: each claim's place in its pool's queue, and each pool's settings.
CREATE TABLE IF NOT EXISTS claim_queue (
  ticket INTEGER PRIMARY KEY AUTOINCREMENT,
  pool TEXT NOT NULL,
  holder TEXT NOT NULL,
  until INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS warm_pools (
  pool TEXT PRIMARY KEY,
  settings TEXT NOT NULL
);`;

/** Columns added after the first release, each added to a database made before it (SQLite has no ADD IF NOT EXISTS). */
const ADDED_COLUMNS: { table: string; column: string; type: string }[] = [
  { table: "accounts", column: "state", type: "TEXT" },
];

/**
 * Brings a database made before holders had ids of their own in line (in the open's transaction, so two processes
 * opening it at once migrate it once, after the state column is there): an account's live lease gets its stack's
 * legacy id; a warm pool member's holder (a claim's id, a keeper's per-member holder) was an id of its own already and
 * stays it, so a claim made before still renews and a keeper's work is still its own. The one-account-per-holder
 * index is on the id, not the name (two holders may share a name).
 */
const MIGRATE_HOLDER_ID = `
ALTER TABLE accounts ADD COLUMN holder_id TEXT;
UPDATE accounts SET holder_id = CASE WHEN state IS NULL THEN '${LEGACY_PREFIX}' || held_by ELSE held_by END
 WHERE held_by IS NOT NULL;`;

const HOLDER_INDEX = `
DROP INDEX IF EXISTS accounts_one_per_holder;
-- One account per holder and pool, whatever a caller does.
CREATE UNIQUE INDEX IF NOT EXISTS accounts_one_per_lease ON accounts (pool, holder_id) WHERE holder_id IS NOT NULL;`;

interface Row {
  name: string;
  held_by: string | null;
  holder_id: string | null;
  since: number | null;
  until: number | null;
  state: MemberState | null;
}

const toDate = (ms: number | null) => (ms === null ? null : new Date(ms));

const accountRow = (r: Row): AccountRow => ({
  name: r.name,
  heldBy: r.held_by,
  holderId: r.holder_id,
  since: toDate(r.since),
  until: toDate(r.until),
  state: r.state,
});

export class SqliteLeaseStore implements LeaseStore {
  private readonly db: Database.Database;

  constructor(readonly file: string) {
    mkdirSync(dirname(file), { recursive: true });
    this.db = new Database(file);
    this.db.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`);
    this.db.pragma("journal_mode = WAL");
    this.immediate(() => {
      this.db.exec(SCHEMA);
      const columnsOf = (table: string) =>
        (this.db.prepare("SELECT name FROM pragma_table_info(?)").all(table) as { name: string }[]).map((c) => c.name);
      for (const { table, column, type } of ADDED_COLUMNS)
        if (!columnsOf(table).includes(column)) this.db.exec(`ALTER TABLE ${table} ADD COLUMN ${column} ${type}`);
      if (!columnsOf("accounts").includes("holder_id")) this.db.exec(MIGRATE_HOLDER_ID);
      this.db.exec(HOLDER_INDEX);
    });
  }

  /** `fn` in one `BEGIN IMMEDIATE` transaction: the write lock is taken before the first read. */
  private immediate<T>(fn: () => T): T {
    return this.db.transaction(fn).immediate();
  }

  async syncPool(pool: string, accounts: readonly string[]): Promise<void> {
    const insert = this.db.prepare("INSERT OR IGNORE INTO accounts (pool, name) VALUES (?, ?)");
    const rows = this.db.prepare("SELECT name, holder_id, until FROM accounts WHERE pool = ?");
    const remove = this.db.prepare("DELETE FROM accounts WHERE pool = ? AND name = ?");
    const wanted = new Set(accounts);
    this.immediate(() => {
      for (const name of accounts) insert.run(pool, name);
      const now = Date.now();
      for (const row of rows.all(pool) as Row[]) {
        const held = row.holder_id !== null && (row.until ?? 0) >= now;
        if (!wanted.has(row.name) && !held) remove.run(pool, row.name);
      }
    });
  }

  async tryLease(pool: string, holder: Holder, leaseMs: number): Promise<Lease | undefined> {
    const held = this.db.prepare(
      "SELECT name, since FROM accounts WHERE pool = ? AND holder_id = ? AND state IS NULL ORDER BY name LIMIT 1",
    );
    const extend = this.db.prepare("UPDATE accounts SET until = ? WHERE pool = ? AND name = ?");
    const free = this.db.prepare(
      "SELECT name FROM accounts WHERE pool = ? AND state IS NULL AND (holder_id IS NULL OR until < ?) ORDER BY holder_id IS NOT NULL, name LIMIT 1",
    );
    const take = this.db.prepare(
      "UPDATE accounts SET held_by = ?, holder_id = ?, since = ?, until = ? WHERE pool = ? AND name = ?",
    );
    return this.immediate(() => {
      const now = Date.now();
      const until = now + leaseMs;
      const mine = held.get(pool, holder.id) as { name: string; since: number } | undefined;
      if (mine !== undefined) {
        extend.run(until, pool, mine.name);
        return { account: mine.name, since: new Date(mine.since), until: new Date(until), kept: true };
      }
      const chosen = free.get(pool, now) as { name: string } | undefined;
      if (chosen === undefined) return undefined;
      take.run(holder.name, holder.id, now, until, pool, chosen.name);
      return { account: chosen.name, since: new Date(now), until: new Date(until), kept: false };
    });
  }

  async renew(pool: string, account: string, holderId: string, leaseMs: number): Promise<Lease | undefined> {
    const held = this.db.prepare("SELECT since FROM accounts WHERE pool = ? AND name = ? AND holder_id = ?");
    const extend = this.db.prepare("UPDATE accounts SET until = ? WHERE pool = ? AND name = ?");
    return this.immediate(() => {
      const row = held.get(pool, account, holderId) as { since: number } | undefined;
      if (row === undefined) return undefined;
      const until = Date.now() + leaseMs;
      extend.run(until, pool, account);
      return { account, since: new Date(row.since), until: new Date(until), kept: true };
    });
  }

  async release(pool: string, account: string, holderId?: string): Promise<string | undefined> {
    const get = this.db.prepare("SELECT held_by, holder_id FROM accounts WHERE pool = ? AND name = ?");
    const free = this.db.prepare(
      "UPDATE accounts SET held_by = NULL, holder_id = NULL, since = NULL, until = NULL WHERE pool = ? AND name = ?",
    );
    return this.immediate(() => {
      const row = get.get(pool, account) as Pick<Row, "held_by" | "holder_id"> | undefined;
      if (row?.holder_id == null || (holderId !== undefined && row.holder_id !== holderId)) return undefined;
      free.run(pool, account);
      return row.held_by ?? row.holder_id;
    });
  }

  async accounts(pool: string): Promise<AccountRow[]> {
    const rows = this.db
      .prepare("SELECT name, held_by, holder_id, since, until, state FROM accounts WHERE pool = ? ORDER BY name")
      .all(pool) as Row[];
    return rows.map(accountRow);
  }

  async reserveSignIn(pool: string, intervalMs: number): Promise<number> {
    const get = this.db.prepare("SELECT next_sign_in FROM pools WHERE pool = ?");
    const put = this.db.prepare(
      "INSERT INTO pools (pool, next_sign_in) VALUES (?, ?) ON CONFLICT (pool) DO UPDATE SET next_sign_in = excluded.next_sign_in",
    );
    return this.immediate(() => {
      const now = Date.now();
      const next = (get.get(pool) as { next_sign_in: number } | undefined)?.next_sign_in ?? now;
      const slot = Math.max(now, next);
      put.run(pool, slot + intervalMs);
      return slot - now;
    });
  }

  async setMember(
    pool: string,
    name: string,
    state: MemberState | undefined,
    holder?: string,
    leaseMs = 0,
  ): Promise<void> {
    if (state === undefined) {
      this.db.prepare("DELETE FROM accounts WHERE pool = ? AND name = ?").run(pool, name);
      return;
    }
    const now = Date.now();
    this.db
      .prepare(
        `INSERT INTO accounts (pool, name, held_by, holder_id, since, until, state) VALUES (?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (pool, name) DO UPDATE SET held_by = excluded.held_by, holder_id = excluded.holder_id,
           since = excluded.since, until = excluded.until, state = excluded.state`,
      )
      .run(pool, name, holder ?? null, holder ?? null, holder ? now : null, holder ? now + leaseMs : null, state);
  }

  async moveMember(
    pool: string,
    name: string,
    from: { state: MemberState; holder: string | null },
    to: { state: MemberState; holder?: string; leaseMs?: number },
  ): Promise<boolean> {
    const now = Date.now();
    const holder = to.holder ?? null;
    const moved = this.db
      .prepare(
        `UPDATE accounts SET state = ?, held_by = ?, holder_id = ?, since = ?, until = ?
          WHERE pool = ? AND name = ? AND state = ? AND holder_id IS ?`,
      )
      .run(
        to.state,
        holder,
        holder,
        holder ? now : null,
        holder ? now + (to.leaseMs ?? 0) : null,
        pool,
        name,
        from.state,
        from.holder,
      );
    return moved.changes === 1;
  }

  async takeExpired(pool: string, holderOf: (name: string) => string, leaseMs: number): Promise<AccountRow[]> {
    const expired = this.db.prepare(
      "SELECT name, held_by, holder_id, since, until, state FROM accounts WHERE pool = ? AND state IS NOT NULL AND holder_id IS NOT NULL AND until < ?",
    );
    const take = this.db.prepare(
      "UPDATE accounts SET state = 'resetting', held_by = ?, holder_id = ?, since = ?, until = ? WHERE pool = ? AND name = ?",
    );
    return this.immediate(() => {
      const now = Date.now();
      const rows = expired.all(pool, now) as Row[];
      for (const row of rows) {
        const holder = holderOf(row.name);
        take.run(holder, holder, now, now + leaseMs, pool, row.name);
      }
      return rows.map(accountRow);
    });
  }

  async enqueue(pool: string, holder: string, leaseMs: number): Promise<number> {
    const taken = this.db
      .prepare("INSERT INTO claim_queue (pool, holder, until) VALUES (?, ?, ?)")
      .run(pool, holder, Date.now() + leaseMs);
    return Number(taken.lastInsertRowid);
  }

  async claim(
    pool: string,
    ticket: number,
    holder: Holder,
    leaseMs: number,
    queueMs: number,
  ): Promise<Lease | undefined> {
    const drop = this.db.prepare("DELETE FROM claim_queue WHERE pool = ? AND until < ?");
    const keep = this.db.prepare(
      "INSERT INTO claim_queue (ticket, pool, holder, until) VALUES (?, ?, ?, ?) ON CONFLICT (ticket) DO UPDATE SET until = excluded.until",
    );
    const ahead = this.db.prepare("SELECT count(*) AS n FROM claim_queue WHERE pool = ? AND ticket < ?");
    const ready = this.db.prepare(
      "SELECT name FROM accounts WHERE pool = ? AND state = 'ready' AND holder_id IS NULL ORDER BY name",
    );
    const take = this.db.prepare(
      "UPDATE accounts SET state = 'claimed', held_by = ?, holder_id = ?, since = ?, until = ? WHERE pool = ? AND name = ?",
    );
    const done = this.db.prepare("DELETE FROM claim_queue WHERE ticket = ?");
    return this.immediate(() => {
      const now = Date.now();
      drop.run(pool, now);
      // A ticket that lapsed (its claimer slow to ask again) keeps its number, so its place.
      keep.run(ticket, pool, holder.name, now + queueMs);
      const before = (ahead.get(pool, ticket) as { n: number }).n;
      const free = ready.all(pool) as { name: string }[];
      if (before >= free.length) return undefined;
      const chosen = free[0].name;
      take.run(holder.name, holder.id, now, now + leaseMs, pool, chosen);
      done.run(ticket);
      return { account: chosen, since: new Date(now), until: new Date(now + leaseMs), kept: false };
    });
  }

  async leaveQueue(pool: string, ticket: number): Promise<void> {
    this.db.prepare("DELETE FROM claim_queue WHERE pool = ? AND ticket = ?").run(pool, ticket);
  }

  async queueLength(pool: string): Promise<number> {
    const row = this.db
      .prepare("SELECT count(*) AS n FROM claim_queue WHERE pool = ? AND until >= ?")
      .get(pool, Date.now()) as { n: number };
    return row.n;
  }

  async poolSettings(pool: string): Promise<string | undefined> {
    const row = this.db.prepare("SELECT settings FROM warm_pools WHERE pool = ?").get(pool) as
      { settings: string } | undefined;
    return row?.settings;
  }

  async setPoolSettings(pool: string, settings: string): Promise<void> {
    this.db
      .prepare(
        "INSERT INTO warm_pools (pool, settings) VALUES (?, ?) ON CONFLICT (pool) DO UPDATE SET settings = excluded.settings",
      )
      .run(pool, settings);
  }

  async poolsWithSettings(prefix: string): Promise<string[]> {
    const rows = this.db.prepare("SELECT pool FROM warm_pools ORDER BY pool").all() as { pool: string }[];
    return rows.map((r) => r.pool).filter((pool) => pool.startsWith(prefix));
  }

  async close(): Promise<void> {
    this.db.close();
  }
}
