// Account pools: the lease store and the lease, used by the program (the AccountLease resource, a pooled site's
// cleanup) and the runner (`multienv accounts`, `ls`, `up --account-wait`).
export {
  legacyHolderId,
  MEMBER_STATES,
  type AccountRow,
  type Holder,
  type Lease,
  type LeaseStore,
  type MemberState,
} from "./store";
export { accountsDbFile, isPostgresUrl, openLeaseStore, withStorePassword, type StoreLocation } from "./location";
export {
  ACCOUNT_WAIT_ENV,
  DEFAULT_ACCOUNT_WAIT_SECONDS,
  awaitFreeAccount,
  durationText,
  holdersText,
  leaseAccount,
  LeaseError,
  HOUR_MS,
  type LeaseRequest,
} from "./lease";
