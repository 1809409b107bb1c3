// Where a pool's leases are kept: the pool's `store` (a PostgreSQL URL) when it names one, else the embedded SQLite
// database with the project's local state, which the runner, the program and `multienv accounts` all find the same
// way from the backend URL.
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { PostgresLeaseStore } from "./postgres";
import { SqliteLeaseStore } from "./sqlite";
import type { LeaseStore } from "./store";

/** The embedded store's file name, beside the state directory. */
export const ACCOUNTS_DB_FILE = "accounts.sqlite";

/** Does `store` name a PostgreSQL database (`postgres://` or `postgresql://`)? */
export function isPostgresUrl(store: string): boolean {
  return /^postgres(ql)?:\/\//.test(store);
}

/**
 * The embedded store's file for a project: with the state of a file backend (`file://<dir>` ->
 * `<dir>/accounts.sqlite`, so `.multienv/state/accounts.sqlite` by default: the leases go where the stacks holding
 * them are recorded, and a state directory of its own, such as a test's, has leases of its own), else under the
 * project's `.multienv/`.
 */
export function accountsDbFile(backendUrl: string | undefined, projectDir: string): string {
  const url = backendUrl?.trim();
  if (url !== undefined && url.startsWith("file://")) {
    const stateDir = url.startsWith("file:///") ? fileURLToPath(url) : resolve(projectDir, url.slice("file://".length));
    return join(stateDir, ACCOUNTS_DB_FILE);
  }
  return join(resolve(projectDir), ".multienv", ACCOUNTS_DB_FILE);
}

/** Where the pool's leases are: its `store`, or the embedded file. */
export interface StoreLocation {
  /** The pool's `store` setting (a PostgreSQL URL), when it has one. */
  store?: string;
  /** The embedded store's file otherwise (`accountsDbFile`). */
  sqliteFile: string;
}

/** Opens the store a pool's leases are kept in. */
export async function openLeaseStore(location: StoreLocation): Promise<LeaseStore> {
  if (location.store !== undefined && location.store !== "") {
    if (!isPostgresUrl(location.store))
      throw new Error(`store ${location.store} is not a PostgreSQL URL; write postgres://user@host:port/database`);
    return PostgresLeaseStore.open(location.store);
  }
  return new SqliteLeaseStore(location.sqliteFile);
}
