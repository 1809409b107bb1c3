// A warm pool of a task, as the lease store holds it: a pool named `warm:<task>` whose members are env stacks
// (`<task>-w<n>`, each an ordinary stack of the task's stack file) and whose leases are claims. The store's rows are
// the
// one truth every process and machine sharing the store reads; what a claim hands out (the members' handles) is kept
// beside the project's state, mode 0600, since it holds the computers' agent tokens.
import { createHash, randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { mkdir, readFile, rename, writeFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { openLeaseStore, type LeaseStore } from "../../accounts";
import { backendUrlFor } from "../stack/backend";
import { DEFAULT_PROJECT_DIR } from "../stack/project-dir";
import { RunnerError } from "../errors";
import type { GatewayPortForward } from "../../protocol/port-forward";
import type { PoolCluster } from "./admission";

/** The store's pool of a task's warm envs. */
export const POOL_PREFIX = "warm:";
export const poolOf = (task: string) => `${POOL_PREFIX}${task}`;
/** The n-th member's stack name (`<task>-w<n>`): `ls`, `status`, `watch` and `down` work on it. */
export { memberName } from "../../plan/pool-names";

/** Where the store is, for every pool function: the project's embedded SQLite store unless `store` names PostgreSQL. */
export interface PoolOptions {
  projectDir?: string;
  env?: NodeJS.ProcessEnv;
  /** A PostgreSQL URL shared by many machines (default: MULTIENV_POOL_STORE, else the embedded SQLite store). */
  store?: string;
  /** Progress lines. */
  log?: (line: string) => void;
}

export const POOL_STORE_ENV = "MULTIENV_POOL_STORE";

export function projectDirOf(options: PoolOptions): string {
  return resolve(options.projectDir ?? DEFAULT_PROJECT_DIR);
}

/**
 * The embedded store's file of a project's warm pools: with the state of a file backend (`file://<dir>` ->
 * `<dir>/accounts.sqlite`), else under the project's `.multienv/`. Not the machine's store of account pools: a warm
 * pool's members are stacks of this state and their handles are kept beside it, so two checkouts (two states) of one
 * machine warming one task keep two pools, each handing out only members it can reach.
 */
export function warmStoreFile(backendUrl: string, projectDir: string): string {
  const url = backendUrl.trim();
  if (url.startsWith("file://")) {
    const stateDir = url.startsWith("file:///") ? fileURLToPath(url) : resolve(projectDir, url.slice("file://".length));
    return join(stateDir, "accounts.sqlite");
  }
  return join(resolve(projectDir), ".multienv", "accounts.sqlite");
}

/** The lease store warm pools are kept in: the same store and lease mechanism as account pools', in the state's. */
export function openPoolStore(options: PoolOptions): Promise<LeaseStore> {
  const env = options.env ?? process.env;
  const projectDir = projectDirOf(options);
  return openLeaseStore({
    store: options.store ?? env[POOL_STORE_ENV],
    sqliteFile: warmStoreFile(backendUrlFor(projectDir, env), projectDir),
  });
}

/** What `multienv warm` set for a pool, kept with it in the store. */
export interface PoolSettings {
  size: number;
  /** SHA-256 of the task's stack file the members are deployed from: a change rolls the pool. */
  stackFileHash?: string;
  /** An idle env's memory, measured once on the first ready member (bytes), for admission. */
  idleMemoryBytes?: number;
  /** A kubernetes pool's cluster (set with the measure): admission counts its nodes' memory, not this machine's. */
  cluster?: PoolCluster;
}

export async function readSettings(store: LeaseStore, task: string): Promise<PoolSettings | undefined> {
  const text = await store.poolSettings(poolOf(task));
  return text === undefined ? undefined : (JSON.parse(text) as PoolSettings);
}

export async function writeSettings(store: LeaseStore, task: string, settings: PoolSettings): Promise<void> {
  await store.setPoolSettings(poolOf(task), JSON.stringify(settings));
}

/** The pools `serve` keeps: every task with settings in the store. */
export async function pooledTasks(store: LeaseStore): Promise<string[]> {
  return (await store.poolsWithSettings(POOL_PREFIX)).map((pool) => pool.slice(POOL_PREFIX.length));
}

export function stackFileOf(projectDir: string, task: string): string {
  return join(projectDir, "stacks", `Pulumi.${task}.yaml`);
}

export async function stackFileHash(projectDir: string, task: string): Promise<string> {
  const text = await readFile(stackFileOf(projectDir, task)).catch(() => {
    throw new RunnerError(
      `pool ${task}: there is no stacks/Pulumi.${task}.yaml; a warm pool deploys its members from the task's stack file`,
    );
  });
  return createHash("sha256").update(text).digest("hex");
}

/** One computer of a claimed env, as the agent needs it: never the control token. */
export interface ComputerHandle {
  cdpUrl: string;
  /** Opens this computer's `cdpUrl` alone, as `Authorization: Bearer <agentToken>`. */
  agentToken: string;
  startTabs: string[];
}

/** A ready member's handles, written when it became ready. */
export interface MemberHandles {
  stack: string;
  /** The stack file it was deployed from (PoolSettings.stackFileHash). */
  stackFileHash?: string;
  computers: Record<string, ComputerHandle>;
  /**
   * The kubernetes target's: the gateway's pod, which the computers' `cdpUrl` (under `gatewayUrl`, kubernetes://)
   * name; a claim hands them out on a port-forward of the claiming process (MemberForwards).
   */
  portForward?: GatewayPortForward;
  gatewayUrl?: string;
}

function handlesFile(projectDir: string, task: string, member: string): string {
  return join(projectDir, ".multienv", "pools", task, `${member}.json`);
}

export async function writeHandles(projectDir: string, task: string, handles: MemberHandles): Promise<void> {
  const file = handlesFile(projectDir, task, handles.stack);
  await mkdir(join(file, ".."), { recursive: true, mode: 0o700 });
  await writeFile(`${file}.tmp`, JSON.stringify(handles), { mode: 0o600 });
  await rename(`${file}.tmp`, file);
}

/**
 * A member's handles. Read synchronously: the file is a few hundred bytes, and an asynchronous read waits for a libuv
 * worker thread, which a release's collection (copying request logs and captures) keeps busy; on a claim's path that
 * wait was most of the claim's time.
 */
export function readHandles(projectDir: string, task: string, member: string): MemberHandles | undefined {
  let text: string;
  try {
    text = readFileSync(handlesFile(projectDir, task, member), "utf8");
  } catch {
    return undefined;
  }
  return JSON.parse(text) as MemberHandles;
}

/**
 * A claim's id: the task, then 128 random bits. The id is what renews and releases the claim, so it is as hard to
 * guess as a token; the task in it lets a release find the pool.
 */
export function newClaimId(task: string): string {
  return `${task}.${randomBytes(16).toString("hex")}`;
}

export function taskOfClaim(id: string): string {
  const dot = id.lastIndexOf(".");
  if (dot <= 0 || !/^[0-9a-f]{32}$/.test(id.slice(dot + 1)))
    throw new RunnerError(`claim ${id}: not a claim id (<task>.<32 hex digits>); pass the id a claim returned`);
  return id.slice(0, dot);
}

/** A digest of a claim's id: names the claim where others read it, never the id (which renews and releases it). */
function claimDigest(id: string): string {
  return createHash("sha256").update(id).digest("hex").slice(0, 8);
}

/**
 * The claim's holder name in the store, what listings of the pool's holders show (`multienv accounts`, a lease's
 * message): the claim's digest, since the id itself is the claim's bearer secret and stays in the row's holder id.
 */
export function claimHolderName(id: string): string {
  return `claim ${claimDigest(id)}`;
}

/** The episode of a claim: when it began, and a digest of the claim (not the claim's id, which renews and releases). */
export function episodeOf(id: string, since: Date): string {
  const stamp = since
    .toISOString()
    .replace(/[-:]/g, "")
    .replace(/\.\d+Z$/, "Z");
  return `${stamp}-${claimDigest(id)}`;
}
