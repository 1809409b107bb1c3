// `artifacts/<stack>/run.json`: what a run leaves behind besides its files.
// The live marks come from the stack's outputs (what was deployed: live sites, computers reaching the public web);
// `publicHostsContacted` comes from the computers' site-proxy logs (what actually happened). A run is reproducible
// only when both say so.
import type { ReplayCounters } from "../../protocol/replay-server-config";
import type { ReplayEvidence } from "./replay-counters";
import type { SelfTestOutput } from "../../plan/stack-outputs";
import type { CaptureGap } from "../../protocol/traffic";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import type { LiveReason, LiveWebsiteMark } from "../../plan/types";
import { RUN_RECORD_FILE, writeFileAtomic } from "./artifacts";
import type { TakeoverRecord } from "./takeover-record";

/** One collected capture: where it is, what the gateway listed, and the digest of the bytes stored. */
export interface CaptureRecord {
  name: string;
  site: string;
  container: string;
  /** The run of the container's capture that wrote it (a new run after each restart of the website container). */
  run?: number;
  /** Bytes stored (equal to the listed size, or more when the file grew between listing and download). */
  bytes: number;
  /** The size the listing gave. */
  listedBytes: number;
  /** Last modification as listed. */
  modified: string;
  sha256: string;
  /** Relative to the run's artifacts directory: `traffic/<name>`. */
  file: string;
  collectedAt: string;
}

export interface CaptureErrorRecord {
  /** The capture, or undefined when the listing itself failed. */
  name?: string;
  error: string;
  at: string;
}

/** One computer's request log as stored: a HAR document of the episode's exchanges. */
export interface RequestLogRecord {
  /** Relative to the run's artifacts directory: `requests/<computer>.har`. */
  file: string;
  bytes: number;
  sha256: string;
  /** Entries (exchanges) in it. */
  entries: number;
  /**
   * The episode's exchanges whose entries the site proxy's rotation removed before they were collected (the HAR says
   * so too); absent when none is missing.
   */
  missing?: number;
}

export interface ComputerEvidence {
  /** Relative path of the stored log: `proxy-logs/<computer>.jsonl`. */
  log?: string;
  /** `connection` records in the log. */
  connections: number;
  publicHosts: string[];
  /** Why the log could not be fetched, when it could not. */
  error?: string;
  fetchedAt: string;
  /** The computer's request log, when the env keeps one. */
  requests?: RequestLogRecord;
  /** Why the request log could not be fetched, when it could not. */
  requestsError?: string;
}

/** A deploy whose self-test failed (its outputs are not saved): the lines of its error, one per failing check. */
export interface FailedSelfTestRecord {
  passed: false;
  failedAt: string;
  /** `computer <name>: <check>: <what was seen>`, as `multienv up` printed them. */
  failures: string[];
}

/** An episode that ended with a reset. */
export interface EpisodeRecord {
  episode: number;
  endedAt: string;
  /** Whether its captures and proxy logs were collected before the reset. */
  collected: boolean;
  /** Where they are, relative to the run's artifacts directory: `episodes/<n>`. */
  dir?: string;
  reproducible?: boolean;
  publicHostsContacted?: string[];
  captures?: number;
  /** Each computer's request log of the episode, as collected and moved: `episodes/<n>/requests/<computer>.har`. */
  requests?: Record<string, RequestLogRecord>;
  /** Each replayed site's exchanges in the episode, as its replay server counted them when the reset ended it. */
  replay?: Record<string, ReplayCounters>;
  /** A person took a computer over in this episode (evidence/takeovers.ts). */
  humanAssisted?: boolean;
  takeovers?: TakeoverRecord[];
}

/**
 * A part of the env that was lost when its evidence was collected (a pod on a node that is not Ready): what it held
 * was not collected, and why.
 */
export interface LostPartRecord {
  /** The pod's (or container's) name. */
  name: string;
  /** The part it is (`site shop's server, with its capture`), when its labels say. */
  part?: string;
  node?: string;
  /** Why it is lost (its node's Ready condition). */
  why: string;
  /** What of the run's evidence it held and could not give (`its captures`); empty when it held none. */
  notCollected: string[];
  /** When it was found lost. */
  at: string;
}

export interface RunRecord {
  stack: string;
  updatedAt: string;
  /** The episode under way: 1 from the deploy, one more after each reset. */
  episode?: number;
  /** When the episode under way began (a reset); absent for the deploy's own episode. */
  episodeStartedAt?: string;
  /** What the last deploy's self-test found, or that it was skipped; a failed one, each failing check's line. */
  selfTest?: SelfTestOutput | FailedSelfTestRecord;
  /** The episodes that ended with a reset, first first. */
  episodes?: EpisodeRecord[];
  /** True when the env is live: it deploys a live site served live, or a computer that reaches the public web. */
  live: boolean;
  /** Why the env is live (the stack's `liveReasons` output); absent in a record of a deploy older than it. */
  liveReasons?: LiveReason[];
  liveWebsites: LiveWebsiteMark[];
  /**
   * False when the env is live (a live site, a computer reaching the public web), a public host was contacted, or
   * the evidence is incomplete.
   */
  reproducible: boolean;
  /** Why `reproducible` is false, one reason per line; empty when it is true. */
  notReproducibleBecause: string[];
  /** Every public host any computer's site proxy connected to, sorted. */
  publicHostsContacted: string[];
  evidence: Record<string, ComputerEvidence>;
  captureTraffic: boolean;
  captures: CaptureRecord[];
  /** The latest collection's failures (cleared by a collection that succeeds). */
  captureErrors: CaptureErrorRecord[];
  /** Each replayed site's exchanges this episode (exact, fuzzy, missed), as of the latest collection. */
  replay?: Record<string, ReplayEvidence>;
  /** Where a capture stopped and started again (its website container restarted): nothing was recorded between. */
  captureGaps?: CaptureGap[];
  /** A person took a computer over in the episode under way, or in an earlier one (evidence/takeovers.ts). */
  humanAssisted?: boolean;
  /** Every takeover of the run, each with its episode. */
  takeovers?: TakeoverRecord[];
  /** The parts found lost by a collection (`down` with a node lost), each once. */
  lostParts?: LostPartRecord[];
}

export function emptyRunRecord(stack: string): RunRecord {
  return {
    stack,
    updatedAt: new Date().toISOString(),
    live: false,
    liveWebsites: [],
    reproducible: true,
    notReproducibleBecause: [],
    publicHostsContacted: [],
    evidence: {},
    captureTraffic: false,
    captures: [],
    captureErrors: [],
  };
}

/** The run record in `artifactsDir`, or an empty one when none was written yet. */
export async function readRunRecord(artifactsDir: string, stack: string): Promise<RunRecord> {
  let text: string;
  try {
    text = await readFile(join(artifactsDir, RUN_RECORD_FILE), "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return emptyRunRecord(stack);
    throw error;
  }
  return { ...emptyRunRecord(stack), ...(JSON.parse(text) as Partial<RunRecord>) };
}

export async function writeRunRecord(artifactsDir: string, record: RunRecord): Promise<void> {
  const stamped = { ...record, updatedAt: new Date().toISOString() };
  await writeFileAtomic(join(artifactsDir, RUN_RECORD_FILE), JSON.stringify(stamped, null, 2) + "\n");
}

/** Records in run.json that the last deploy's self-test failed, with each failing check's line. */
export async function recordFailedSelfTest(artifactsDir: string, stack: string, failures: string[]): Promise<void> {
  const record = await readRunRecord(artifactsDir, stack);
  await writeRunRecord(artifactsDir, {
    ...record,
    selfTest: { passed: false, failedAt: new Date().toISOString(), failures },
  });
}

/** The marks the stack's outputs give (what was deployed). */
export interface DeployedMarks {
  live: boolean;
  /** Absent for an env deployed before its outputs named them: its live sites are the reasons then. */
  liveReasons?: LiveReason[];
  liveWebsites: LiveWebsiteMark[];
  captureTraffic: boolean;
}

/**
 * `record` with `reproducible` and its reasons recomputed from the live marks and the evidence: a live site, a
 * computer that reaches the public web, any public host contacted, or a computer whose log could not be read each
 * make the run not reproducible.
 */
export function withReproducibility(record: RunRecord): RunRecord {
  const reasons: string[] = [];
  if (record.liveReasons !== undefined) for (const reason of record.liveReasons) reasons.push(reason.why);
  else
    for (const site of record.liveWebsites)
      reasons.push(`live website ${site.name} (${site.domains.join(", ")}) was deployed`);
  if (record.live && reasons.length === 0) reasons.push("the env was deployed live");
  for (const host of record.publicHostsContacted) reasons.push(`a computer contacted the public host ${host}`);
  for (const [computer, evidence] of Object.entries(record.evidence)) {
    if (evidence.error !== undefined)
      reasons.push(
        `the site-proxy log of computer ${computer} could not be read, so its traffic is unknown: ${evidence.error}`,
      );
  }
  return { ...record, reproducible: reasons.length === 0, notReproducibleBecause: reasons };
}
