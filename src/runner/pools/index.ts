// Warm pools of task envs, for harnesses running thousands of episodes: `warmPool` brings a task's pool to a size,
// `claimEnv` takes a ready env in milliseconds, `renewClaim` keeps it, `releaseEnv` collects the episode and resets
// the env for the next claim; `servePools` is the same over HTTP (`multienv serve`).
//
//   import { claimEnv, releaseEnv, warmPool } from "multienv/src/runner/pools";
//   await warmPool("demo", 2, { log: console.log });
//   const claim = await claimEnv({ task: "demo", ttlSeconds: 600, waitSeconds: 60 });
//   ... the agent drives claim.computers.agent.cdpUrl with claim.computers.agent.agentToken ...
//   await releaseEnv(claim.id);
export {
  claimEnv,
  renewClaim,
  PoolBusyError,
  ClaimGoneError,
  DEFAULT_TTL_SECONDS,
  type Claim,
  type ClaimRequest,
  type PoolState,
} from "./claims";
export { warmPool, releaseEnv, PoolKeeper, type KeeperOptions } from "./keeper";
export { servePools, DEFAULT_SERVE_PORT, SERVE_TOKEN_FILE, type PoolService, type ServeOptions } from "./serve";
export {
  memberName,
  poolOf,
  openPoolStore,
  writeHandles,
  writeSettings,
  POOL_STORE_ENV,
  type PoolOptions,
  type MemberHandles,
  type ComputerHandle,
} from "./pool";
