// One `up`-equivalent lease request as a process of its own: leases an account of the pool as `holder`, prints JSON
// lines (`waiting` each time the holders change, `leased`, `failed`), then holds the lease until a `release` line on
// stdin, releases it and prints `released`.
import { createInterface } from "node:readline";
import { leaseAccount, openLeaseStore } from "../../src/accounts";

interface WorkerArgs {
  store?: string;
  sqliteFile: string;
  pool: string;
  holder: string;
  accounts: string[];
  leaseHours: number;
  waitMs: number;
}

const say = (line: Record<string, unknown>) => process.stdout.write(JSON.stringify(line) + "\n");

async function main(): Promise<void> {
  const args = JSON.parse(process.argv[2]) as WorkerArgs;
  const store = await openLeaseStore({ store: args.store, sqliteFile: args.sqliteFile });
  try {
    const lease = await leaseAccount(store, { ...args, log: (line) => say({ event: "waiting", line }) });
    say({ event: "leased", account: lease.account, kept: lease.kept });
    for await (const line of createInterface({ input: process.stdin })) {
      if (line.trim() !== "release") continue;
      const freed = await store.release(args.pool, lease.account, args.holder);
      say({ event: "released", account: lease.account, freedFrom: freed ?? null });
      break;
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
