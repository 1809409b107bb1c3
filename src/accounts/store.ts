// The lease store: which account of a pool each holder has, since when and until when, and when the pool's next
// sign-in may start. Two implementations: SQLite (sqlite.ts), one file per machine (location.ts says where), and
// PostgreSQL (postgres.ts) for holders on many machines. Each makes a lease atomic in its own way (see there); the
// waiting, the spacing and the messages are lease.ts's, the same for both.
//
// A holder is one lease of its own, not a name: its `id` is made once by whoever asks (a random id, kept in the
// asking stack's state, by the AccountLease resource) and alone says whose a lease is. Its `name` (the stack's) is what
// people read in `multienv accounts` and the waiting messages; two holders may share one, as the same stack name
// deployed from two states (two machines, two checkouts) does, and still get two accounts, and one's release frees
// only its own.

/** Who holds a lease. */
export interface Holder {
  /** The lease's own id: opaque, made once by the holder and kept by it; the store compares it alone. */
  id: string;
  /** What people read: the stack holding it. Not unique. */
  name: string;
}

/** One account of a pool, as the store holds it. */
export interface AccountRow {
  name: string;
  /** The holder's name (the stack holding it), or null when it is free. */
  heldBy: string | null;
  /** The holder's id (its lease's own), or null when it is free. */
  holderId: string | null;
  /** When the current holder leased it (null when free). */
  since: Date | null;
  /** When the lease ends unless its holder extends it (null when free). Past it, the next request may take it. */
  until: Date | null;
}

/** A lease granted (or kept) by `tryLease`, or extended by `renew`. */
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
   * In one transaction: the account the holder (by its id) already holds, extended to `leaseMs` from now; else a free
   * one (never held, released, or its lease expired) leased to it; else undefined. Never one account to two holders,
   * never two accounts of a pool to one.
   */
  tryLease(pool: string, holder: Holder, leaseMs: number): Promise<Lease | undefined>;
  /**
   * In one transaction: extends the lease of `account` to `leaseMs` from now when the holder with `holderId` still
   * holds it (its lease expired or not, so long as nobody took it since); else undefined, and nothing changes.
   */
  renew(pool: string, account: string, holderId: string, leaseMs: number): Promise<Lease | undefined>;
  /**
   * Frees `account` when the holder with `holderId` holds it (any holder when undefined: an operator's release by
   * hand); the name of the holder it freed, or undefined when it freed nothing.
   */
  release(pool: string, account: string, holderId?: string): Promise<string | undefined>;
  /** Every account of the pool, by name. */
  accounts(pool: string): Promise<AccountRow[]>;
  /**
   * Reserves the pool's next sign-in slot, `intervalMs` after the last one reserved (or now, when that is past):
   * how long the caller waits before its sign-in. Atomic across every process using the store.
   */
  reserveSignIn(pool: string, intervalMs: number): Promise<number>;
  close(): Promise<void>;
}

/**
 * The id a lease made before leases had ids of their own goes by: its stack's name, marked. The stores give their
 * old rows this id when they first open, and a stack whose state holds such a lease asks under it, so it keeps its
 * account across the upgrade; a new lease always gets an id of its own.
 */
export function legacyHolderId(stack: string): string {
  return `${LEGACY_PREFIX}${stack}`;
}

/** The mark of a legacy holder id (`legacyHolderId`); the stores' migrations write the same. */
export const LEGACY_PREFIX = "legacy-stack:";
