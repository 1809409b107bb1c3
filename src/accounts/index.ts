// Account pools: the lease store and the lease, used by the program (the AccountLease resource) and the runner
// (`multienv accounts`, `ls`, `up --account-wait`).
export { MEMBER_STATES, type AccountRow, type Lease, type LeaseStore, type MemberState } from "./store";
export { accountsDbFile, isPostgresUrl, openLeaseStore, type StoreLocation } from "./location";
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
