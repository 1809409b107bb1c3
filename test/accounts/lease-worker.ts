// One `up`-equivalent lease request as a process of its own: leases an account of the pool as `holder` (the stack's
// name) under a lease id of its own (`leaseId`, else a random one, as the AccountLease resource makes at create),
// prints JSON lines (`waiting` each time the holders change, `leased`, `failed`), then holds the lease until a
// `release` line on stdin, releases it and prints `released`. Without `sqliteFile` and `store` it uses the machine's
// default store, found from its environment as the program finds it. With `resource`, it is the AccountLease
// resource's own create and delete (src/providers/account-lease.ts) that lease and release, the state between them
// kept in this process as the engine keeps it in the stack's state.
import { randomUUID } from "node:crypto";
import { createInterface } from "node:readline";
import { accountsDbFile, leaseAccount, openLeaseStore } from "../../src/accounts";
import { accountLease } from "../../src/providers/account-lease";

interface WorkerArgs {
  store?: string;
  sqliteFile?: string;
  pool: string;
  holder: string;
  leaseId?: string;
  accounts: string[];
  leaseHours: number;
  waitMs: number;
  resource?: boolean;
}

const say = (line: Record<string, unknown>) => process.stdout.write(JSON.stringify(line) + "\n");

/** Waits for a `release` line: false when stdin ends without one. */
async function releaseLine(): Promise<boolean> {
  for await (const line of createInterface({ input: process.stdin })) if (line.trim() === "release") return true;
  return false;
}

/** As the engine runs the AccountLease resource: create, then (at `release`) delete with the state create returned. */
async function asResource(args: WorkerArgs, sqliteFile: string): Promise<void> {
  const inputs = { ...args, sqliteFile, waitSeconds: args.waitMs / 1000, requestedAt: new Date().toISOString() };
  const { id, outs } = await accountLease.create(inputs);
  say({ event: "leased", account: outs.account, leaseId: outs.leaseId, sqliteFile });
  if (await releaseLine()) {
    await accountLease.delete!(id!, outs);
    say({ event: "released", account: outs.account });
  }
  process.stdin.destroy();
}

async function main(): Promise<void> {
  const args = JSON.parse(process.argv[2]) as WorkerArgs;
  if (args.resource) {
    await asResource(args, args.sqliteFile ?? accountsDbFile(process.env)).catch((error: unknown) => {
      say({ event: "failed", message: (error as Error).message });
      process.exitCode = 1;
    });
    return;
  }
  const sqliteFile = args.sqliteFile ?? accountsDbFile(process.env);
  const store = await openLeaseStore({ store: args.store, sqliteFile });
  const holder = { id: args.leaseId ?? randomUUID(), name: args.holder };
  try {
    const lease = await leaseAccount(store, { ...args, holder, log: (line) => say({ event: "waiting", line }) });
    say({ event: "leased", account: lease.account, kept: lease.kept, leaseId: holder.id, sqliteFile });
    if (await releaseLine()) {
      const freed = await store.release(args.pool, lease.account, holder.id);
      say({ event: "released", account: lease.account, freedFrom: freed ?? null });
    }
    process.stdin.destroy();
  } catch (error) {
    say({ event: "failed", message: (error as Error).message });
    process.exitCode = 1;
  } finally {
    await store.close();
  }
}

void main();
