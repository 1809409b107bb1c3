// `down`: collect what is not yet collected, then destroy. Never the other way round: a destroy removes the
// captures volume and the computers' site-proxy logs, so whatever was not stored before it is gone.
// The order and the failure policy live here, over a small seam of the Automation API's Stack, so a test can
// stand a double in for the stack and see the calls in order.
import type { EngineEvent, OutputMap } from "@pulumi/pulumi/automation";
import { artifactsDirOf } from "./artifacts";
import { CaptureCollectionError, collectRun, type CollectOptions, type CollectResult } from "./collect";
import { logsSettled } from "./evidence";
import { closeBrowser } from "./sign-in";
import { errorMessage, RunnerError } from "./errors";
import { gatewayAccessOf, readOutputs, syntheticDomainsOf } from "./outputs";

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
   * Close the computers' browsers before collecting, so the connections they still hold end and reach the site
   * proxies' logs (default true: the env is about to be destroyed anyway).
   */
  closeBrowsers?: boolean;
}

export interface DownResult {
  /** The collection, when there was a deployed env to collect from. */
  collected?: CollectResult;
  destroyed: true;
}

/** The collection options for a deployed stack, from its outputs; undefined when nothing is deployed. */
export function collectOptionsFor(stack: string, map: OutputMap, artifactsDir: string): Omit<CollectOptions, "log" | "failOnCaptureError"> | undefined {
  if (map.gatewayUrl === undefined && map.controlToken === undefined) return undefined;
  const outputs = readOutputs(map);
  return {
    stack,
    access: gatewayAccessOf(map, stack),
    artifactsDir,
    marks: { live: outputs.live, liveWebsites: outputs.liveWebsites, captureTraffic: outputs.captureTraffic },
    captureTraffic: outputs.captureTraffic,
    computers: Object.keys(outputs.computers),
    syntheticDomains: syntheticDomainsOf(outputs),
  };
}

/** Closes each computer's browser (best effort), then waits until the proxies' logs stop growing. Teardown only. */
export async function closeBrowsersAndSettle(options: Pick<CollectOptions, "stack" | "access" | "computers">, log: (line: string) => void): Promise<void> {
  await Promise.all(
    options.computers.map((computer) =>
      closeBrowser(options.access, computer).catch((error: unknown) =>
        log(`warning: stack ${options.stack}: could not close computer ${computer}'s browser before collecting (${errorMessage(error).split("\n")[0]}); connections it still held may be missing from its site-proxy log`),
      ),
    ),
  );
  await logsSettled(options.access, options.computers);
}

/**
 * Collects the run (captures not yet stored, the computers' site-proxy logs, run.json), then destroys the stack.
 * With `failOnCaptureError`, a collection that fails leaves the stack deployed and throws, naming what to do.
 */
export async function collectThenDestroy(stack: StackSeam, options: DownOptions): Promise<DownResult> {
  const { log = () => {}, collect = collectRun } = options;
  const artifactsDir = options.artifactsDir ?? artifactsDirOf(options.projectDir, stack.name);
  const map = await stack.outputs();
  const collectOptions = collectOptionsFor(stack.name, map, artifactsDir);
  let collected: CollectResult | undefined;
  if (collectOptions === undefined) {
    log(`stack ${stack.name}: nothing deployed to collect from`);
  } else {
    if (options.closeBrowsers !== false && collectOptions.computers.length > 0) await closeBrowsersAndSettle(collectOptions, log);
    try {
      collected = await collect({ ...collectOptions, failOnCaptureError: options.failOnCaptureError, log });
    } catch (error) {
      if (!(error instanceof CaptureCollectionError)) throw error;
      throw new RunnerError(`${error.what}; not destroyed, so nothing is lost: fix the gateway and run \`multienv down ${stack.name}\` again, or drop --fail-on-capture-error to destroy anyway`);
    }
  }
  await stack.destroy({ onEvent: options.onEvent });
  return { collected, destroyed: true };
}
