// An account of a pool leased to the stack, for one live site: the pool's accounts are read from the pool's own stack
// (a StackReference: its outputs, the accounts' settings a secret), and the lease is kept in the pool's lease store
// by the AccountLease dynamic resource (src/providers/account-lease.ts: no provider package serves a lease). The
// site's server gets `settings`, a secret;
// at destroy the site's cleanup (SiteCleanup, declared once the env is) runs before the lease goes.
import * as pulumi from "@pulumi/pulumi";
import { AccountLease as AccountLeaseResource } from "../../src/providers/resources";

/** What a pool's stack exports (src/program-pools.ts writes them, this reads them). */
export const POOL_OUTPUTS = {
  accountNames: "accountNames",
  accounts: "accounts",
  store: "store",
  leaseHours: "leaseHours",
  signInsPerMinute: "signInsPerMinute",
} as const;

export interface AccountLeaseArgs {
  /** The pool's stack name (`websites.<site>.accountPool`). */
  pool: string;
  /** The live site whose server signs in with the account. */
  site: string;
  /** The stack the account is leased to. */
  holder: string;
  /** The embedded store's file, used when the pool names no `store`. */
  sqliteFile: string;
  /** How long the create may wait for a free account. */
  waitSeconds: number;
  /** This run's time: every `up` extends the lease. */
  requestedAt: string;
}

/** One account of a pool leased to the stack; `settings` go to the site's server, as a secret. */
export class AccountLease extends pulumi.ComponentResource {
  readonly lease: AccountLeaseResource;
  readonly poolStack: pulumi.StackReference;
  /** The pool's stack name. */
  readonly pool: string;
  /** The leased account's name. */
  readonly account: pulumi.Output<string>;
  /** The leased account's settings, its secret ones' values merged in: a secret. */
  readonly settings: pulumi.Output<Record<string, unknown>>;

  constructor(name: string, args: AccountLeaseArgs, opts?: pulumi.ComponentResourceOptions) {
    super("multienv:accounts:AccountLease", name, {}, opts);
    this.pool = args.pool;
    this.poolStack = new pulumi.StackReference(
      `${name}-pool`,
      { name: `${pulumi.getOrganization()}/${pulumi.getProject()}/${args.pool}` },
      { parent: this },
    );
    const output = (key: string) => this.poolStack.requireOutput(key);
    this.lease = new AccountLeaseResource(
      `${name}-lease`,
      {
        pool: args.pool,
        holder: args.holder,
        accounts: output(POOL_OUTPUTS.accountNames) as pulumi.Output<string[]>,
        leaseHours: output(POOL_OUTPUTS.leaseHours) as pulumi.Output<number>,
        signInsPerMinute: this.poolStack.getOutput(POOL_OUTPUTS.signInsPerMinute) as pulumi.Output<number | undefined>,
        store: this.poolStack.getOutput(POOL_OUTPUTS.store) as pulumi.Output<string | undefined>,
        sqliteFile: args.sqliteFile,
        waitSeconds: args.waitSeconds,
        requestedAt: args.requestedAt,
      },
      // The store's URL may hold a password.
      { parent: this, additionalSecretOutputs: ["store"] },
    );
    this.account = this.lease.account;
    this.settings = pulumi.secret(
      pulumi
        .all([output(POOL_OUTPUTS.accounts), this.lease.account])
        .apply(([accounts, account]) => (accounts as Record<string, Record<string, unknown>>)[account] ?? {}),
    ) as unknown as pulumi.Output<Record<string, unknown>>;
    this.registerOutputs({ account: this.account });
  }
}
