// The lease store: which account of a pool each stack holds, since when and until when, and when the pool's next
// sign-in may start. Two implementations: SQLite (sqlite.ts), embedded beside the project's state for one machine,
// and PostgreSQL (postgres.ts) for stacks on many machines. Each makes a lease atomic in its own way (see there);
// the waiting, the spacing and the messages are lease.ts's, the same for both.

/** One account of a pool, as the store holds it. */
export interface AccountRow {
  name: string;
  /** The stack holding it, or null when it is free. */
  heldBy: string | null;
  /** When the current holder leased it (null when free). */
  since: Date | null;
  /** When the lease ends unless its holder extends it (null when free). Past it, the next request may take it. */
  until: Date | null;
}

/** A lease granted (or kept) by `tryLease`. */
export interface Lease {
  account: string;
  since: Date;
  until: Date;
  /** True when the holder already held this account and the lease was extended. */
  kept: boolean;
}

export interface LeaseStore {
  /**
   * Makes the pool's accounts in the store those named: new names are added free; a name gone from the pool is
   * removed once no live lease holds it.
   */
  syncPool(pool: string, accounts: readonly string[]): Promise<void>;
  /**
   * In one transaction: the account `holder` already holds, extended to `leaseMs` from now; else a free one (never
   * held, released, or its lease expired) leased to it; else undefined. Never one account to two holders.
   */
  tryLease(pool: string, holder: string, leaseMs: number): Promise<Lease | undefined>;
  /** Frees `account` when `holder` holds it (any holder when undefined); the holder it freed, or undefined. */
  release(pool: string, account: string, holder?: string): Promise<string | undefined>;
  /** Every account of the pool, by name. */
  accounts(pool: string): Promise<AccountRow[]>;
  /**
   * Reserves the pool's next sign-in slot, `intervalMs` after the last one reserved (or now, when that is past):
   * how long the caller waits before its sign-in. Atomic across every process using the store.
   */
  reserveSignIn(pool: string, intervalMs: number): Promise<number>;
  close(): Promise<void>;
}
