// The runner's library API: how a test runner drives task stacks, the same way `multienv up|collect|sign-in|down` does.
//
//   import { deployStack } from "multienv/src/runner";
//   const env = await deployStack({ name: "task-42", config: { websites: {...}, computers: {...} } }, { signal });
//   await env.signIn({ site: "github", computer: "agent" });
//   ... the agent works ...
//   await env.reset({ collect: true });        // the next episode, this one's evidence stored
//   await env.destroy();                       // collects captures and evidence first
//
// Each operation is also a function of the stack's name (resetStack, collectCaptures, signIn, destroyStack).
//
// A stack is named (stacks/Pulumi.<stack>.yaml) or given as a spec object. State lives in a local file backend
// under .multienv/state unless PULUMI_BACKEND_URL names another; secrets use PULUMI_CONFIG_PASSPHRASE.
//
// Running several tasks at once from one runner is safe: give each task its own stack (one stack per task).
// Separate stacks share nothing in the file backend. Operations on the *same* stack from this process are
// queued one after another (per-stack lock); from another process they meet Pulumi's own stack lock and fail
// with a one-line error rather than corrupting state.
import { SELF_TEST_ENV } from "../plan/self-test";
import { artifactsDirOf } from "./evidence/artifacts";
import { collectRun, type CollectResult } from "./evidence/collect";
import { collectOptionsFor, collectThenDestroy, hasDeployedEnv, type DownResult } from "./lifecycle/down";
import { deployFailure, errorMessage, explain, RunnerError } from "./errors";
import {
  displayOutputs,
  openGatewayAccess,
  readOutputs,
  withGatewayAccess,
  type GatewayAccess,
  type GatewayAccessOptions,
} from "./stack/outputs";
import { ProgressReporter, resourcesInDeployment, StepCounter } from "./stack/progress";
import {
  hostsToReach,
  unreachableHosts,
  unreachableMessage,
  type StateResource,
} from "./targets/hosts/hosts-reachable";
import { resetEnv, type ResetResult, type ResetSeam } from "./lifecycle/reset";
import { browsersAnswer } from "./lifecycle/browsers-ready";
import { readRunRecord, recordFailedSelfTest, withReproducibility, writeRunRecord } from "./evidence/run-record";
import { runtimeOf } from "./targets/runtimes";
import type { StateResource as EngineStateResource } from "../engines/docker";
import { collectEngineError } from "./stack/engine-errors";
import { DEFAULT_DEPLOY_CONCURRENCY, settleWithLimit } from "./stack/concurrency";
import { firstEngineRefusal, refusedDeploy, watchDeployRefusals } from "./targets/kubernetes/refusals";
import { providePlugin } from "./stack/toolchain";
import * as operations from "./stack/operations";
import { parseSelfTestFailure } from "../protocol/self-test-failure";
import { signIn as signInBrowser, signOut as signOutBrowser } from "./lifecycle/sign-in";
import { withLifecycleLock } from "./stack/lifecycle-lock";
import { withStackLock } from "./stack/lock";
import {
  listStacks as listStateStacks,
  screenshotStack as screenshotStackWith,
  stackStatus as stackStatusWith,
  stateOutputs,
  type OperatorOptions,
  type ScreenshotOptions,
  type StackList,
  type StackStatus,
} from "./operator/operator";
import type { Screenshot } from "./operator/screens";
import { fileBackendDir, readStateStack } from "./stack/state-files";
import type { WatchServer } from "./operator/watch-server";
import { watchStackWith, type WatchStackOptions } from "./operator/watch-stack";
import {
  backendUrlFor,
  DEFAULT_PROJECT_DIR,
  openStack,
  stackLockKey,
  type OpenedStack,
  type StackSpec,
} from "./stack/workspace";
export { specFromStackFile } from "./stack/workspace";
export { DEFAULT_DEPLOY_CONCURRENCY } from "./stack/concurrency";
export type { RunnerOptions, DeployOptions, DeployResult, DeployManyOptions } from "./options";
import type { RunnerOptions, DeployOptions, DeployResult, DeployManyOptions } from "./options";

export { RunnerError } from "./errors";
export type { StackSpec, WorkspaceOptions } from "./stack/workspace";
export type { StackOutputs, GatewayAccess } from "./stack/outputs";
export type { RunRecord, CaptureRecord } from "./evidence/run-record";
export type { CollectResult } from "./evidence/collect";
export type { StackList, StackListing, StackStatus } from "./operator/operator";
export type { Screenshot } from "./operator/screens";
export type { WatchServer } from "./operator/watch-server";
export type { ResetResult } from "./lifecycle/reset";
export type { StackSeam, DownResult } from "./lifecycle/down";
// The same operations on a gateway you already hold (a URL and the token), for runners that deploy without
// the Automation API: they need no stack at all.
export { collectRun } from "./evidence/collect";
// A kubernetes stack's outputs name the gateway's pod (`kubernetes://...`): these put its URLs on the local end of the
// port-forward gatewayAccess() opened.
export { localOutputs, rebaseUrl } from "./stack/outputs";
/** The gateway's contract as a client: what a harness asks of an env beside its agent, `gatewayClient(access)`. */
export { GatewayClient, gatewayClient, GatewayRequestError } from "../protocol/gateway-client";
export { collectThenDestroy } from "./lifecycle/down";
export { signIn as signInComputer, signOut as signOutComputer, closeBrowser } from "./lifecycle/sign-in";
export {
  captureCollectorCommands,
  captureCollectorEnvironment,
  collectorContext,
  COLLECTOR_ENV,
} from "../plan/collector";

function nameOf(stackOrSpec: string | StackSpec): string {
  return typeof stackOrSpec === "string" ? stackOrSpec : stackOrSpec.name;
}

/**
 * Opens the stack and runs `operation` on it under the per-stack lock; errors become one-line RunnerErrors. An
 * operation that changes the env or writes its evidence (`lifecycle`: deploy, collect, sign-in and -out, reset, down)
 * also holds the stack's lifecycle lock, against other processes (stack/lifecycle-lock.ts).
 */
async function onStack<T>(
  stackOrSpec: string | StackSpec,
  options: RunnerOptions & { create?: boolean; lifecycle?: boolean },
  doing: string,
  operation: (opened: OpenedStack) => Promise<T>,
): Promise<T> {
  const name = nameOf(stackOrSpec);
  return withStackLock(stackLockKey(name, options), async () => {
    try {
      const opened = await openStack(stackOrSpec, { ...options, doing });
      if (!options.lifecycle) return await operation(opened);
      return await withLifecycleLock(artifactsDir(opened, options), { stack: name, doing, log: options.log }, () =>
        operation(opened),
      );
    } catch (error) {
      throw explain(error, name, doing);
    }
  });
}

function artifactsDir(opened: OpenedStack, options: RunnerOptions): string {
  return options.artifactsDir ?? artifactsDirOf(opened.projectDir, opened.name);
}

/**
 * A deployed task env, as a test runner holds it: its typed outputs, and each lifecycle operation bound to its
 * stack with the options it was deployed with (project directory, backend, artifacts, log).
 */
export interface DeployedStack extends DeployResult {
  /** The gateway's URL, the control token and each computer's agent token (secrets). */
  access(): Promise<GatewayAccess>;
  /** The next episode on the same env (see resetStack). */
  reset(options?: Omit<ResetStackOptions, keyof RunnerOptions>): Promise<ResetResult>;
  /** Stores the run so far (see collectCaptures). */
  collect(options?: { failOnCaptureError?: boolean }): Promise<CollectResult>;
  signIn(options: Pick<SignInOptions, "site" | "computer">): Promise<{ cookies: number; origins: number }>;
  signOut(options: Pick<SignInOptions, "site" | "computer">): Promise<{ cookies: number; origins: number }>;
  /** Collects what is not collected yet, then destroys (see destroyStack). */
  destroy(options?: Omit<DestroyOptions, keyof RunnerOptions>): Promise<DownResult>;
}

/** `result` with the lifecycle operations bound to its stack and `options`. */
function bound(result: DeployResult, options: RunnerOptions): DeployedStack {
  const { name } = result;
  const common: RunnerOptions = {
    projectDir: options.projectDir,
    env: options.env,
    artifactsDir: options.artifactsDir,
    log: options.log,
  };
  return {
    ...result,
    access: () => gatewayAccess(name, common),
    reset: (more) => resetStack(name, { ...common, ...more }),
    collect: (more) => collectCaptures(name, { ...common, ...more }),
    signIn: (more) => signIn(name, { ...common, ...more }),
    signOut: (more) => signOut(name, { ...common, ...more }),
    destroy: (more) => destroyStack(name, { ...common, ...more }),
  };
}

/** The resource plugin the stack's target deploys with: kubernetes on a cluster, docker on every engine. */
function pluginOfTarget(opened: OpenedStack): "docker" | "kubernetes" {
  return opened.target === "kubernetes" ? "kubernetes" : "docker";
}

/** The error of a deploy its caller cancelled, or undefined when `signal` did not abort it. */
function cancelled(stack: string, signal: AbortSignal | undefined): RunnerError | undefined {
  if (!signal?.aborted) return undefined;
  return new RunnerError(
    `stack ${stack}: the deploy was cancelled; what it had created is in the state: run \`multienv up ${stack}\` to finish it or \`multienv down ${stack}\` to remove it`,
  );
}

/**
 * Deploys a task stack (`pulumi up`), reporting progress through `log`, and writes the run's live marks to
 * artifacts/<stack>/run.json. The control token is not in the result: ask for it with gatewayAccess().
 */
export async function deployStack(
  stackOrSpec: string | StackSpec,
  options: DeployOptions = {},
): Promise<DeployedStack> {
  const log = options.log ?? (() => {});
  const programEnv =
    options.selfTest === false ? { ...options.programEnv, [SELF_TEST_ENV]: "off" } : options.programEnv;
  return onStack(
    stackOrSpec,
    { ...options, programEnv, create: true, lifecycle: true },
    "deploying",
    async (opened) => {
      await providePlugin(pluginOfTarget(opened), opened.projectDir, (line) => log(`stack ${opened.name}: ${line}`));
      const progress = new ProgressReporter(log);
      if (options.preview === true) {
        const counter = new StepCounter();
        log(`stack ${opened.name}: previewing…`);
        const previewErrors: string[] = [];
        await opened.stack
          .preview({
            onEvent: (event) => {
              counter.onEvent(event);
              collectEngineError(event, previewErrors);
            },
            signal: options.signal,
          })
          .catch((error: unknown) => {
            // The engine's own error (a provider's, such as the API server's refusal) says why; the CLI's says only
            // "preview failed".
            throw (
              cancelled(opened.name, options.signal) ??
              (previewErrors.length > 0 ? deployFailure(opened.name, previewErrors[0]) : error)
            );
          });
        progress.setTotal(counter.total);
      }
      const errors: string[] = [];
      const refusal = watchDeployRefusals(
        opened.target === "kubernetes" ? opened.cluster : undefined,
        opened.name,
        log,
      );
      const result = await operations
        .up(opened.stack, {
          signal: options.signal ? AbortSignal.any([options.signal, refusal.signal]) : refusal.signal,
          onEvent: (event) => {
            progress.onEvent(event);
            collectEngineError(event, errors);
          },
        })
        .finally(refusal.stop)
        .catch(async (error: unknown) => {
          const cancel = cancelled(opened.name, options.signal);
          if (cancel) throw cancel;
          if (refusal.line !== undefined) throw refusedDeploy(opened.name, refusal.line);
          const refused = opened.target === "kubernetes" ? firstEngineRefusal(errors, opened.name) : undefined;
          if (refused !== undefined) throw refusedDeploy(opened.name, refused);
          // A failed self-test's outputs are not saved: its error's lines are what run.json can keep of it.
          const selfTest = errors.map(parseSelfTestFailure).find((failure) => failure !== undefined);
          if (selfTest)
            await recordFailedSelfTest(artifactsDir(opened, options), opened.name, selfTest.failures).catch(
              (recordError: unknown) =>
                log(
                  `warning: stack ${opened.name}: run.json could not record the failed self-test: ${String(recordError)}`,
                ),
            );
          // The engine's own first error says more than the CLI's "update failed".
          if (errors.length > 0) throw deployFailure(opened.name, errors[0]);
          throw error;
        });
      const outputs = readOutputs(result.outputs);
      const computers = Object.keys(outputs.computers);
      if (computers.length > 0)
        // The deploy's own outputs hold no secret's value: the control token is asked of the stack.
        await withGatewayAccess(await opened.stack.outputs(), opened.name, (access) =>
          browsersAnswer(access, opened.name, computers),
        ).catch((error: unknown) => {
          throw new RunnerError(errorMessage(error));
        });
      const dir = artifactsDir(opened, options);
      const record = await readRunRecord(dir, opened.name);
      await writeRunRecord(
        dir,
        withReproducibility({
          ...record,
          live: outputs.live,
          liveReasons: outputs.liveReasons,
          liveWebsites: outputs.liveWebsites,
          captureTraffic: outputs.captureTraffic,
          selfTest: outputs.selfTest,
        }),
      );
      return bound(
        {
          name: opened.name,
          outputs,
          // The deploy's outputs hold no secret's value: the CLI is asked for them only when they are to be shown.
          displayed: options.showSecrets
            ? displayOutputs(await opened.stack.outputs(), true)
            : displayOutputs(result.outputs),
        },
        options,
      );
    },
  );
}

/**
 * Deploys many task stacks (one per task), at most `concurrency` under way at once, each as deployStack does. Each
 * outcome is in its place: one failed deploy stops none of the others, its error deployStack's one-line RunnerError.
 */
export async function deployStacks(
  stacks: (string | StackSpec)[],
  options: DeployManyOptions = {},
): Promise<PromiseSettledResult<DeployedStack>[]> {
  const { concurrency = DEFAULT_DEPLOY_CONCURRENCY, onSettled, ...deploy } = options;
  return settleWithLimit(stacks, concurrency, (stack) => deployStack(stack, deploy), {
    onSettled: (stack, outcome) => onSettled?.(nameOf(stack), outcome),
  });
}

/** The stack's outputs; secrets are "[secret]" unless `showSecrets`. */
export async function stackOutputs(
  stack: string,
  options: RunnerOptions & { showSecrets?: boolean } = {},
): Promise<Record<string, unknown>> {
  // A file backend's state says whether the stack is there and deployed, and holds every output but the secrets'
  // plain text; another backend is asked through the Automation API alone.
  const projectDir = options.projectDir ?? DEFAULT_PROJECT_DIR;
  if (fileBackendDir(backendUrlFor(projectDir, options.env)) === undefined) return stackOutputsOfEngine(stack, options);
  if (!options.showSecrets) return stateOutputs(stack, options);
  await readStateStack(stack, { ...options, deployed: true });
  return stackOutputsOfEngine(stack, options);
}

/** The outputs as the Automation API reads them (the Pulumi CLI and, for secrets, the passphrase). */
async function stackOutputsOfEngine(
  stack: string,
  options: RunnerOptions & { showSecrets?: boolean } = {},
): Promise<Record<string, unknown>> {
  return onStack(stack, options, "reading outputs", async (opened) =>
    displayOutputs(await opened.stack.outputs(), options.showSecrets),
  );
}

/**
 * The gateway's URL, the decrypted control token and agent tokens: the one place the runner hands them out. On the
 * kubernetes target the URL is the local end of a port-forward to the gateway's pod, open while this process lives (it
 * keeps no process alive) or until `close()`; `localOutputs(outputs, access.gatewayUrl)` puts the outputs' URLs on it.
 */
export async function gatewayAccess(
  stack: string,
  options: RunnerOptions & Pick<GatewayAccessOptions, "onUnreachable"> = {},
): Promise<GatewayAccess & { close(): Promise<void> }> {
  return onStack(stack, options, "reading the gateway's address and control token", async (opened) =>
    openGatewayAccess(await opened.stack.outputs(), opened.name, {
      env: options.env,
      onUnreachable: options.onUnreachable,
    }),
  );
}

/**
 * Collects the run: every capture not yet stored (to artifacts/<stack>/traffic/, size-checked, SHA-256 in
 * run.json), each computer's site-proxy log, and reproducibility. Best effort unless `failOnCaptureError`.
 */
export async function collectCaptures(
  stack: string,
  options: RunnerOptions & { failOnCaptureError?: boolean } = {},
): Promise<CollectResult> {
  return onStack(stack, { ...options, lifecycle: true }, "collecting", async (opened) => {
    const map = await opened.stack.outputs();
    if (!hasDeployedEnv(map))
      throw new RunnerError(
        `stack ${opened.name}: nothing is deployed; deploy it first with \`multienv up ${opened.name}\``,
      );
    return withGatewayAccess(map, opened.name, async (access) => {
      const collectOptions = collectOptionsFor(opened.name, map, artifactsDir(opened, options), access)!;
      return collectRun({ ...collectOptions, failOnCaptureError: options.failOnCaptureError, log: options.log });
    });
  });
}

export interface SignInOptions extends RunnerOptions {
  site: string;
  computer: string;
}

async function signInTarget(opened: OpenedStack, options: SignInOptions) {
  const map = await opened.stack.outputs();
  const outputs = readOutputs(map);
  const website = outputs.websites[options.site];
  if (website === undefined) {
    const known = Object.keys(outputs.websites).join(", ") || "none";
    throw new RunnerError(
      `stack ${opened.name}: no website ${options.site} (its websites: ${known}); pass one of them with --site`,
    );
  }
  if (!(options.computer in outputs.computers)) {
    const known = Object.keys(outputs.computers).join(", ") || "none";
    throw new RunnerError(
      `stack ${opened.name}: no computer ${options.computer} (its computers: ${known}); pass one of them with --computer`,
    );
  }
  return {
    map,
    site: options.site,
    computer: options.computer,
    domains: website.domains,
  };
}

/** Runs `use` on the sign-in's target, the gateway reachable for its duration. */
async function onSignInTarget<T>(
  opened: OpenedStack,
  options: SignInOptions,
  use: (target: Parameters<typeof signInBrowser>[0] & Parameters<typeof signOutBrowser>[0]) => Promise<T>,
): Promise<T> {
  const { map, ...target } = await signInTarget(opened, options);
  return withGatewayAccess(map, opened.name, (access) => use({ ...target, access }));
}

/** Loads the site's session (its /session, Playwright storage state) into the computer's browser. */
export async function signIn(stack: string, options: SignInOptions): Promise<{ cookies: number; origins: number }> {
  return onStack(
    stack,
    { ...options, lifecycle: true },
    `signing computer ${options.computer} in to ${options.site}`,
    async (opened) => onSignInTarget(opened, options, signInBrowser),
  );
}

/** Removes the site's cookies and storage from the computer's browser. */
export async function signOut(stack: string, options: SignInOptions): Promise<{ cookies: number; origins: number }> {
  return onStack(
    stack,
    { ...options, lifecycle: true },
    `signing computer ${options.computer} out of ${options.site}`,
    async (opened) => onSignInTarget(opened, options, signOutBrowser),
  );
}

export interface DestroyOptions extends RunnerOptions {
  /** Leave the stack deployed when a capture could not be collected. */
  failOnCaptureError?: boolean;
  /** Also remove the stack from the state backend once destroyed (its stacks/Pulumi.<stack>.yaml stays). */
  remove?: boolean;
}

export interface ResetStackOptions extends RunnerOptions {
  /** Collect the finished episode first (into artifacts/<stack>/episodes/<n>/), so no evidence is lost. */
  collect?: boolean;
  failOnCaptureError?: boolean;
  /**
   * The stack's state as readStackState read it, for a caller that resets one deploy many times (a warm pool's
   * keeper): the reset then asks the Pulumi CLI nothing (its outputs and resources take seconds to read and do not
   * change between resets). It must be of the stack's current deploy.
   */
  state?: StackState;
}

/** What a reset reads of a stack's state: its outputs (the control token decrypted) and its resources. */
export interface StackState {
  outputs: Awaited<ReturnType<ResetSeam["outputs"]>>;
  exported: Awaited<ReturnType<ResetSeam["exportStack"]>>;
}

/** Reads the stack's state as a reset does, to be given to resetStack (`state`) for each of its resets. */
export async function readStackState(stack: string, options: RunnerOptions = {}): Promise<StackState> {
  return onStack(stack, options, "reading its state", async (opened) => {
    const [outputs, exported] = await Promise.all([opened.stack.outputs(), opened.stack.exportStack()]);
    return { outputs, exported };
  });
}

/**
 * Puts the deployed env back to the state right after `up`, without redeploying: every site's data emptied, every
 * browser on a fresh profile (nothing of the last episode in it) at its start tabs, the captures and the proxy logs
 * started over (see lifecycle/reset.ts). The next episode is counted in run.json.
 */
export async function resetStack(stack: string, options: ResetStackOptions = {}): Promise<ResetResult> {
  const { state } = options;
  if (state !== undefined) {
    const artifacts = options.artifactsDir ?? artifactsDirOf(options.projectDir ?? DEFAULT_PROJECT_DIR, stack);
    return withStackLock(stackLockKey(stack, options), () =>
      withLifecycleLock(artifacts, { stack, doing: "resetting", log: options.log }, () =>
        resetEnv(
          { name: stack, outputs: async () => state.outputs, exportStack: async () => state.exported },
          {
            artifactsDir: artifacts,
            collect: options.collect,
            failOnCaptureError: options.failOnCaptureError,
            log: options.log,
          },
        ),
      ).catch((error: unknown) => {
        throw explain(error, stack, "resetting");
      }),
    );
  }
  return onStack(stack, { ...options, lifecycle: true }, "resetting", async (opened) =>
    resetEnv(opened.stack, {
      artifactsDir: artifactsDir(opened, options),
      collect: options.collect,
      failOnCaptureError: options.failOnCaptureError,
      log: options.log,
    }),
  );
}

/**
 * Every task stack of the project in the state: target, deployed, last update, containers, episodes, and each deployed
 * env's computers a person holds or whose agent asks for one (`ls`). The gateway is read without the stack's lock: a
 * listing does not wait for an `up` to finish, and only reads.
 */
export async function listStacks(options: RunnerOptions & OperatorOptions = {}): Promise<StackList> {
  return listStateStacks(options, async (name) => {
    const opened = await openStack(name, { ...options, doing: "reading the gateway's address and control token" });
    return openGatewayAccess(await opened.stack.outputs(), opened.name, {
      env: options.env,
      onUnreachable: () => undefined,
    });
  });
}

/**
 * A deployed stack's health and evidence so far (`multienv status`): its containers, the gateway's /healthz, each
 * computer's open tabs, the self-test, the captures and proxy logs. `healthy` false names each problem.
 */
export async function stackStatus(stack: string, options: RunnerOptions = {}): Promise<StackStatus> {
  // A gateway pod that cannot be reached is one of the problems status reports, not a reason to report none.
  return stackStatusWith(stack, (name) => gatewayAccess(name, { ...options, onUnreachable: () => undefined }), options);
}

/** A PNG of each computer's visible tab (one with `computer`), by default in artifacts/<stack>/screenshots. */
export async function screenshotStack(
  stack: string,
  options: RunnerOptions & ScreenshotOptions = {},
): Promise<Screenshot[]> {
  return screenshotStackWith(stack, (name) => gatewayAccess(name, options), options);
}

/**
 * Serves a local page (127.0.0.1, its URL carrying a secret of this call) showing every computer's screen live, with
 * its URL and proxy log (`multienv watch`). Viewers may take a computer over as `operator` (default: the OS user); each
 * takeover's record goes into run.json (evidence/takeovers.ts). `takeNow` takes that computer at once
 * (`multienv takeover`). Close it with `close()`.
 */
export async function watchStack(
  stack: string,
  options: RunnerOptions & Pick<WatchStackOptions, "port" | "operator" | "takeNow"> = {},
): Promise<WatchServer> {
  return watchStackWith(stack, (name) => gatewayAccess(name, options), options);
}

/** Collects whatever is not collected yet, then destroys the stack (see lifecycle/down.ts for the order and policy). */
export async function destroyStack(stack: string, options: DestroyOptions = {}): Promise<DownResult> {
  return onStack(stack, { ...options, lifecycle: true }, "destroying", async (opened) => {
    // The total of a destroy is what the state holds: no preview needed.
    const state = await opened.stack.exportStack().catch(() => undefined);
    const total = state === undefined ? undefined : resourcesInDeployment(state);
    // Hosts the stack does not own are asked to delete what is on them: each must answer first
    // (targets/hosts/hosts-reachable.ts).
    const resources = (state?.deployment?.resources ?? []) as StateResource[];
    const hosts = hostsToReach(opened.name, resources);
    const outputs = resources.find((r) => r.type === "pulumi:pulumi:Stack")?.outputs;
    const runtime =
      state === undefined ? undefined : runtimeOf(resources as EngineStateResource[], outputs, options.env);
    if (hosts.length > 0) {
      const down = await unreachableHosts(hosts);
      if (down.length > 0) throw new RunnerError(unreachableMessage(opened.name, down));
    }
    const progress = new ProgressReporter(options.log ?? (() => {}), total);
    const stack = opened.stack;
    const seam = {
      name: stack.name,
      outputs: () => stack.outputs(),
      destroy: operations.destroy.bind(undefined, stack),
    };
    const result = await collectThenDestroy(seam, {
      projectDir: opened.projectDir,
      artifactsDir: artifactsDir(opened, options),
      failOnCaptureError: options.failOnCaptureError,
      log: options.log,
      onEvent: progress.onEvent,
      runtime,
    });
    // The config file stays: it may be the user's own stacks/Pulumi.<stack>.yaml, and a spec's is needed to deploy it
    // again.
    if (options.remove) await opened.stack.workspace.removeStack(opened.name, { preserveConfig: true });
    // What the destroy must have removed from the target (a kubernetes stack's namespace) is checked gone.
    if (runtime === undefined) return result;
    const { gone, left } = await runtime.checkDestroyed();
    if (left.length > 0) throw new RunnerError(`stack ${opened.name}: destroyed, but ${left.join("; ")}`);
    return gone.length > 0 ? { ...result, gone } : result;
  });
}
