// The Pulumi program's part for account pools. A pool's stack (its config holds `multienv:pool`) deploys nothing:
// it exports its accounts, their settings a secret, for the task stacks that lease them. A task stack's live site that
// names a pool gets an account leased to the stack (components/accounts/accountLease.ts) before anything else of the
// stack is declared, so a stack that cannot have one fails with nothing created; while it waits the program says
// which stacks hold the pool's accounts. At destroy, the site's cleanup runs before the account is released, and only
// while the stack's lease still holds it.
import * as pulumi from "@pulumi/pulumi";
import { AccountLease, POOL_OUTPUTS } from "../components/accounts/accountLease";
import type { MultiEnv } from "../components/multiEnv";
import {
  ACCOUNT_WAIT_ENV,
  accountsDbFile,
  awaitFreeAccount,
  DEFAULT_ACCOUNT_WAIT_SECONDS,
  LeaseError,
  openLeaseStore,
} from "./accounts";
import { ConfigError } from "./config";
import { isConfigSecret } from "./config/load";
import { loadPoolConfig } from "./config/pool-load";
import type { Plan } from "./plan";
import { SiteCleanup } from "./providers/resources";

/** A pool's stack: its accounts as outputs (their settings a secret), and how they are leased. */
export function poolProgram(): Record<string, unknown> {
  let loaded;
  try {
    loaded = loadPoolConfig(undefined, isConfigSecret);
  } catch (error) {
    if (error instanceof ConfigError) throw new pulumi.RunError(error.message);
    throw error;
  }
  const { pool, accounts, store } = loaded;
  for (const warning of loaded.warnings) void pulumi.log.warn(`multienv: ${warning}`);
  return {
    [POOL_OUTPUTS.accountNames]: Object.keys(pool.accounts).sort(),
    [POOL_OUTPUTS.accounts]: accounts,
    [POOL_OUTPUTS.leaseHours]: pool.leaseHours,
    ...(store === undefined ? {} : { [POOL_OUTPUTS.store]: store }),
    ...(pool.signInsPerMinute === undefined ? {} : { [POOL_OUTPUTS.signInsPerMinute]: pool.signInsPerMinute }),
  };
}

/**
 * The value a resource's output resolves to, or its registration's error. Through the SDK's own promise of the output
 * (internal, as src/runner/check/graph.ts reads it too): `apply` would never run when the resource fails, and the
 * program would wait for ever.
 */
function settled<T>(output: pulumi.Output<T>): Promise<T> {
  return (output as unknown as { promise(): Promise<T> }).promise();
}

function accountWaitSeconds(): number {
  const raw = process.env[ACCOUNT_WAIT_ENV];
  const seconds = raw === undefined || raw === "" ? DEFAULT_ACCOUNT_WAIT_SECONDS : Number(raw);
  if (!Number.isFinite(seconds) || seconds < 0)
    throw new pulumi.RunError(`multienv: ${ACCOUNT_WAIT_ENV}=${raw} is not a number of seconds; set it to e.g. 600`);
  return seconds;
}

/** The leases of a task stack's pooled sites. */
export interface PooledSites {
  leases: Record<string, AccountLease>;
  /** Site -> its leased account's settings (a secret), for its server. */
  settings: Record<string, pulumi.Output<Record<string, unknown>>>;
}

/**
 * Leases an account for each live site of the plan that names a pool; on a real run (not a preview) returns once
 * every lease is held, after telling which stacks hold a pool's accounts while it waits.
 */
export async function leasePooledSites(planned: Plan, stack: string, wait = true): Promise<PooledSites> {
  const pooled = planned.websites.filter((site) => site.accountPool !== undefined);
  const leases: Record<string, AccountLease> = {};
  if (pooled.length === 0) return { leases, settings: {} };
  const waitSeconds = accountWaitSeconds();
  // The machine's own store, found from the environment alone: the same file whichever checkout, backend or path
  // (CLI, Automation API, plain pulumi) deploys.
  const sqliteFile = accountsDbFile(process.env);
  const requestedAt = new Date().toISOString();
  for (const site of pooled) {
    leases[site.name] = new AccountLease(`${stack}-${site.name}-account`, {
      pool: site.accountPool!,
      site: site.name,
      holder: stack,
      sqliteFile,
      waitSeconds,
      requestedAt,
    });
  }
  if (wait && !pulumi.runtime.isDryRun()) {
    await Promise.all(
      Object.values(leases).map(async (lease) => {
        const pool = lease.poolStack;
        const names = (await pool.getOutputDetails(POOL_OUTPUTS.accountNames)).value as string[] | undefined;
        const storeDetails = await pool.getOutputDetails(POOL_OUTPUTS.store);
        const store = (storeDetails.secretValue ?? storeDetails.value) as string | undefined;
        const name = lease.pool;
        if (names === undefined)
          throw new pulumi.RunError(
            `multienv: pool ${name} exports no accounts; deploy it first with \`multienv up ${name}\``,
          );
        const opened = await openLeaseStore({ store, sqliteFile });
        try {
          await awaitFreeAccount(opened, {
            pool: name,
            holderName: stack,
            accounts: names,
            leaseHours: 0,
            waitMs: waitSeconds * 1000,
            log: (line) => void pulumi.log.info(`multienv: ${line}`),
          });
        } catch (error) {
          if (error instanceof LeaseError) throw new pulumi.RunError(`multienv: ${error.message}`);
          throw error;
        } finally {
          await opened.close();
        }
        await settled(lease.account);
      }),
    );
  }
  return {
    leases,
    settings: Object.fromEntries(Object.entries(leases).map(([site, lease]) => [site, lease.settings])),
  };
}

/** Each pooled site's cleanup at destroy: deleted before the env's parts, which go before the lease. */
export function cleanUpPooledSites(pooled: PooledSites, env: MultiEnv, stack: string): void {
  for (const [site, lease] of Object.entries(pooled.leases)) {
    new SiteCleanup(
      `${stack}-${site}-account-cleanup`,
      {
        gatewayUrl: env.outputs.gatewayUrl,
        controlToken: env.outputs.controlToken,
        site,
        account: lease.account,
        ...(env.outputs.gatewayPortForward === undefined ? {} : { gatewayPortForward: env.outputs.gatewayPortForward }),
        lease: pulumi
          .all([lease.lease.leaseId, lease.lease.store, lease.lease.sqliteFile, lease.lease.leaseHours])
          .apply(([leaseId, store, sqliteFile, leaseHours]) => ({
            pool: lease.pool,
            leaseId,
            sqliteFile,
            leaseHours,
            ...(store === undefined || store === null ? {} : { store }),
          })),
      },
      { dependsOn: [env] },
    );
  }
}

/** The stack output naming each pooled site's pool and leased account: `multienv ls` shows it. */
export function leasedAccountsOutput(
  pooled: PooledSites,
): pulumi.Output<Record<string, { pool: string; account: string }>> | undefined {
  const entries = Object.entries(pooled.leases);
  if (entries.length === 0) return undefined;
  return pulumi.all(
    Object.fromEntries(
      entries.map(([site, lease]) => [site, lease.account.apply((account) => ({ pool: lease.pool, account }))]),
    ),
  );
}
