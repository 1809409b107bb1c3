// `reset`: puts a deployed env back to the state right after `up`, without redeploying, so an evaluation
// harness runs episode after episode on one env. In order:
//   1. each computer's browser goes on with a fresh profile at once: its launcher ends the episode's Chromium (its
//      pages, service workers and connections with it), deletes its profile (everything the episode left in the
//      browser, for every scheme, host and port: cookies, storage, service workers, HSTS, permissions, history,
//      downloads, caches) and puts in its place its standby, a Chromium it started ahead on a new, empty profile (or,
//      with no standby that answers, starts one then), at a blank tab. Its DevTools URL stays the same: a client
//      connected to the old Chromium is disconnected, and reconnecting there reaches the new one. Then every
//      connection its site proxy still holds is ended, so the proxy's log holds the whole episode, and the log is
//      marked, so the lines after the mark are the next episode's. When asked, the finished episode is collected
//      (captures, proxy logs, run.json) and what was collected of it moves to artifacts/<stack>/episodes/<n>/; a
//      collection that fails stops the reset there, the sites and captures as they were;
//   2. each site's data is emptied: its card's website/v1 `reset` operation through the gateway, or, for a
//      site that declares none, a restart of its server container (on the kubernetes target: its server pod
//      recreated);
//   3. capture files start over: on docker in place (the sidecar's tcpdump ends and a new one begins, its files gone),
//      else each sidecar's files are removed and the sidecar restarted (on the kubernetes target: each website pod
//      recreated, its captures' emptyDir with it);
//   4. once 2 and 3 are done, the browsers open their start tabs: the next episode's first requests meet emptied
//      sites and are in its captures;
//   5. the next episode begins: run.json counts it, and its evidence is each proxy log after the mark of 1.
// Sign-ins are gone, as after `up`: sign in again for the next episode.
// The containers (or pods) are found in the stack's state, and restarted by the target's runtime
// (../targets/runtimes.ts), so this works on every target. On the kubernetes target the gateway is reached through a
// port-forward for the reset's duration.
import { mkdir, readdir, rename, rm } from "node:fs/promises";
import { join } from "node:path";
import type { OutputMap } from "@pulumi/pulumi/automation";
import { gatewayClient, GatewayRequestError } from "../../protocol/gateway-client";
import { BROWSER_OPERATION_PATHS, type FreshProfileAnswer, type StartTabsAnswer } from "../../protocol/browser-config";
import { findExtension, parseCard, WEBSITE_OPERATIONS, WEBSITE_V1_URN, type GatewayCard } from "../../protocol/card";
import { PROXY_LOGS_DIR, REQUESTS_DIR, TRAFFIC_DIR } from "../evidence/artifacts";
import { collectRun, type CollectResult } from "../evidence/collect";
import { collectOptionsFor, hasDeployedEnv } from "./down";
import { errorMessage, RunnerError } from "../errors";
import { endProxyConnections } from "../evidence/proxy-logs";
import { resetReplays } from "../evidence/replay-counters";
import { readOutputs, withGatewayAccess, type GatewayAccess } from "../stack/outputs";
import {
  readRunRecord,
  writeRunRecord,
  type EpisodeRecord,
  type RequestLogRecord,
  type RunRecord,
} from "../evidence/run-record";
import { runtimeOf, type EnvRuntime } from "../targets/runtimes";
import { episodeTakeovers } from "../evidence/takeovers";

/** The part of the Automation API's Stack that reset uses. */
export interface ResetSeam {
  readonly name: string;
  outputs(): Promise<OutputMap>;
  exportStack(): Promise<{
    deployment: { resources?: { type: string; inputs?: Record<string, unknown>; outputs?: Record<string, unknown> }[] };
  }>;
}

export interface ResetOptions {
  artifactsDir: string;
  /** Collect the finished episode before resetting (into episodes/<n>/); otherwise its evidence is let go. */
  collect?: boolean;
  failOnCaptureError?: boolean;
  log?: (line: string) => void;
}

export interface ResetResult {
  /** The episode that begins now (1 is the deploy's own). */
  episode: number;
  /** The finished episode's collection, when asked for. */
  collected?: CollectResult;
  /** How each site's data was emptied. */
  sites: Record<string, "reset" | "restarted">;
  /** Each computer's browser: the profile it is on now (1 was the deploy's), the start tabs it opened. */
  computers: Record<string, { profile: number; startTabs: number }>;
  seconds: number;
}

async function waitReady(access: GatewayAccess, site: string, timeoutMs = 30_000): Promise<void> {
  const gateway = gatewayClient(access);
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await gateway.siteReady(site)) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`site ${site} was not ready again within ${timeoutMs / 1000} s of its restart`);
}

/** The path of the site's declared `reset` operation (its card's website/v1), if it declares one. */
function resetOperationOf(card: GatewayCard | undefined, site: string): string | undefined {
  const siteCard = card?.sites?.[site] ? parseCard(card.sites[site]) : undefined;
  return findExtension(siteCard, WEBSITE_V1_URN)?.paths?.[WEBSITE_OPERATIONS.reset];
}

/** Empties a site's data through its declared `reset` operation. */
async function resetSite(access: GatewayAccess, site: string, path: string): Promise<void> {
  await gatewayClient(access).siteOperation(`site ${site}: its reset operation (POST ${path})`, path);
}

/**
 * Steps 2 and 3: each site emptied (its reset operation, else its server restarted by the runtime, then waited for
 * until the gateway sees it ready), and the captures started over.
 */
async function startSitesOver(
  access: GatewayAccess,
  runtime: EnvRuntime,
  card: GatewayCard | undefined,
  sites: string[],
  captures: boolean,
  phase: (what: string) => void,
): Promise<ResetResult["sites"]> {
  const how: ResetResult["sites"] = {};
  const restarted: string[] = [];
  const operations: (() => Promise<void>)[] = [];
  for (const site of sites) {
    const path = resetOperationOf(card, site);
    if (path === undefined) {
      restarted.push(site);
      how[site] = "restarted";
    } else {
      operations.push(() =>
        resetSite(access, site, path).then(() => phase(`site ${site} emptied (its reset operation)`)),
      );
      how[site] = "reset";
    }
  }
  if (captures && runtime.capturesStartSitesOver) {
    await runtime.startOver({ servers: restarted, captures });
    // A new pod is ready some moments before its Service routes to it: the gateway's own /ready says when it does.
    await Promise.all(sites.map((site) => waitReady(access, site)));
    await Promise.all(operations.map((operation) => operation()));
  } else {
    await Promise.all([
      ...operations.map((operation) => operation()),
      runtime.startOver({ servers: restarted, captures, done: phase }).then(() => {
        if (restarted.length > 0) phase(`servers of ${restarted.join(", ")} restarted`);
        if (captures) phase("captures started over");
      }),
    ]);
  }
  await Promise.all(restarted.map((site) => waitReady(access, site)));
  return how;
}

/**
 * One of a computer's browser launcher's operations (beside DevTools, behind the gateway's CDP route): `doing` names it
 * in an error.
 */
async function browserOperation<T>(access: GatewayAccess, computer: string, path: string, doing: string): Promise<T> {
  try {
    return (await gatewayClient(access).browserOperation(
      computer,
      path,
      `computer ${computer}'s browser did not ${doing}`,
    )) as T;
  } catch (error) {
    if (error instanceof GatewayRequestError && error.status === 404)
      throw new RunnerError(
        `computer ${computer}'s browser cannot ${doing} (its image is from before that, or does not run the multienv browser launcher); run \`multienv up\` to deploy the current browser image`,
      );
    throw new RunnerError(errorMessage(error));
  }
}

/**
 * Moves what was collected of an episode (captures, proxy logs) into episodes/<n>/ of the run; undefined when nothing
 * was.
 */
async function archiveEpisode(artifactsDir: string, episode: number): Promise<string | undefined> {
  const relative = join("episodes", String(episode));
  const dir = join(artifactsDir, relative);
  let moved = false;
  for (const sub of [TRAFFIC_DIR, PROXY_LOGS_DIR, REQUESTS_DIR]) {
    const from = join(artifactsDir, sub);
    if ((await readdir(from).catch(() => [])).length === 0) continue;
    if (!moved) {
      await rm(dir, { recursive: true, force: true });
      await mkdir(dir, { recursive: true });
      moved = true;
    }
    await rename(from, join(dir, sub));
  }
  return moved ? relative : undefined;
}

/** The request logs `record` lists, where archiveEpisode moved them (under `archived`). */
function episodeRequestLogs(record: RunRecord, archived: string): Record<string, RequestLogRecord> {
  const moved: Record<string, RequestLogRecord> = {};
  for (const [computer, evidence] of Object.entries(record.evidence ?? {}))
    if (evidence.requests) moved[computer] = { ...evidence.requests, file: `${archived}/${evidence.requests.file}` };
  return moved;
}

/** Resets a deployed stack's env for the next episode (see the top of this file). */
export async function resetEnv(stack: ResetSeam, options: ResetOptions): Promise<ResetResult> {
  const started = Date.now();
  const [map, exported] = await Promise.all([stack.outputs(), stack.exportStack()]);
  if (!hasDeployedEnv(map))
    throw new RunnerError(
      `stack ${stack.name}: nothing is deployed; deploy it first with \`multienv up ${stack.name}\``,
    );
  const runtime = runtimeOf(exported.deployment.resources ?? [], outputValues(map));
  return withGatewayAccess(map, stack.name, (access) =>
    resetThrough(stack.name, map, access, runtime, options, started),
  );
}

/** The outputs' plain values, as a state holds them. */
function outputValues(map: OutputMap): Record<string, unknown> {
  return Object.fromEntries(Object.entries(map).map(([key, output]) => [key, output.value]));
}

async function resetThrough(
  name: string,
  map: OutputMap,
  access: GatewayAccess,
  runtime: EnvRuntime,
  options: ResetOptions,
  started: number,
): Promise<ResetResult> {
  const stack = { name };
  const log = options.log ?? (() => {});
  const collectOptions = collectOptionsFor(name, map, options.artifactsDir, access)!;
  const outputs = readOutputs(map);
  const computers = Object.keys(outputs.computers);
  const phase = (what: string) =>
    log(`stack ${stack.name}: reset: ${what} (${((Date.now() - started) / 1000).toFixed(1)} s)`);
  phase("state read");
  // Read while the episode ends: the sites' reset operations, in step 2, are named in it.
  const card = gatewayClient(access)
    .card()
    .catch((error: unknown) => {
      log(
        `warning: stack ${stack.name}: the gateway's card could not be read (${errorMessage(error)}); every site's server is restarted instead`,
      );
      return undefined;
    });

  let record = await readRunRecord(options.artifactsDir, stack.name);
  const episode = record.episode ?? 1;

  // 1 and 4's first half. Each computer's episode ends at once: its launcher ends the episode's Chromium (its pages,
  // service workers and connections with it) and promotes its standby, on a new, empty profile at a blank tab; then
  // its proxy ends every connection it still holds and marks its log. After the Chromium's end, so nothing of the
  // episode reaches the proxy after the mark.
  const profiles = new Map<string, FreshProfileAnswer>();
  await Promise.all(
    computers.map(async (computer) => {
      const fresh = await browserOperation<FreshProfileAnswer>(
        access,
        computer,
        BROWSER_OPERATION_PATHS.freshProfile,
        "start on a fresh profile",
      );
      profiles.set(computer, fresh);
      phase(
        `computer ${computer} on a fresh profile (${fresh.standby ? "its standby" : "started now"}, ${fresh.seconds.toFixed(2)} s in its launcher)`,
      );
      const ended = await endProxyConnections(access.gatewayUrl, access.controlToken, computer, {
        episode: episode + 1,
      });
      if (ended === undefined)
        throw new RunnerError(
          `stack ${stack.name}: computer ${computer}'s site proxy cannot end its connections (an image from before reset); run \`multienv up ${stack.name}\` first`,
        );
    }),
  );
  phase(`episode ${episode} ended and logged`);
  let collected: CollectResult | undefined;
  if (options.collect) {
    collected = await collectRun({ ...collectOptions, episode, failOnCaptureError: options.failOnCaptureError, log });
    record = collected.record;
    phase(`episode ${episode} collected`);
  }
  // What was collected of the episode, now or before, moves out of the way of the next one.
  const archived = await archiveEpisode(options.artifactsDir, episode);

  // 2 and 3. A replayed site's recording starts over (repeated requests get their first recorded answer again), then
  // the sites' data and the captures: the replay first, since the sites' start over recreates a captured replay
  // server's pod on a cluster, and the ended episode's counters with it.
  const replayed = outputs.replayedWebsites.map((site) => site.name);
  const replay = replayed.length > 0 ? await resetReplays(access.gatewayUrl, access.controlToken, replayed) : {};
  const sites = await startSitesOver(
    access,
    runtime,
    await card,
    Object.keys(outputs.websites),
    outputs.captureTraffic,
    phase,
  );
  phase("sites and captures started over");

  // 4. The browsers, on their fresh profiles, open their start tabs: once the sites are emptied and the captures
  // record, so the next episode's first requests are in its captures and meet emptied sites.
  const cleaned: ResetResult["computers"] = {};
  await Promise.all(
    computers.map(async (computer) => {
      const tabs = await browserOperation<StartTabsAnswer>(
        access,
        computer,
        BROWSER_OPERATION_PATHS.startTabs,
        "open its start tabs",
      );
      cleaned[computer] = { profile: profiles.get(computer)!.profile, startTabs: tabs.startTabs };
    }),
  );
  phase("start tabs open");

  // 5. The next episode begins; run.json's evidence starts over, so the episode's record lists its request logs.
  const requests = archived ? episodeRequestLogs(record, archived) : {};
  const finished: EpisodeRecord = {
    episode,
    endedAt: new Date().toISOString(),
    collected: options.collect === true,
    ...(archived ? { dir: archived } : {}),
    ...(collected
      ? {
          reproducible: collected.record.reproducible,
          publicHostsContacted: collected.record.publicHostsContacted,
          captures: collected.record.captures.length,
        }
      : {}),
    ...(Object.keys(requests).length > 0 ? { requests } : {}),
    ...(replayed.length > 0 ? { replay } : {}),
    ...episodeTakeovers(record, episode),
  };
  await writeRunRecord(options.artifactsDir, {
    ...record,
    episode: episode + 1,
    episodeStartedAt: new Date().toISOString(),
    episodes: [...(record.episodes ?? []), finished],
    captures: [],
    captureErrors: [],
    evidence: {},
    publicHostsContacted: [],
    replay: undefined,
  });
  const seconds = (Date.now() - started) / 1000;
  return { episode: episode + 1, collected, sites, computers: cleaned, seconds };
}
