// The shared lease store: PostgreSQL, for stacks on many machines (`store: postgres://...`), through `pg` (the
// well-kept driver). A lease is atomic by single statements, each its own transaction:
//   - keeping: `UPDATE accounts SET until = ... WHERE pool = $1 AND held_by = $2 RETURNING ...` extends the
//     holder's lease under the row's lock;
//   - taking: `UPDATE accounts SET held_by = $2 ... WHERE pool = $1 AND name = (SELECT name ... WHERE free ...
//     LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING ...`. The sub-select locks the free row it picks and skips those
//     another transaction has locked; a row another transaction took and committed meanwhile is re-checked against
//     the WHERE on its newest version (READ COMMITTED's re-check of locked rows) and no longer free, so no two
//     transactions take one account;
//   - the unique index on (pool, held_by) refuses a second account to one holder whatever a caller does;
//   - a sign-in slot: `INSERT ... ON CONFLICT (pool) DO UPDATE SET next_sign_in = GREATEST(...) + interval`, under
//     the pool row's lock.
// The tables are created under a transaction-level advisory lock, so two first callers do not race on them.
import { Client } from "pg";
import type { AccountRow, Lease, LeaseStore } from "./store";

/** The advisory lock key the schema is created under (any constant of ours). */
const SCHEMA_LOCK = 0x6d756c74;

const SCHEMA = `
CREATE TABLE IF NOT EXISTS multienv_accounts (
  pool TEXT NOT NULL,
  name TEXT NOT NULL,
  held_by TEXT,
  since TIMESTAMPTZ,
  until TIMESTAMPTZ,
  PRIMARY KEY (pool, name)
);
CREATE UNIQUE INDEX IF NOT EXISTS multienv_accounts_one_per_holder
  ON multienv_accounts (pool, held_by) WHERE held_by IS NOT NULL;
CREATE TABLE IF NOT EXISTS multienv_pools (
  pool TEXT PRIMARY KEY,
  next_sign_in TIMESTAMPTZ NOT NULL
);`;

interface Row {
  name: string;
  held_by: string | null;
  since: Date | null;
  until: Date | null;
}

export class PostgresLeaseStore implements LeaseStore {
  private constructor(private readonly client: Client) {}

  /** Connects to `url` and creates the store's tables when the database has none. */
  static async open(url: string): Promise<PostgresLeaseStore> {
    const client = new Client({ connectionString: url });
    await client.connect();
    try {
      await client.query("BEGIN");
      await client.query("SELECT pg_advisory_xact_lock($1)", [SCHEMA_LOCK]);
      await client.query(SCHEMA);
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
      "DELETE FROM multienv_accounts WHERE pool = $1 AND NOT (name = ANY($2::text[])) AND (held_by IS NULL OR until < now())",
      [pool, accounts],
    );
  }

  async tryLease(pool: string, holder: string, leaseMs: number): Promise<Lease | undefined> {
    const kept = await this.client.query<Row>(
      `UPDATE multienv_accounts SET until = now() + $3 * interval '1 millisecond'
        WHERE pool = $1 AND held_by = $2 RETURNING name, since, until`,
      [pool, holder, leaseMs],
    );
    if (kept.rows.length > 0) return leaseOf(kept.rows[0], true);
    const taken = await this.client.query<Row>(
      `UPDATE multienv_accounts SET held_by = $2, since = now(), until = now() + $3 * interval '1 millisecond'
        WHERE pool = $1 AND name = (
          SELECT name FROM multienv_accounts
           WHERE pool = $1 AND (held_by IS NULL OR until < now())
           ORDER BY held_by IS NOT NULL, name
           LIMIT 1 FOR UPDATE SKIP LOCKED)
        RETURNING name, since, until`,
      [pool, holder, leaseMs],
    );
    return taken.rows.length > 0 ? leaseOf(taken.rows[0], false) : undefined;
  }

  async release(pool: string, account: string, holder?: string): Promise<string | undefined> {
    const freed = await this.client.query<{ held_by: string }>(
      `WITH old AS (
         SELECT pool, name, held_by FROM multienv_accounts
          WHERE pool = $1 AND name = $2 AND held_by IS NOT NULL AND ($3::text IS NULL OR held_by = $3)
          FOR UPDATE)
       UPDATE multienv_accounts a SET held_by = NULL, since = NULL, until = NULL
         FROM old WHERE a.pool = old.pool AND a.name = old.name
       RETURNING old.held_by`,
      [pool, account, holder ?? null],
    );
    return freed.rows[0]?.held_by;
  }

  async accounts(pool: string): Promise<AccountRow[]> {
    const rows = await this.client.query<Row>(
      "SELECT name, held_by, since, until FROM multienv_accounts WHERE pool = $1 ORDER BY name",
      [pool],
    );
    return rows.rows.map((r) => ({ name: r.name, heldBy: r.held_by, since: r.since, until: r.until }));
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

  async close(): Promise<void> {
    await this.client.end();
  }
}

function leaseOf(row: Row, kept: boolean): Lease {
  return { account: row.name, since: row.since!, until: row.until!, kept };
}
