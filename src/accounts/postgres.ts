// The shared lease store: PostgreSQL, for stacks on many machines (`store: postgres://...`), through `pg` (the
// well-kept driver). A lease is atomic by single statements, each its own transaction:
//   - keeping: `UPDATE accounts SET until = ... WHERE pool = $1 AND holder_id = $2 RETURNING ...` extends the
//     holder's lease under the row's lock (renewing one account is the same, `AND name = $3`);
//   - taking: `UPDATE accounts SET holder_id = $2 ... WHERE pool = $1 AND name = (SELECT name ... WHERE free ...
//     LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING ...`. The sub-select locks the free row it picks and skips those
//     another transaction has locked; a row another transaction took and committed meanwhile is re-checked against
//     the WHERE on its newest version (READ COMMITTED's re-check of locked rows) and no longer free, so no two
//     transactions take one account;
//   - the unique index on (pool, holder_id) refuses a second account to one holder whatever a caller does;
//   - a claim of a warm pool's member: one transaction under the pool's advisory lock (pg_advisory_xact_lock of the
//     pool's name), so the queue's order and the ready members are read and written by one claimer at a time; this
//     client's transactions are run one after another (`serially`), since they share its connection;
//   - a sign-in slot: `INSERT ... ON CONFLICT (pool) DO UPDATE SET next_sign_in = GREATEST(...) + interval`, under
//     the pool row's lock.
// The tables are created (and a database made before holders had ids migrated) under a transaction-level advisory
// lock, so two first callers do not race on them.
import { Client } from "pg";
import { LEGACY_PREFIX, type AccountRow, type Holder, type Lease, type LeaseStore, type MemberState } from "./store";

/** The advisory lock key the schema is created under (any constant of ours). */
const SCHEMA_LOCK = 0x6d756c74;

const SCHEMA = `
CREATE TABLE IF NOT EXISTS multienv_accounts (
  pool TEXT NOT NULL,
  name TEXT NOT NULL,
  held_by TEXT,
  holder_id TEXT,
  since TIMESTAMPTZ,
  until TIMESTAMPTZ,
  PRIMARY KEY (pool, name)
);
CREATE TABLE IF NOT EXISTS multienv_pools (
  pool TEXT PRIMARY KEY,
  next_sign_in TIMESTAMPTZ NOT NULL
);
ALTER TABLE multienv_accounts ADD COLUMN IF NOT EXISTS state TEXT;
CREATE TABLE IF NOT EXISTS multienv_claim_queue (
  ticket BIGSERIAL PRIMARY KEY,
  pool TEXT NOT NULL,
  holder TEXT NOT NULL,
  until TIMESTAMPTZ NOT NULL
);
CREATE TABLE IF NOT EXISTS multienv_warm_pools (
  pool TEXT PRIMARY KEY,
  settings TEXT NOT NULL
);`;

/**
 * A database made before holders had ids of their own (run after SCHEMA, so the state column is there): an account's
 * live lease gets its stack's legacy id; a warm pool member's holder (a claim's id, a keeper's per-member holder) was
 * an id of its own already and stays it. The one-account-per-holder index is on the id, not the name (two holders may
 * share a name).
 */
const MIGRATE_HOLDER_ID = `
ALTER TABLE multienv_accounts ADD COLUMN holder_id TEXT;
UPDATE multienv_accounts SET holder_id = CASE WHEN state IS NULL THEN '${LEGACY_PREFIX}' || held_by ELSE held_by END
 WHERE held_by IS NOT NULL;
DROP INDEX IF EXISTS multienv_accounts_one_per_holder;`;

const HOLDER_INDEX = `
CREATE UNIQUE INDEX IF NOT EXISTS multienv_accounts_one_per_lease
  ON multienv_accounts (pool, holder_id) WHERE holder_id IS NOT NULL;`;

interface Row {
  name: string;
  held_by: string | null;
  holder_id: string | null;
  since: Date | null;
  until: Date | null;
  state: MemberState | null;
}

export class PostgresLeaseStore implements LeaseStore {
  private constructor(private readonly client: Client) {}

  /** The end of the last transaction begun on this client: the next one waits for it. */
  private last: Promise<unknown> = Promise.resolve();

  /** `fn` in one transaction of its own, after this client's earlier ones; rolled back when it throws. */
  private serially<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.last.then(async () => {
      await this.client.query("BEGIN");
      try {
        const result = await fn();
        await this.client.query("COMMIT");
        return result;
      } catch (error) {
        await this.client.query("ROLLBACK").catch(() => undefined);
        throw error;
      }
    });
    this.last = run.catch(() => undefined);
    return run;
  }

  /** Connects to `url` and creates the store's tables when the database has none. */
  static async open(url: string): Promise<PostgresLeaseStore> {
    const client = new Client({ connectionString: url });
    await client.connect();
    try {
      await client.query("BEGIN");
      await client.query("SELECT pg_advisory_xact_lock($1)", [SCHEMA_LOCK]);
      await client.query(SCHEMA);
      const migrated = await client.query(
        "SELECT 1 FROM pg_attribute WHERE attrelid = 'multienv_accounts'::regclass AND attname = 'holder_id' AND NOT attisdropped",
      );
      if (migrated.rows.length === 0) await client.query(MIGRATE_HOLDER_ID);
      await client.query(HOLDER_INDEX);
      await client.query("COMMIT");
    } catch (error) {
      await client.end().catch(() => undefined);
      throw error;
    }
    return new PostgresLeaseStore(client);
  }

  async syncPool(pool: string, accounts: readonly string[]): Promise<void> {
    await this.client.query(
      "INSERT INTO multienv_accounts (pool, name) SELECT $1, unnest($2::text[]) ON CONFLICT DO NOTHING",
      [pool, accounts],
    );
    await this.client.query(
      "DELETE FROM multienv_accounts WHERE pool = $1 AND NOT (name = ANY($2::text[])) AND (holder_id IS NULL OR until < now())",
      [pool, accounts],
    );
  }

  async tryLease(pool: string, holder: Holder, leaseMs: number): Promise<Lease | undefined> {
    const kept = await this.client.query<Row>(
      `UPDATE multienv_accounts SET until = now() + $3 * interval '1 millisecond'
        WHERE pool = $1 AND holder_id = $2 AND state IS NULL RETURNING name, since, until`,
      [pool, holder.id, leaseMs],
    );
    if (kept.rows.length > 0) return leaseOf(kept.rows[0], true);
    const taken = await this.client.query<Row>(
      `UPDATE multienv_accounts
          SET held_by = $2, holder_id = $3, since = now(), until = now() + $4 * interval '1 millisecond'
        WHERE pool = $1 AND name = (
          SELECT name FROM multienv_accounts
           WHERE pool = $1 AND state IS NULL AND (holder_id IS NULL OR until < now())
           ORDER BY holder_id IS NOT NULL, name
           LIMIT 1 FOR UPDATE SKIP LOCKED)
        RETURNING name, since, until`,
      [pool, holder.name, holder.id, leaseMs],
    );
    return taken.rows.length > 0 ? leaseOf(taken.rows[0], false) : undefined;
  }

  async renew(pool: string, account: string, holderId: string, leaseMs: number): Promise<Lease | undefined> {
    const renewed = await this.client.query<Row>(
      `UPDATE multienv_accounts SET until = now() + $4 * interval '1 millisecond'
        WHERE pool = $1 AND name = $2 AND holder_id = $3 RETURNING name, since, until`,
      [pool, account, holderId, leaseMs],
    );
    return renewed.rows.length > 0 ? leaseOf(renewed.rows[0], true) : undefined;
  }

  async release(pool: string, account: string, holderId?: string): Promise<string | undefined> {
    const freed = await this.client.query<{ held_by: string | null; holder_id: string }>(
      `WITH old AS (
         SELECT pool, name, held_by, holder_id FROM multienv_accounts
          WHERE pool = $1 AND name = $2 AND holder_id IS NOT NULL AND ($3::text IS NULL OR holder_id = $3)
          FOR UPDATE)
       UPDATE multienv_accounts a SET held_by = NULL, holder_id = NULL, since = NULL, until = NULL
         FROM old WHERE a.pool = old.pool AND a.name = old.name
       RETURNING old.held_by, old.holder_id`,
      [pool, account, holderId ?? null],
    );
    const row = freed.rows[0];
    return row === undefined ? undefined : (row.held_by ?? row.holder_id);
  }

  async accounts(pool: string): Promise<AccountRow[]> {
    const rows = await this.client.query<Row>(
      "SELECT name, held_by, holder_id, since, until, state FROM multienv_accounts WHERE pool = $1 ORDER BY name",
      [pool],
    );
    return rows.rows.map(accountRow);
  }

  async reserveSignIn(pool: string, intervalMs: number): Promise<number> {
    const slot = await this.client.query<{ wait_ms: string }>(
      `INSERT INTO multienv_pools AS p (pool, next_sign_in) VALUES ($1, clock_timestamp() + $2 * interval '1 millisecond')
       ON CONFLICT (pool) DO UPDATE
         SET next_sign_in = GREATEST(p.next_sign_in, clock_timestamp()) + $2 * interval '1 millisecond'
       RETURNING GREATEST(0, EXTRACT(EPOCH FROM (p.next_sign_in - clock_timestamp())) * 1000 - $2) AS wait_ms`,
      [pool, intervalMs],
    );
    return Math.ceil(Number(slot.rows[0].wait_ms));
  }

  async setMember(
    pool: string,
    name: string,
    state: MemberState | undefined,
    holder?: string,
    leaseMs = 0,
  ): Promise<void> {
    if (state === undefined) {
      await this.client.query("DELETE FROM multienv_accounts WHERE pool = $1 AND name = $2", [pool, name]);
      return;
    }
    await this.client.query(
      `INSERT INTO multienv_accounts AS a (pool, name, held_by, holder_id, since, until, state)
       VALUES ($1, $2, $3::text, $3::text, CASE WHEN $3::text IS NULL THEN NULL ELSE now() END,
               CASE WHEN $3::text IS NULL THEN NULL ELSE now() + $4 * interval '1 millisecond' END, $5)
       ON CONFLICT (pool, name) DO UPDATE SET held_by = excluded.held_by, holder_id = excluded.holder_id,
         since = excluded.since, until = excluded.until, state = excluded.state`,
      [pool, name, holder ?? null, leaseMs, state],
    );
  }

  async moveMember(
    pool: string,
    name: string,
    from: { state: MemberState; holder: string | null },
    to: { state: MemberState; holder?: string; leaseMs?: number },
  ): Promise<boolean> {
    const moved = await this.client.query(
      `UPDATE multienv_accounts SET state = $5, held_by = $6::text, holder_id = $6::text,
         since = CASE WHEN $6::text IS NULL THEN NULL ELSE now() END,
         until = CASE WHEN $6::text IS NULL THEN NULL ELSE now() + $7 * interval '1 millisecond' END
        WHERE pool = $1 AND name = $2 AND state = $3 AND holder_id IS NOT DISTINCT FROM $4::text`,
      [pool, name, from.state, from.holder, to.state, to.holder ?? null, to.leaseMs ?? 0],
    );
    return moved.rowCount === 1;
  }

  async takeExpired(pool: string, holderOf: (name: string) => string, leaseMs: number): Promise<AccountRow[]> {
    const expired = await this.client.query<Row>(
      `SELECT name, held_by, holder_id, since, until, state FROM multienv_accounts
        WHERE pool = $1 AND state IS NOT NULL AND holder_id IS NOT NULL AND until < now()`,
      [pool],
    );
    const taken: AccountRow[] = [];
    for (const row of expired.rows) {
      const { name } = row;
      // Each row's take re-checks its expiry on the row's newest version: of two keepers, one takes it.
      const moved = await this.client.query(
        `UPDATE multienv_accounts SET state = 'resetting', held_by = $3, holder_id = $3, since = now(),
           until = now() + $4 * interval '1 millisecond'
          WHERE pool = $1 AND name = $2 AND state IS NOT NULL AND holder_id IS NOT NULL AND until < now()`,
        [pool, name, holderOf(name), leaseMs],
      );
      if (moved.rowCount === 1) taken.push(accountRow(row));
    }
    return taken;
  }

  async enqueue(pool: string, holder: string, leaseMs: number): Promise<number> {
    const row = await this.client.query<{ ticket: string }>(
      `INSERT INTO multienv_claim_queue (pool, holder, until) VALUES ($1, $2, now() + $3 * interval '1 millisecond')
       RETURNING ticket`,
      [pool, holder, leaseMs],
    );
    return Number(row.rows[0].ticket);
  }

  async claim(
    pool: string,
    ticket: number,
    holder: Holder,
    leaseMs: number,
    queueMs: number,
  ): Promise<Lease | undefined> {
    return this.serially(async () => {
      await this.client.query("SELECT pg_advisory_xact_lock(hashtext($1))", [`multienv claim ${pool}`]);
      await this.client.query("DELETE FROM multienv_claim_queue WHERE pool = $1 AND until < now()", [pool]);
      // A ticket that lapsed (its claimer slow to ask again) keeps its number, so its place.
      await this.client.query(
        `INSERT INTO multienv_claim_queue (ticket, pool, holder, until)
         VALUES ($1, $2, $3, now() + $4 * interval '1 millisecond')
         ON CONFLICT (ticket) DO UPDATE SET until = excluded.until`,
        [ticket, pool, holder.name, queueMs],
      );
      const ahead = await this.client.query<{ n: string }>(
        "SELECT count(*) AS n FROM multienv_claim_queue WHERE pool = $1 AND ticket < $2",
        [pool, ticket],
      );
      const ready = await this.client.query<{ name: string }>(
        "SELECT name FROM multienv_accounts WHERE pool = $1 AND state = 'ready' AND holder_id IS NULL ORDER BY name",
        [pool],
      );
      if (Number(ahead.rows[0].n) >= ready.rows.length) return undefined;
      const taken = await this.client.query<Row>(
        `UPDATE multienv_accounts SET state = 'claimed', held_by = $5, holder_id = $3, since = now(),
           until = now() + $4 * interval '1 millisecond'
          WHERE pool = $1 AND name = $2 RETURNING name, since, until`,
        [pool, ready.rows[0].name, holder.id, leaseMs, holder.name],
      );
      await this.client.query("DELETE FROM multienv_claim_queue WHERE ticket = $1", [ticket]);
      return leaseOf(taken.rows[0], false);
    });
  }

  async leaveQueue(pool: string, ticket: number): Promise<void> {
    await this.client.query("DELETE FROM multienv_claim_queue WHERE pool = $1 AND ticket = $2", [pool, ticket]);
  }

  async queueLength(pool: string): Promise<number> {
    const row = await this.client.query<{ n: string }>(
      "SELECT count(*) AS n FROM multienv_claim_queue WHERE pool = $1 AND until >= now()",
      [pool],
    );
    return Number(row.rows[0].n);
  }

  async poolSettings(pool: string): Promise<string | undefined> {
    const row = await this.client.query<{ settings: string }>(
      "SELECT settings FROM multienv_warm_pools WHERE pool = $1",
      [pool],
    );
    return row.rows[0]?.settings;
  }

  async setPoolSettings(pool: string, settings: string): Promise<void> {
    await this.client.query(
      `INSERT INTO multienv_warm_pools (pool, settings) VALUES ($1, $2)
       ON CONFLICT (pool) DO UPDATE SET settings = excluded.settings`,
      [pool, settings],
    );
  }

  async poolsWithSettings(prefix: string): Promise<string[]> {
    const rows = await this.client.query<{ pool: string }>("SELECT pool FROM multienv_warm_pools ORDER BY pool");
    return rows.rows.map((r) => r.pool).filter((pool) => pool.startsWith(prefix));
  }

  async close(): Promise<void> {
    await this.client.end();
  }
}

function accountRow(r: Row): AccountRow {
  return {
    name: r.name,
    heldBy: r.held_by,
    holderId: r.holder_id,
    since: r.since,
    until: r.until,
    state: r.state ?? null,
  };
}

function leaseOf(row: Row, kept: boolean): Lease {
  return { account: row.name, since: row.since!, until: row.until!, kept };
}
