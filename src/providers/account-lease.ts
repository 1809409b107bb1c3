// `accountLease`: one account of a pool leased to a stack, kept in the pool's lease store (src/accounts). A dynamic
// resource because a lease is the project's own record, in its own store: no provider package serves one. Create
// leases (waiting for a free account up to the stack's wait), update keeps the same account and extends the lease
// (every `up` asks again: its `requestedAt` input changes), delete releases it. Being a resource of the program,
// a plain `pulumi up`/`destroy` leases and releases as the runner does; the env's resources that use the account
// depend on it, so a destroy releases it only after them, and after the site's cleanup (site-cleanup.ts).
import { leaseAccount, openLeaseStore, type StoreLocation } from "../accounts";
import { diffInputs, pick, type Operations } from "./operation";

/** The inputs; `requestedAt` and `waitSeconds` are the request's, not the lease's, and never replace it. */
const INPUT_KEYS = [
  "pool",
  "holder",
  "accounts",
  "leaseHours",
  "signInsPerMinute",
  "store",
  "sqliteFile",
  "waitSeconds",
  "requestedAt",
] as const;

export interface AccountLeaseInputs {
  pool: string;
  holder: string;
  accounts: string[];
  leaseHours: number;
  signInsPerMinute?: number;
  store?: string;
  sqliteFile: string;
  waitSeconds: number;
  requestedAt: string;
}

const location = (inputs: AccountLeaseInputs): StoreLocation => ({
  store: inputs.store,
  sqliteFile: inputs.sqliteFile,
});

async function lease(inputs: AccountLeaseInputs): Promise<Record<string, unknown>> {
  const store = await openLeaseStore(location(inputs));
  try {
    const leased = await leaseAccount(store, { ...inputs, waitMs: inputs.waitSeconds * 1000 });
    return {
      ...pick(inputs as unknown as Record<string, unknown>, INPUT_KEYS),
      account: leased.account,
      since: leased.since.toISOString(),
      until: leased.until.toISOString(),
    };
  } finally {
    await store.close();
  }
}

export const accountLease: Operations = {
  async diff(_id, olds, news) {
    return diffInputs(olds, news, INPUT_KEYS, { replaceOn: ["pool", "holder", "store", "sqliteFile"] });
  },
  async create(inputs) {
    const outs = await lease(inputs as AccountLeaseInputs);
    return { id: `${inputs.pool}/${inputs.holder}`, outs };
  },
  async update(_id, _olds, news) {
    return { outs: await lease(news as AccountLeaseInputs) };
  },
  async delete(_id, props) {
    const store = await openLeaseStore(location(props as AccountLeaseInputs));
    try {
      // Only this stack's lease: an account taken by another stack after this lease expired stays theirs.
      await store.release(props.pool, props.account, props.holder);
    } finally {
      await store.close();
    }
  },
};
