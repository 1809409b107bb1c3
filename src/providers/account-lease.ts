// `accountLease`: one account of a pool leased to a stack, kept in the pool's lease store (src/accounts). A dynamic
// resource because a lease is the project's own record, in its own store: no provider package serves one. Create
// makes the lease's own id (`leaseId`, random, kept in this resource's state: the holder is this stack of this state,
// not its bare name) and leases (waiting for a free account up to the stack's wait); update keeps the same account
// under the same id and extends the lease (every `up` asks again: its `requestedAt` input changes); delete releases
// it, only if this lease still holds it. Being a resource of the program, a plain `pulumi up`/`destroy` leases and
// releases as the runner does; the env's resources that use the account depend on it, so a destroy releases it only
// after them, and after the site's cleanup (site-cleanup.ts).
import { randomUUID } from "node:crypto";
import { leaseAccount, legacyHolderId, openLeaseStore, type StoreLocation } from "../accounts";
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
  /** The stack's name: what the store shows as the holder. */
  holder: string;
  accounts: string[];
  leaseHours: number;
  signInsPerMinute?: number;
  store?: string;
  sqliteFile: string;
  waitSeconds: number;
  requestedAt: string;
}

/** The state: the inputs, and the lease. */
export interface AccountLeaseState extends AccountLeaseInputs {
  /** The lease's own id, made at create. A state written before leases had ids has none. */
  leaseId?: string;
  account: string;
  since: string;
  until: string;
}

export const leaseLocation = (inputs: StoreLocation): StoreLocation => ({
  store: inputs.store,
  sqliteFile: inputs.sqliteFile,
});

/** The id the state's lease goes by: its own, or (a state from before ids) its stack's legacy one. */
export function leaseIdOf(state: Pick<AccountLeaseState, "leaseId" | "holder">): string {
  return state.leaseId ?? legacyHolderId(state.holder);
}

async function lease(inputs: AccountLeaseInputs, leaseId: string): Promise<AccountLeaseState> {
  const store = await openLeaseStore(leaseLocation(inputs));
  try {
    const leased = await leaseAccount(store, {
      ...inputs,
      holder: { id: leaseId, name: inputs.holder },
      waitMs: inputs.waitSeconds * 1000,
    });
    return {
      ...(pick(inputs as unknown as Record<string, unknown>, INPUT_KEYS) as AccountLeaseInputs),
      leaseId,
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
    const outs = await lease(inputs as AccountLeaseInputs, randomUUID());
    return { id: `${inputs.pool}/${inputs.holder}/${outs.leaseId}`, outs };
  },
  async update(_id, olds, news) {
    return { outs: await lease(news as AccountLeaseInputs, leaseIdOf(olds as AccountLeaseState)) };
  },
  async delete(_id, props) {
    const state = props as AccountLeaseState;
    const store = await openLeaseStore(leaseLocation(state));
    try {
      // Only this lease: an account taken by another holder after this lease expired stays theirs, and so does one
      // held by the same stack name from another state.
      await store.release(state.pool, state.account, leaseIdOf(state));
    } finally {
      await store.close();
    }
  },
};
