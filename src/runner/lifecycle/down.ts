// `down`: collect what is not yet collected, then destroy. Never the other way round: a destroy removes the
// captures volume and the computers' site-proxy logs, so whatever was not stored before it is gone.
// The order and the failure policy live here, over a small seam of the Automation API's Stack, so a test can
// stand a double in for the stack and see the calls in order.
import type { EngineEvent, OutputMap } from "@pulumi/pulumi/automation";
import { artifactsDirOf } from "../evidence/artifacts";
import { CaptureCollectionError, collectRun, type CollectOptions, type CollectResult } from "../evidence/collect";
import { endProxyConnections, logsSettled } from "../evidence/proxy-logs";
import { closeBrowser } from "./sign-in";
import { errorMessage, RunnerError } from "../errors";
import { readOutputs, syntheticDomainsOf, withGatewayAccess, type GatewayAccess } from "../stack/outputs";
import type { LostPartRecord } from "../evidence/run-record";
import { partOf, type ContainerState, type EnvRuntime } from "../targets/env-runtime";

/** The part of the Automation API's Stack the lifecycle commands use. `Stack` satisfies it as it is. */
export interface StackSeam {
  readonly name: string;
  outputs(): Promise<OutputMap>;
  destroy(options?: { onEvent?: (event: EngineEvent) => void }): Promise<unknown>;
}

export interface DownOptions {
  projectDir: string;
  /** Default: artifacts/<stack> under projectDir. */
  artifactsDir?: string;
  /** Do not destroy when a capture could not be collected. */
  failOnCaptureError?: boolean;
  log?: (line: string) => void;
  onEvent?: (event: EngineEvent) => void;
  /** The collection to run before destroying (the real one unless a test says otherwise). */
  collect?: (options: CollectOptions) => Promise<CollectResult>;
  /**
   * End every connection the computers' site proxies hold before collecting, so each reaches its log (default
   * true: the env is about to be destroyed anyway).
   */
  endConnections?: boolean;
  /**
   * The target's runtime: the parts lost (a pod on a node that is not Ready) are named before collecting and recorded
   * in run.json, and the destroy is run through it (kubernetes force-deletes the pods a lost node holds).
   */
  runtime?: Pick<EnvRuntime, "kind" | "states" | "destroying">;
}

export interface DownResult {
  /** The collection, when there was a deployed env to collect from. */
  collected?: CollectResult;
  destroyed: true;
  /** What was checked gone from the target after the destroy (kubernetes: `namespace <stack>`). */
  gone?: string[];
}

/** True when the outputs are a deployed env's (a gateway to collect from). */
export function hasDeployedEnv(map: OutputMap): boolean {
  return map.gatewayUrl !== undefined || map.controlToken !== undefined;
}

/**
 * The collection options for a deployed stack, from its outputs, through `access` (openGatewayAccess: the gateway as
 * this process reaches it); undefined when nothing is deployed.
 */
export function collectOptionsFor(
  stack: string,
  map: OutputMap,
  artifactsDir: string,
  access: GatewayAccess,
): Omit<CollectOptions, "log" | "failOnCaptureError"> | undefined {
  if (!hasDeployedEnv(map)) return undefined;
  const outputs = readOutputs(map);
  return {
    stack,
    access,
    artifactsDir,
    marks: {
      live: outputs.live,
      liveReasons: outputs.liveReasons,
      liveWebsites: outputs.liveWebsites,
      captureTraffic: outputs.captureTraffic,
    },
    captureTraffic: outputs.captureTraffic,
    computers: Object.keys(outputs.computers),
    syntheticDomains: syntheticDomainsOf(outputs),
    replayedSites: outputs.replayedWebsites.map((site) => site.name),
  };
}

/**
 * Makes each computer's site-proxy log complete: every connection its proxy holds is ended, so its line is
 * written. A proxy that cannot end them (an older image) has its browser closed instead, and its log is read until
 * it stops growing. Best effort: a computer that cannot be reached is named in a warning.
 */
export async function completeProxyLogs(
  options: Pick<CollectOptions, "stack" | "access" | "computers">,
  log: (line: string) => void,
): Promise<void> {
  const { access } = options;
  const warn = (computer: string, error: unknown) =>
    log(
      `warning: stack ${options.stack}: could not end computer ${computer}'s connections before collecting (${errorMessage(error).split("\n")[0]}); connections it still held may be missing from its site-proxy log`,
    );
  const unsettled: string[] = [];
  await Promise.all(
    options.computers.map(async (computer) => {
      try {
        if ((await endProxyConnections(access.gatewayUrl, access.controlToken, computer)) !== undefined) return;
        await closeBrowser(access, computer);
        unsettled.push(computer);
      } catch (error) {
        warn(computer, error);
      }
    }),
  );
  if (unsettled.length > 0) await logsSettled(access, unsettled);
}

/** What a lost part held of the run's evidence, which cannot be collected from it. */
function evidenceHeldBy(container: ContainerState): string[] {
  if (container.role === "gateway")
    return ["everything read through the gateway (captures, site-proxy logs, request logs, replay counters)"];
  if (container.role === "site-proxy")
    return [`computer ${container.computer ?? "?"}'s site-proxy log and request log`];
  if (container.role === "replay") return [`site ${container.site ?? "?"}'s replay counters`];
  return container.captures ? ["its captures"] : [];
}

/** The parts lost (each on a node that is not Ready), as run.json records them. Pure. */
export function lostParts(containers: ContainerState[], at = new Date().toISOString()): LostPartRecord[] {
  return containers.flatMap((c): LostPartRecord[] => {
    if (c.nodeNotReady === undefined) return [];
    const part = partOf(c);
    return [
      {
        name: c.name,
        ...(part !== undefined ? { part } : {}),
        ...(c.node !== undefined ? { node: c.node } : {}),
        why: `its node ${c.node ?? "?"} is not Ready: ${c.nodeNotReady}`,
        notCollected: evidenceHeldBy(c),
        at,
      },
    ];
  });
}

/** A lost part in one line: which, where, and what of its evidence is not collected. */
export function lostPartLine(stack: string, lost: LostPartRecord): string {
  const what = lost.notCollected.length > 0 ? `${lost.notCollected.join(", ")} not collected` : "it held no evidence";
  return `stack ${stack}: pod ${lost.name}${lost.part ? ` (${lost.part})` : ""} is lost, since ${lost.why}: ${what}`;
}

/**
 * Collects the run (captures not yet stored, the computers' site-proxy logs, run.json), then destroys the stack.
 * With `failOnCaptureError`, a collection that fails leaves the stack deployed and throws, naming what to do.
 */
export async function collectThenDestroy(stack: StackSeam, options: DownOptions): Promise<DownResult> {
  const { log = () => {}, collect = collectRun } = options;
  const artifactsDir = options.artifactsDir ?? artifactsDirOf(options.projectDir, stack.name);
  const map = await stack.outputs();
  let collected: CollectResult | undefined;
  if (!hasDeployedEnv(map)) {
    log(`stack ${stack.name}: nothing deployed to collect from`);
  } else {
    // A gateway that cannot be reached (its pod gone) is no reason to keep a broken env: the collection then says
    // what it could not store, and fails only under --fail-on-capture-error.
    const onUnreachable = (error: unknown) =>
      log(`warning: stack ${stack.name}: the gateway cannot be reached: ${errorMessage(error).split("\n")[0]}`);
    // A part on a lost node is named before anything waits on it; the collection goes on with what answers.
    let lost: LostPartRecord[] = [];
    // Nodes are a cluster's: on an engine, a container is there or not, which the collection finds for itself.
    if (options.runtime?.kind === "kubernetes")
      try {
        lost = lostParts(await options.runtime.states());
      } catch (error) {
        log(`warning: stack ${stack.name}: the parts' states could not be read: ${errorMessage(error).split("\n")[0]}`);
      }
    for (const part of lost) log(`warning: ${lostPartLine(stack.name, part)}`);
    collected = await withGatewayAccess(
      map,
      stack.name,
      async (access) => {
        const collectOptions = { ...collectOptionsFor(stack.name, map, artifactsDir, access)!, lostParts: lost };
        if (options.endConnections !== false && collectOptions.computers.length > 0)
          await completeProxyLogs(collectOptions, log);
        try {
          return await collect({ ...collectOptions, failOnCaptureError: options.failOnCaptureError, log });
        } catch (error) {
          if (!(error instanceof CaptureCollectionError)) throw error;
          throw new RunnerError(
            `${error.what}; not destroyed, so nothing is lost: fix the gateway and run \`multienv down ${stack.name}\` again, or drop --fail-on-capture-error to destroy anyway`,
          );
        }
      },
      { onUnreachable },
    );
  }
  const destroy = () => stack.destroy({ onEvent: options.onEvent });
  if (options.runtime !== undefined)
    await options.runtime.destroying(destroy, (line) => log(`stack ${stack.name}: ${line}`));
  else await destroy();
  return { collected, destroyed: true };
}
