// Where a pool's leases are kept: the pool's `store` (a PostgreSQL URL) when it names one, else the machine's own
// SQLite file. The file is found by one rule, from the environment alone (never the project directory or the state's
// backend), so every path to a lease finds the same one: the runner's CLI, the Automation API library, a plain
// `pulumi up` whose backend came from `pulumi login`, and `multienv accounts`, from any checkout of the machine.
import { join } from "node:path";
import { machineCacheDir } from "../machine-cache";
import { PostgresLeaseStore } from "./postgres";
import { SqliteLeaseStore } from "./sqlite";
import type { LeaseStore } from "./store";

/** The embedded store's file name, in the machine's folder. */
export const ACCOUNTS_DB_FILE = "accounts.sqlite";

/** Does `store` name a PostgreSQL database (`postgres://` or `postgresql://`)? */
export function isPostgresUrl(store: string): boolean {
  return /^postgres(ql)?:\/\//.test(store);
}

/**
 * The machine's embedded store: `accounts.sqlite` in the machine's folder (src/machine-cache.ts: MULTIENV_CACHE, else
 * $XDG_CACHE_HOME/multienv, else ~/.cache/multienv), one per machine and not per checkout or state, since two stacks
 * of the machine must never lease one account whichever checkout or backend deploys them.
 */
export function accountsDbFile(env: NodeJS.ProcessEnv = process.env): string {
  return join(machineCacheDir(env), ACCOUNTS_DB_FILE);
}

/**
 * `url` with `password` as its password (percent-encoded, as the pg driver decodes it): a pool's store URL written
 * without one, completed from the pool's secret (`storePassword`). A URL that has one keeps it.
 */
export function withStorePassword(url: string, password: string | undefined): string {
  if (password === undefined || password === "") return url;
  const parsed = new URL(url);
  if (parsed.password !== "") return url;
  parsed.password = encodeURIComponent(password);
  return parsed.toString();
}

/** Where the pool's leases are: its `store`, or the embedded file. */
export interface StoreLocation {
  /**
   * The pool's `store` setting (a PostgreSQL URL), when it has one. Without a password in it, the pg driver takes one
   * from PGPASSWORD or ~/.pgpass (PGPASSFILE) of the process that opens it, as libpq does.
   */
  store?: string;
  /** The embedded store's file otherwise (`accountsDbFile`). */
  sqliteFile: string;
}

/** Opens the store a pool's leases are kept in. */
export async function openLeaseStore(location: StoreLocation): Promise<LeaseStore> {
  if (location.store !== undefined && location.store !== "") {
    if (!isPostgresUrl(location.store))
      // Not the URL itself: it may hold a password.
      throw new Error("the pool's store is not a PostgreSQL URL; write postgres://user@host:port/database");
    return PostgresLeaseStore.open(location.store);
  }
  return new SqliteLeaseStore(location.sqliteFile);
}
