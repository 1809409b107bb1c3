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
  /**
   * A warm pool's member (an env stack) is in one of MEMBER_STATES; an account of an account pool has none (null).
   * Only a `ready` member is claimed, and only by `claim`: `tryLease` never takes a member with a state.
   */
  state?: MemberState | null;
}

/**
 * A warm pool member's states: `ready` (free, reset, checked), `claimed` (leased to a claim until `until`), and,
 * held by the keeper doing it until `until` (so a keeper that dies lets another take it over), `deploying`,
 * `resetting`; `failed` waits for a keeper to replace it.
 */
export const MEMBER_STATES = ["deploying", "ready", "claimed", "resetting", "failed"] as const;
export type MemberState = (typeof MEMBER_STATES)[number];

/** A lease granted (or kept) by `tryLease` or `claim`, or extended by `renew`. */
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

  // Warm pools: a pool whose members are env stacks and whose leases are claims (src/runner/pools/). The same rows,
  // the same `until` and the same one-lease-per-holder-id index as an account's lease: a claim is a lease whose
  // holder id is the claim's id, renewed with `renew`; a keeper holds each member it works on under an id of that
  // member's own. A keeper's holder has no name apart from its id: the stores write the id as both;
  // a claim's name is a digest of its id (claimHolderName), since the id is the claim's bearer secret and a row's
  // holder name is what listings show.
  /** Puts `name` in the pool in `state`, held by `holder` for `leaseMs` (free with no holder); undefined removes it. */
  setMember(
    pool: string,
    name: string,
    state: MemberState | undefined,
    holder?: string,
    leaseMs?: number,
  ): Promise<void>;
  /**
   * In one transaction, when `name` is in the pool in state `from` and held by holder id `from.holder` (null: by
   * nobody): moves it to `to`, held by `to.holder` for `leaseMs` (free when no holder). False when it was not so
   * (another got there first).
   */
  moveMember(
    pool: string,
    name: string,
    from: { state: MemberState; holder: string | null },
    to: { state: MemberState; holder?: string; leaseMs?: number },
  ): Promise<boolean>;
  /**
   * Every member held past its `until` (a claim not renewed, a keeper gone mid-reset or mid-deploy) moved to
   * `resetting`, each held by `holderOf(name)` for `leaseMs`: the rows taken as they were, each taken by one caller.
   */
  takeExpired(pool: string, holderOf: (name: string) => string, leaseMs: number): Promise<AccountRow[]>;
  /** A place in the pool's queue of claims, after every one taken before it, held `leaseMs` unless asked again. */
  enqueue(pool: string, holder: string, leaseMs: number): Promise<number>;
  /**
   * In one transaction: the ticket's place kept `queueMs` longer; when fewer tickets are before it than the pool has
   * ready members, a ready member leased to `holder` for `leaseMs` and the ticket gone; else undefined (the row's
   * holder id is `holder.id`, what renews the claim; its holder name, what listings show, `holder.name`). So claims are
   * served in the order of their tickets, across every process using the store.
   */
  claim(pool: string, ticket: number, holder: Holder, leaseMs: number, queueMs: number): Promise<Lease | undefined>;
  /** Gives up a ticket (a claim that stopped waiting). */
  leaveQueue(pool: string, ticket: number): Promise<void>;
  /** How many live tickets the pool's queue holds. */
  queueLength(pool: string): Promise<number>;
  /** A warm pool's settings (JSON text: size, stack file hash, measured memory), undefined when never set. */
  poolSettings(pool: string): Promise<string | undefined>;
  setPoolSettings(pool: string, settings: string): Promise<void>;
  /** The pools with settings whose names start with `prefix`. */
  poolsWithSettings(prefix: string): Promise<string[]>;
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
