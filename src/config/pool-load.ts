// A pool's stack as the program reads it: from Pulumi config, its secret settings as Pulumi secrets, validated by
// pool.ts's rules.
import * as pulumi from "@pulumi/pulumi";
import { withStorePassword } from "../accounts/location";
import { CONFIG_NAMESPACE, formatProblem } from "../plan/problems";
import { ConfigError } from "./errors";
import { POOL_KEY, validatePoolConfig, type PoolConfig } from "./pool";
import type { RawConfigValue } from "./validate";

/** Is the running stack a pool's (its config holds `multienv:pool`)? */
export function isPoolStack(all: Record<string, string> = pulumi.runtime.allConfig()): boolean {
  return Object.hasOwn(all, `${CONFIG_NAMESPACE}:${POOL_KEY}`);
}

/** The pool as a pool stack deploys it: each account's settings, its secret ones' values merged in. */
export interface LoadedPool {
  pool: PoolConfig;
  /** Account -> its settings, secret values merged in: a secret. */
  accounts: pulumi.Output<Record<string, Record<string, unknown>>>;
  /** The store's URL, its password (`storePassword`) merged in: a secret. Undefined for the machine's own store. */
  store?: pulumi.Output<string>;
  /** Lines the program warns of (a password in plain text in the store's URL). */
  warnings: string[];
}

/** Reads the running pool stack's config; one ConfigError holding every problem. */
export function loadPoolConfig(
  pulumiConfig: pulumi.Config = new pulumi.Config(CONFIG_NAMESPACE),
  isSecret: (fullKey: string) => boolean,
): LoadedPool {
  const prefix = `${pulumiConfig.name}:`;
  const values: Record<string, RawConfigValue> = {};
  for (const [fullKey, value] of Object.entries(pulumi.runtime.allConfig())) {
    if (!fullKey.startsWith(prefix)) continue;
    const secret = isSecret(fullKey);
    values[fullKey.slice(prefix.length)] = secret ? { secret } : { secret, value };
  }
  const validated = validatePoolConfig(values, pulumi.getStack());
  if (validated.pool === undefined) throw new ConfigError(validated.problems);
  const pool = validated.pool;
  const accounts = pulumi.secret(
    pulumi.all(
      Object.fromEntries(
        Object.entries(pool.accounts).map(([name, account]) => [
          name,
          pulumi
            .all(
              Object.fromEntries(
                Object.entries(account.secretSettings).map(([setting, key]) => [
                  setting,
                  pulumiConfig.requireSecret(key),
                ]),
              ),
            )
            .apply((secrets) => ({ ...account.settings, ...secrets }) as Record<string, unknown>),
        ]),
      ),
    ),
  );
  const { store, storePassword } = pool;
  const password = storePassword === undefined ? undefined : pulumiConfig.requireSecret(storePassword);
  return {
    pool,
    accounts,
    store:
      store === undefined
        ? undefined
        : pulumi.secret(pulumi.output(password).apply((secret) => withStorePassword(store, secret))),
    warnings: validated.warnings.map(formatProblem),
  };
}
