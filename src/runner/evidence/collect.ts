// Collection: a run's captures and evidence, stored under artifacts/<stack>/.
// Every capture traffic/v1 lists is downloaded to traffic/<name> (atomically), checked against its listed size
// and recorded with its SHA-256 in run.json; a capture already stored complete is skipped, so collecting again
// (by `collect`, by `down`, or by the collector's delete step during `pulumi destroy`) only fetches what is new.
// Each computer's site-proxy log is stored too and gives run.json its `publicHostsContacted`.
import { readReplayCounters } from "./replay-counters";
import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import { mkdir, readFile, rename, rm, stat } from "node:fs/promises";
import { join } from "node:path";
import { gatewayClient } from "../../protocol/gateway-client";
import { episodeOf } from "../../protocol/site-proxy";
import { captureGaps, parseCaptureName, servesTraffic, type TrafficCapture } from "../../protocol/traffic";
import { PROXY_LOGS_DIR, TRAFFIC_DIR, temporaryPathFor, writeFileAtomic } from "./artifacts";
import { errorMessage, RunnerError } from "../errors";
import { fetchProxyLog, publicHostsInLog } from "./proxy-logs";
import { lossLine, storeRequestLog } from "./request-logs";
import type { GatewayAccess } from "../stack/outputs";
import {
  readRunRecord,
  withReproducibility,
  writeRunRecord,
  type CaptureErrorRecord,
  type CaptureRecord,
  type ComputerEvidence,
  type DeployedMarks,
  type RunRecord,
  type LostPartRecord,
} from "./run-record";

/** Collection failed under --fail-on-capture-error; `what` says which captures and why. */
export class CaptureCollectionError extends RunnerError {
  constructor(
    readonly stackName: string,
    readonly what: string,
  ) {
    super(`${what}; run \`multienv collect ${stackName}\` again while the env is up`);
  }
}

export interface CollectOptions {
  stack: string;
  access: GatewayAccess;
  /** artifacts/<stack> */
  artifactsDir: string;
  /** The stack's live marks; when absent the record keeps what an earlier collection wrote. */
  marks?: DeployedMarks;
  /** Whether the env captures traffic; when absent the gateway's card says (traffic/v1 declared or not). */
  captureTraffic?: boolean;
  /** The episode whose evidence to read (default: the one under way). */
  episode?: number;
  /** Computers whose site-proxy logs are evidence. */
  computers: string[];
  /** Synthetic sites' domain patterns (connections to them are not public). */
  syntheticDomains: string[];
  /** Replayed live sites: their replay servers' counters go into run.json. */
  replayedSites?: string[];
  /** Fail (throw, after writing run.json) when a capture could not be collected. Default: warn and go on. */
  failOnCaptureError?: boolean;
  /** Progress and warnings, one line each. */
  log?: (line: string) => void;
  /** The parts found lost before collecting (`down`): recorded in run.json, each once. */
  lostParts?: LostPartRecord[];
}

export interface CollectResult {
  record: RunRecord;
  /** One line per computer whose request log lost entries of the episode before this collection read it. */
  evidenceLost: string[];
  downloaded: string[];
  skipped: string[];
  captureErrors: CaptureErrorRecord[];
}

async function sha256Of(path: string): Promise<string> {
  const hash = createHash("sha256");
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
  return hash.digest("hex");
}

async function sizeOf(path: string): Promise<number | undefined> {
  try {
    return (await stat(path)).size;
  } catch {
    return undefined;
  }
}

/**
 * True when `listed` is stored complete: recorded with the same listed size and time, and the file is there at the
 * recorded size.
 */
async function isStored(listed: TrafficCapture, record: RunRecord, artifactsDir: string): Promise<boolean> {
  const stored = record.captures.find((c) => c.name === listed.name);
  if (stored === undefined || stored.listedBytes !== listed.bytes || stored.modified !== listed.modified) return false;
  return (await sizeOf(join(artifactsDir, stored.file))) === stored.bytes;
}

/** The listed captures not yet stored complete in `artifactsDir`. */
export async function uncollectedCaptures(
  listing: TrafficCapture[],
  record: RunRecord,
  artifactsDir: string,
): Promise<TrafficCapture[]> {
  const pending: TrafficCapture[] = [];
  for (const listed of listing) if (!(await isStored(listed, record, artifactsDir))) pending.push(listed);
  return pending;
}

/** Downloads one capture to traffic/<name> (temporary file, then rename) and returns its record. */
async function downloadCapture(
  access: GatewayAccess,
  listed: TrafficCapture,
  artifactsDir: string,
): Promise<CaptureRecord> {
  if (parseCaptureName(listed.name) === undefined)
    throw new Error(`the listing names ${JSON.stringify(listed.name)}, which is not a capture file name; not stored`);
  const file = `${TRAFFIC_DIR}/${listed.name}`;
  const destination = join(artifactsDir, file);
  await mkdir(join(artifactsDir, TRAFFIC_DIR), { recursive: true });
  const temporary = temporaryPathFor(destination);
  try {
    const { bytes } = await gatewayClient(access).downloadCapture(listed.name, temporary);
    // The newest file is still being written: it may have grown since it was listed, never shrunk.
    if (bytes < listed.bytes) {
      throw new Error(
        `capture ${listed.name}: got ${bytes} bytes but the listing said ${listed.bytes} (rotated or cut while downloading); collect again`,
      );
    }
    const sha256 = await sha256Of(temporary);
    await rename(temporary, destination);
    return {
      name: listed.name,
      site: listed.site,
      container: listed.container,
      run: listed.run,
      bytes,
      listedBytes: listed.bytes,
      modified: listed.modified,
      sha256,
      file,
      collectedAt: new Date().toISOString(),
    };
  } catch (error) {
    await rm(temporary, { force: true });
    throw error;
  }
}

const message = errorMessage;

/** Collects captures into `record` (mutated copy returned) and says what happened. */
async function collectCapturesInto(options: CollectOptions, record: RunRecord) {
  const { access, artifactsDir, log = () => {} } = options;
  const downloaded: string[] = [];
  const skipped: string[] = [];
  const errors: CaptureErrorRecord[] = [];
  const at = () => new Date().toISOString();
  let listing: TrafficCapture[];
  try {
    listing = await gatewayClient(access).captures();
  } catch (error) {
    errors.push({ error: message(error), at: at() });
    return { record: { ...record, captureErrors: errors }, downloaded, skipped, errors };
  }
  const pending = new Set((await uncollectedCaptures(listing, record, artifactsDir)).map((c) => c.name));
  const captures = new Map(record.captures.map((c) => [c.name, c]));
  for (const listed of listing) {
    if (!pending.has(listed.name)) {
      skipped.push(listed.name);
      continue;
    }
    try {
      const stored = await downloadCapture(access, listed, artifactsDir);
      captures.set(stored.name, stored);
      downloaded.push(stored.name);
      log(`collected ${stored.file} (${stored.bytes} bytes, sha256 ${stored.sha256.slice(0, 12)}…)`);
    } catch (error) {
      errors.push({ name: listed.name, error: message(error), at: at() });
    }
  }
  // Gaps seen earlier stay (their files may have rotated away since); a gap is one per container and run.
  const gaps = new Map((record.captureGaps ?? []).map((g) => [`${g.container} ${g.run}`, g]));
  for (const gap of captureGaps(listing)) {
    const key = `${gap.container} ${gap.run}`;
    if (!gaps.has(key))
      log(
        `warning: the capture of ${gap.container} stopped at ${gap.endedAt} (its container restarted) and resumed by ${gap.resumedBy}: nothing was recorded between`,
      );
    gaps.set(key, gap);
  }
  return {
    record: {
      ...record,
      captures: [...captures.values()],
      captureErrors: errors,
      ...(gaps.size > 0 ? { captureGaps: [...gaps.values()] } : {}),
    },
    downloaded,
    skipped,
    errors,
  };
}

/**
 * A log normally only grows, so the new fetch replaces the stored copy. When it does not continue the stored
 * copy (the proxy's container was replaced and started a new log), the stored copy is kept beside it.
 */
async function keepReplacedLog(path: string, text: string): Promise<void> {
  let stored: string;
  try {
    stored = await readFile(path, "utf8");
  } catch {
    return;
  }
  if (!text.startsWith(stored))
    await rename(path, path.replace(/\.jsonl$/, `.until-${new Date().toISOString().replace(/[:.]/g, "-")}.jsonl`));
}

/**
 * The computer's request log, stored as a HAR document of the exchanges `logText` (the episode's proxy log lines)
 * names; nothing when the env keeps none, and the error when it could not be read (the run goes on).
 */
async function requestLogOf(
  options: CollectOptions,
  computer: string,
  logText: string,
): Promise<Pick<ComputerEvidence, "requests" | "requestsError">> {
  const { access, artifactsDir, log = () => {} } = options;
  try {
    const stored = await storeRequestLog(artifactsDir, {
      gatewayUrl: access.gatewayUrl,
      token: access.controlToken,
      computer,
      episodeLog: logText,
      wholeLogAfter: () => fetchProxyLog(access.gatewayUrl, access.controlToken, computer),
    });
    if (stored === undefined) return {};
    log(
      `collected ${stored.file} (${stored.entries} exchanges, ${stored.bytes} bytes, sha256 ${stored.sha256.slice(0, 12)}…)`,
    );
    return { requests: stored };
  } catch (error) {
    log(`warning: stack ${options.stack}: ${message(error)}; the request log of computer ${computer} is not stored`);
    return { requestsError: message(error) };
  }
}

/** Fetches each computer's site-proxy log, stores it, and records the public hosts it shows. */
async function gatherEvidenceInto(options: CollectOptions, record: RunRecord): Promise<RunRecord> {
  const { access, artifactsDir, log = () => {} } = options;
  const evidence = { ...record.evidence };
  // Hosts seen earlier stay: a log fetched now may be shorter (a replaced proxy) but what happened, happened.
  const hosts = new Set(record.publicHostsContacted);
  for (const computer of options.computers) {
    const fetchedAt = new Date().toISOString();
    try {
      // The episode's lines alone: between the proxy's `episode` marks (a self-test's, a reset's).
      const text = episodeOf(await fetchProxyLog(access.gatewayUrl, access.controlToken, computer), options.episode);
      const logFile = `${PROXY_LOGS_DIR}/${computer}.jsonl`;
      await keepReplacedLog(join(artifactsDir, logFile), text);
      await writeFileAtomic(join(artifactsDir, logFile), text);
      const found = publicHostsInLog(text, options.syntheticDomains);
      const previous = evidence[computer]?.publicHosts ?? [];
      const publicHosts = [...new Set([...previous, ...found.publicHosts])].sort();
      publicHosts.forEach((h) => hosts.add(h));
      evidence[computer] = {
        log: logFile,
        connections: found.connections,
        publicHosts,
        fetchedAt,
        ...(await requestLogOf(options, computer, text)),
      };
    } catch (error) {
      log(
        `warning: stack ${options.stack}: ${message(error)}; the run is marked not reproducible since its traffic is unknown`,
      );
      evidence[computer] = {
        ...evidence[computer],
        connections: evidence[computer]?.connections ?? 0,
        publicHosts: evidence[computer]?.publicHosts ?? [],
        error: message(error),
        fetchedAt,
      };
    }
  }
  return { ...record, evidence, publicHostsContacted: [...hosts].sort() };
}

/**
 * Collects a run: captures (when the env captures traffic), each computer's site-proxy log, and run.json with
 * the live marks and reproducibility. Capture failures are warnings unless `failOnCaptureError`, in which case
 * this throws a RunnerError once run.json is written (so what did arrive is still recorded).
 */
export async function collectRun(options: CollectOptions): Promise<CollectResult> {
  const { stack, artifactsDir, log = () => {} } = options;
  let record = await readRunRecord(artifactsDir, stack);
  if (options.marks) record = { ...record, ...options.marks };
  if (options.lostParts !== undefined && options.lostParts.length > 0) {
    const known = new Set((record.lostParts ?? []).map((p) => p.name));
    record = {
      ...record,
      lostParts: [...(record.lostParts ?? []), ...options.lostParts.filter((p) => !known.has(p.name))],
    };
  }

  let captureTraffic = options.captureTraffic;
  let result = { record, downloaded: [] as string[], skipped: [] as string[], errors: [] as CaptureErrorRecord[] };
  if (captureTraffic === undefined) {
    try {
      captureTraffic = servesTraffic(await gatewayClient(options.access).card());
    } catch (error) {
      // Unknown whether it captures: treat as capturing, so the failure is reported rather than skipped.
      captureTraffic = true;
      result.errors.push({ error: message(error), at: new Date().toISOString() });
    }
  }
  record = { ...record, captureTraffic };
  if (captureTraffic && result.errors.length === 0) result = await collectCapturesInto(options, record);
  else result = { ...result, record: { ...record, captureErrors: result.errors } };

  record = withReproducibility(await gatherEvidenceInto(options, result.record));
  if (options.replayedSites !== undefined && options.replayedSites.length > 0)
    record = {
      ...record,
      replay: await readReplayCounters(options.access.gatewayUrl, options.access.controlToken, options.replayedSites),
    };
  await writeRunRecord(artifactsDir, record);

  if (result.errors.length > 0) {
    const unlisted = result.errors.find((e) => e.name === undefined);
    const line =
      unlisted !== undefined
        ? `stack ${stack}: captures not collected: the gateway did not list them (${unlisted.error})`
        : `stack ${stack}: ${result.errors.length} capture(s) not collected (${result.errors.map((e) => `${e.name}: ${e.error}`).join("; ")})`;
    if (options.failOnCaptureError) throw new CaptureCollectionError(stack, line);
    log(`warning: ${line}; the run goes on (pass --fail-on-capture-error to make this fail)`);
  }
  const evidenceLost = options.computers.flatMap((computer) => {
    const requests = record.evidence[computer]?.requests;
    const line = requests && lossLine(computer, requests);
    return line === undefined ? [] : [`stack ${stack}: ${line}`];
  });
  for (const line of evidenceLost) log(`warning: ${line}`);
  return {
    record,
    downloaded: result.downloaded,
    skipped: result.skipped,
    captureErrors: result.errors,
    evidenceLost,
  };
}
