// `multienv accounts <pool>`: each account of a pool, the stack holding it, since and until when, read from the pool's
// lease store (the one its stack file names, else the machine's own: src/accounts/location.ts); and an account freed
// by hand.
import { existsSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import YAML from "yaml";
import { accountsDbFile, openLeaseStore, type LeaseStore } from "../../accounts";
import { decodeConfigValue } from "../../config/validate";
import { CONFIG_NAMESPACE } from "../../plan/problems";
import { RunnerError } from "../errors";
import { DEFAULT_PROJECT_DIR } from "../stack/workspace";

export interface PoolAccount {
  name: string;
  /** The stack holding it, or null. */
  heldBy: string | null;
  /** ISO 8601, or null when free. */
  since: string | null;
  until: string | null;
}

export interface PoolAccounts {
  pool: string;
  accounts: PoolAccount[];
}

export interface AccountsOptions {
  projectDir?: string;
  env?: NodeJS.ProcessEnv;
}

/** What the pool's stack file says of its accounts and store, when the file is there. */
function poolFile(projectDir: string, pool: string): { accounts: string[]; store?: string } | undefined {
  const file = join(projectDir, "stacks", `Pulumi.${pool}.yaml`);
  if (!existsSync(file)) return undefined;
  const parsed = YAML.parse(readFileSync(file, "utf8")) as { config?: Record<string, unknown> } | null;
  // Structured, or as the Automation API writes a spec's config: the JSON as a string.
  const raw = parsed?.config?.[`${CONFIG_NAMESPACE}:pool`];
  const value = typeof raw === "string" ? decodeConfigValue(raw) : raw;
  if (typeof value !== "object" || value === null)
    throw new RunnerError(
      `${file} is not a pool's stack: it has no ${CONFIG_NAMESPACE}:pool (accounts.<name> with settings and secretSettings)`,
    );
  const { accounts, store } = value as { accounts?: Record<string, unknown>; store?: unknown };
  return { accounts: Object.keys(accounts ?? {}).sort(), store: typeof store === "string" ? store : undefined };
}

async function withPoolStore<T>(
  pool: string,
  options: AccountsOptions,
  use: (store: LeaseStore) => Promise<T>,
): Promise<T> {
  const projectDir = resolve(options.projectDir ?? DEFAULT_PROJECT_DIR);
  const file = poolFile(projectDir, pool);
  const store = await openLeaseStore({
    store: file?.store,
    sqliteFile: accountsDbFile(options.env ?? process.env),
  }).catch((error: unknown) => {
    throw new RunnerError(`pool ${pool}: cannot open its lease store (${(error as Error).message})`);
  });
  try {
    if (file !== undefined) await store.syncPool(pool, file.accounts);
    return await use(store);
  } finally {
    await store.close();
  }
}

/** Each account of the pool and who holds it. */
export async function poolAccounts(pool: string, options: AccountsOptions = {}): Promise<PoolAccounts> {
  return withPoolStore(pool, options, async (store) => {
    const rows = await store.accounts(pool);
    if (rows.length === 0)
      throw new RunnerError(
        `pool ${pool}: no accounts; write stacks/Pulumi.${pool}.yaml with ${CONFIG_NAMESPACE}:pool`,
      );
    return {
      pool,
      accounts: rows.map((r) => ({
        name: r.name,
        heldBy: r.heldBy,
        since: r.since?.toISOString() ?? null,
        until: r.until?.toISOString() ?? null,
      })),
    };
  });
}

/** Frees an account of the pool by hand; the stack that held it. */
export async function releaseAccount(pool: string, account: string, options: AccountsOptions = {}): Promise<string> {
  return withPoolStore(pool, options, async (store) => {
    const rows = await store.accounts(pool);
    if (!rows.some((r) => r.name === account))
      throw new RunnerError(
        `pool ${pool} has no account ${account}; its accounts: ${rows.map((r) => r.name).join(", ") || "none"}`,
      );
    const holder = await store.release(pool, account);
    if (holder === undefined)
      throw new RunnerError(`account ${account} of pool ${pool} is not leased; nothing to free`);
    return holder;
  });
}
