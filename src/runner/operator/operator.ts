// An operator's view of the task stacks on this machine: `ls` (every stack in the state, deployed or not, its
// containers and episodes), `status` (one env's containers, gateway, computers' tabs, self-test and evidence so
// far), `outputs` (without deploying again) and `screenshot` (each computer's visible tab). All of it only reads:
// no stack lock is taken and nothing in an env changes.
//
// The stacks and their resources come from the state's checkpoint files (../stack/state-files.ts), their containers'
// (or pods') states from the target's runtime (../targets/runtimes.ts); the control token, a secret, from the
// Automation API (gatewayAccess), which also opens the way to the gateway (a port-forward on the kubernetes target).
import { existsSync } from "node:fs";
import { mkdir, writeFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import type { OutputMap } from "@pulumi/pulumi/automation";
import { gatewayClient, type GatewayClient } from "../../protocol/gateway-client";
import type { TrafficCapture } from "../../protocol/traffic";
import { parseLiveSiteProxyLog } from "../../protocol/site-proxy";
import type { TakeoverState } from "../../protocol/takeover";
import type { SelfTestOutput } from "../../plan/stack-outputs";
import type { LiveReason } from "../../plan/types";
import { artifactsDirOf, RUN_RECORD_FILE } from "../evidence/artifacts";
import { DEFAULT_PROJECT_DIR } from "../stack/project-dir";
import {
  containerProblem,
  countContainers,
  partOf,
  type ContainerCounts,
  type ContainerState,
} from "../targets/env-runtime";
import { errorMessage, RunnerError } from "../errors";
import { readOutputs, type GatewayAccess, type StackOutputs } from "../stack/outputs";
import { readRunRecord } from "../evidence/run-record";
import { runtimeOf } from "../targets/runtimes";
import { computerTabs, screenshotComputer, screenshotFileName, type Screenshot, type Tab } from "./screens";
import {
  isDeployed,
  readStateStack,
  readStateStacks,
  targetOf,
  type StateOptions,
  type StateStack,
} from "../stack/state-files";

export interface OperatorOptions extends StateOptions {
  /** Default: artifacts/<stack> under the project directory. */
  artifactsDir?: string;
}

/**
 * The token and a URL of the gateway this process can dial (index.ts passes gatewayAccess); closed when the command is
 * done with it.
 */
export type AccessOf = (stack: string) => Promise<GatewayAccess>;

function projectDirOf(options: StateOptions): string {
  return resolve(options.projectDir ?? DEFAULT_PROJECT_DIR);
}

/** `multienv ls`: one stack of the state. */
export interface StackListing {
  stack: string;
  /** `docker`, `ec2`, `hosts` or `kubernetes`, as its stack file says; null without a stack file. */
  target: string | null;
  deployed: boolean;
  /** When its last update finished (ISO 8601); null for a stack never updated. */
  lastUpdated: string | null;
  containers: ContainerCounts;
  /** Episodes begun (run.json: 1 from the deploy, one more per reset); 0 before its first deploy. */
  episodes: number;
  /** Each live site's account leased from its pool (its `accounts` output), by site; empty when none is. */
  accounts: Record<string, { pool: string; account: string }>;
  /** Whether the env deployed is live (its `live` output); null for a stack not deployed. */
  live: boolean | null;
  /** Whether the env deployed is reproducible (its `reproducible` output); null for a stack not deployed. */
  reproducible: boolean | null;
  /** Why it is live: each live site served live and each computer reaching the public web (`liveReasons`). */
  liveReasons: LiveReason[];
  /**
   * Each computer a person holds or whose agent asks for one (the gateway's takeover states, read with the control
   * token, as `status` reads them); {} when none is; null when nothing is deployed or the gateway was not read.
   */
  persons: Record<string, TakeoverState> | null;
}

export interface StackList {
  stacks: StackListing[];
}

async function episodesOf(stack: StateStack, artifactsDir: string): Promise<number> {
  if (!existsSync(join(artifactsDir, RUN_RECORD_FILE))) return isDeployed(stack) ? 1 : 0;
  return (await readRunRecord(artifactsDir, stack.name)).episode ?? 1;
}

/** How long `ls` waits for one env's gateway to say who holds its computers. */
const PERSONS_MS = 15_000;

/**
 * The computers of a deployed env a person holds or whose agent asks for one, by its gateway's takeover states (only
 * the control token reads them); null when the gateway did not answer in PERSONS_MS.
 */
async function personsOf(stack: string, accessOf: AccessOf): Promise<Record<string, TakeoverState> | null> {
  let access: GatewayAccess | undefined;
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<null>((resolve) => (timer = setTimeout(() => resolve(null), PERSONS_MS)));
  const read = (async () => {
    access = await accessOf(stack);
    if (access.unreachable !== undefined) return null;
    const { computers } = await gatewayClient(access).takeovers();
    return Object.fromEntries(
      Object.entries(computers).filter(([, state]) => state.taken !== undefined || state.request !== undefined),
    );
  })().catch(() => null);
  try {
    return await Promise.race([read, late]);
  } finally {
    clearTimeout(timer);
    void read.finally(() => access?.close?.()).catch(() => undefined);
  }
}

/**
 * Every task stack of the project in the state, with its containers asked of their engines; with `accessOf`, each
 * deployed env's gateway is asked which computers a person holds or is asked for.
 */
export async function listStacks(options: OperatorOptions = {}, accessOf?: AccessOf): Promise<StackList> {
  const projectDir = projectDirOf(options);
  const stacks = await readStateStacks(options);
  return {
    stacks: await Promise.all(
      stacks.map(async (stack): Promise<StackListing> => {
        const states = await runtimeOf(stack.resources, stack.outputs).states();
        const deployed = isDeployed(stack);
        const outputs = deployed ? readOutputs(outputMapOf(stack)) : undefined;
        return {
          stack: stack.name,
          target: targetOf(stack.name, projectDir) ?? null,
          deployed,
          lastUpdated: stack.lastUpdated ?? null,
          containers: countContainers(states),
          episodes: await episodesOf(stack, options.artifactsDir ?? artifactsDirOf(projectDir, stack.name)),
          accounts: leasedAccountsOf(stack.outputs),
          live: outputs?.live ?? null,
          reproducible: outputs?.reproducible ?? null,
          liveReasons: outputs?.liveReasons ?? [],
          persons: deployed && accessOf !== undefined ? await personsOf(stack.name, accessOf) : null,
        };
      }),
    ),
  };
}

/** The stack's `accounts` output (site -> pool and account) as the program writes it; {} when it has none. */
function leasedAccountsOf(outputs: Record<string, unknown>): Record<string, { pool: string; account: string }> {
  const accounts = outputs.accounts;
  if (typeof accounts !== "object" || accounts === null) return {};
  return Object.fromEntries(
    Object.entries(accounts as Record<string, { pool?: unknown; account?: unknown }>)
      .filter(([, a]) => typeof a?.pool === "string" && typeof a.account === "string")
      .map(([site, a]) => [site, { pool: a.pool as string, account: a.account as string }]),
  );
}

/** The state's outputs as the Automation API hands them (`[secret]` values flagged), for readOutputs. */
function outputMapOf(stack: StateStack): OutputMap {
  return Object.fromEntries(
    Object.entries(stack.outputs).map(([key, value]) => [key, { value, secret: value === "[secret]" }]),
  );
}

/** The gateway's /healthz answer. */
export interface GatewayHealth {
  ok: boolean;
  /** Its HTTP status, when it answered. */
  status?: number;
  /** What it says is missing (a site not ready, a capture not writing), when it is not ready. */
  missing?: { what: string; site: string; role?: string; detail: string }[];
  /** Why it did not answer. */
  error?: string;
}

export interface ComputerStatus {
  /** Its open tabs; empty when DevTools did not answer. */
  tabs: Tab[];
  /** Why its browser could not be read over DevTools through the gateway. */
  error?: string;
  /**
   * Who holds it (`taken`: a person, since when) and whether its agent asked for a person (`request`: the reason and
   * the deadline), as the gateway says; absent when the agent runs alone or the gateway could not say.
   */
  takeover?: TakeoverState;
}

export type SelfTestSummary = { skipped: true } | { passed: boolean; finishedAt: string; failed: string[] };

export interface ProxyLogSize {
  bytes: number;
  lines: number;
  /** Its `request` lines: requests forwarded. */
  requests: number;
  /** Its `refused` lines: hosts the computer may not reach. */
  refused: number;
}

export interface StackStatus {
  stack: string;
  /** True when `problems` is empty. */
  healthy: boolean;
  /** What is not healthy, one line each, naming it. */
  problems: string[];
  containers: ContainerState[];
  gateway: { url: string; healthz: GatewayHealth };
  computers: Record<string, ComputerStatus>;
  selfTest: SelfTestSummary;
  evidence: {
    captureTraffic: boolean;
    /** The gateway's traffic/v1 listing (absent when the env captures nothing). */
    captures?: { count: number; bytes: number; files: TrafficCapture[] } | { error: string };
    /** Each computer's site-proxy log as the gateway serves it. */
    proxyLogs: Record<string, ProxyLogSize | { error: string }>;
  };
}

/**
 * How long status waits for each of the gateway's answers (its health, a proxy log, the captures' listing): a part
 * that does not answer (its node lost) is named, never waited for.
 */
const HEALTHZ_TIMEOUT_MS = 15_000;

async function gatewayHealth(gateway: GatewayClient): Promise<GatewayHealth> {
  try {
    const { ok, status, missing } = await gateway.health(AbortSignal.timeout(HEALTHZ_TIMEOUT_MS));
    return { ok, status, ...(missing ? { missing } : {}) };
  } catch (error) {
    return { ok: false, error: errorMessage(error).split("\n")[0] };
  }
}

/** The self-test output, reduced to whether it passed and each failed check in one line. */
export function summarizeSelfTest(selfTest: SelfTestOutput): SelfTestSummary {
  if ("skipped" in selfTest) return { skipped: true };
  const failed = [...Object.entries(selfTest.computers ?? {}), ...Object.entries(selfTest.startTabs ?? {})].flatMap(
    ([computer, checks]) =>
      checks.filter((c) => !c.ok).map((c) => `computer ${computer}: ${c.check} (${c.url}): ${c.detail}`),
  );
  return { passed: selfTest.passed, finishedAt: selfTest.finishedAt, failed };
}

/** A site-proxy log's size, in bytes, lines and the request and refusal lines it holds. */
export function proxyLogSize(text: string): ProxyLogSize {
  const records = parseLiveSiteProxyLog(text);
  return {
    bytes: Buffer.byteLength(text),
    lines: records.length,
    requests: records.filter((r) => r.event === "request").length,
    refused: records.filter((r) => r.event === "refused").length,
  };
}

/** What is not healthy in a status, one line each naming it; empty when all is well. */
export function statusProblems(status: Omit<StackStatus, "healthy" | "problems">): string[] {
  const problems: string[] = [];
  const { healthz } = status.gateway;
  for (const container of status.containers) {
    // A container whose own health check has not run yet (a site image's may wait 30 s) is judged as the deploy
    // judged it: by the gateway's /healthz, which answers ready only when every site server answers /ready.
    if (container.health === "starting" && container.state === "running" && healthz.ok) continue;
    const problem = containerProblem(container);
    if (problem === undefined) continue;
    // A pod says which part of the env it is: a name alone does not tell an operator that a capture went with it.
    const part = container.kind === "pod" ? partOf(container) : undefined;
    problems.push(`${container.kind ?? "container"} ${container.name}${part ? ` (${part})` : ""}: ${problem}`);
  }
  if (!healthz.ok) {
    const why =
      healthz.error ??
      [
        `HTTP ${healthz.status}`,
        ...(healthz.missing ?? []).map((m) => `${m.site}${m.role ? ` ${m.role}` : ""} ${m.detail}`),
      ].join("; ");
    problems.push(`gateway ${status.gateway.url}: /healthz does not answer ready (${why})`);
  }
  for (const [computer, state] of Object.entries(status.computers))
    if (state.error !== undefined) problems.push(`computer ${computer}: DevTools did not answer (${state.error})`);
  if ("passed" in status.selfTest && !status.selfTest.passed)
    problems.push(`self-test failed: ${status.selfTest.failed.join("; ") || "see the selfTest output"}`);
  const { captures, proxyLogs } = status.evidence;
  if (captures !== undefined && "error" in captures) problems.push(`captures: the listing failed (${captures.error})`);
  for (const [computer, log] of Object.entries(proxyLogs))
    if ("error" in log) problems.push(`computer ${computer}'s proxy log: ${log.error}`);
  return problems;
}

function firstLine(error: unknown): string {
  return errorMessage(error).split("\n")[0];
}

/** `multienv status`: one deployed stack's health and evidence so far. */
export async function stackStatus(
  stack: string,
  accessOf: AccessOf,
  options: OperatorOptions = {},
): Promise<StackStatus> {
  const state = await readStateStack(stack, { ...options, deployed: true });
  const outputs: StackOutputs = readOutputs(outputMapOf(state));
  const [containers, access] = await Promise.all([runtimeOf(state.resources, state.outputs).states(), accessOf(stack)]);
  try {
    return await statusThrough(stack, outputs, containers, access);
  } finally {
    await access.close?.();
  }
}

async function statusThrough(
  stack: string,
  outputs: StackOutputs,
  containers: ContainerState[],
  access: GatewayAccess,
): Promise<StackStatus> {
  const computers = Object.keys(outputs.computers);
  const gateway = gatewayClient(access);
  const [healthz, tabs, logs, captures, takeovers] = await Promise.all([
    access.unreachable !== undefined
      ? Promise.resolve({ ok: false, error: access.unreachable })
      : gatewayHealth(gateway),
    Promise.all(
      computers.map(async (computer): Promise<[string, ComputerStatus]> => {
        try {
          return [computer, { tabs: await computerTabs(access, computer) }];
        } catch (error) {
          return [computer, { tabs: [], error: firstLine(error) }];
        }
      }),
    ),
    Promise.all(
      computers.map(async (computer): Promise<[string, ProxyLogSize | { error: string }]> => {
        try {
          return [computer, proxyLogSize(await gateway.proxyLog(computer, AbortSignal.timeout(HEALTHZ_TIMEOUT_MS)))];
        } catch (error) {
          return [computer, { error: firstLine(error) }];
        }
      }),
    ),
    outputs.captureTraffic
      ? gateway.captures(AbortSignal.timeout(HEALTHZ_TIMEOUT_MS)).then(
          (files) => ({ count: files.length, bytes: files.reduce((sum, f) => sum + f.bytes, 0), files }),
          (error: unknown) => ({ error: firstLine(error) }),
        )
      : Promise.resolve(undefined),
    // A gateway older than takeovers has no such route: its computers are shown without.
    gateway.takeovers().then(
      (listing) => listing.computers,
      () => ({}) as Record<string, TakeoverState>,
    ),
  ]);
  const partial: Omit<StackStatus, "healthy" | "problems"> = {
    stack,
    containers,
    gateway: { url: outputs.gatewayUrl, healthz },
    computers: Object.fromEntries(
      tabs.map(([computer, status]) => {
        const takeover = takeovers[computer];
        const busy = takeover !== undefined && (takeover.taken !== undefined || takeover.request !== undefined);
        return [computer, busy ? { ...status, takeover } : status];
      }),
    ),
    selfTest: summarizeSelfTest(outputs.selfTest),
    evidence: {
      captureTraffic: outputs.captureTraffic,
      ...(captures !== undefined ? { captures } : {}),
      proxyLogs: Object.fromEntries(logs),
    },
  };
  const problems = statusProblems(partial);
  const { stack: _stack, ...rest } = partial;
  return { stack, healthy: problems.length === 0, problems, ...rest };
}

/** The deployed stack's computers (from the state), checking `computer` is one of them when given. */
export async function computersOf(
  stack: string,
  computer: string | undefined,
  options: StateOptions = {},
): Promise<string[]> {
  const state = await readStateStack(stack, { ...options, deployed: true });
  const all = Object.keys(readOutputs(outputMapOf(state)).computers);
  if (computer === undefined) return all;
  if (!all.includes(computer))
    throw new RunnerError(
      `stack ${stack}: no computer ${computer} (its computers: ${all.join(", ") || "none"}); pass one of them with --computer`,
    );
  return [computer];
}

export interface ScreenshotOptions extends OperatorOptions {
  /** One computer (default: every computer of the stack). */
  computer?: string;
  /** Where the PNGs go (default: artifacts/<stack>/screenshots). */
  outDir?: string;
}

/** `multienv screenshot`: a PNG of each computer's visible tab. */
export async function screenshotStack(
  stack: string,
  accessOf: AccessOf,
  options: ScreenshotOptions = {},
): Promise<Screenshot[]> {
  const computers = await computersOf(stack, options.computer, options);
  const access = await accessOf(stack);
  try {
    return await screenshotsThrough(stack, computers, access, options);
  } finally {
    await access.close?.();
  }
}

async function screenshotsThrough(
  stack: string,
  computers: string[],
  access: GatewayAccess,
  options: ScreenshotOptions,
): Promise<Screenshot[]> {
  const outDir = resolve(
    options.outDir ?? join(options.artifactsDir ?? artifactsDirOf(projectDirOf(options), stack), "screenshots"),
  );
  await mkdir(outDir, { recursive: true });
  const at = new Date();
  return Promise.all(
    computers.map(async (computer) => {
      let shot;
      try {
        shot = await screenshotComputer(access, computer);
      } catch (error) {
        throw new RunnerError(`stack ${stack}: computer ${computer}: no screenshot: ${firstLine(error)}`);
      }
      const file = join(outDir, screenshotFileName(computer, at));
      await writeFile(file, shot.png);
      return { computer, file, bytes: shot.png.length, url: shot.url, title: shot.title };
    }),
  );
}

/** `multienv outputs`, secrets hidden: read from the state, needing neither the CLI nor the passphrase. */
export async function stateOutputs(stack: string, options: StateOptions = {}): Promise<Record<string, unknown>> {
  return (await readStateStack(stack, { ...options, deployed: true })).outputs;
}
