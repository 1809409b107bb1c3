// The multienv Pulumi program: stack config -> plan -> MultiEnv -> stack outputs. `index.ts` (Pulumi.yaml
// `main`) exports it for `pulumi up`; `multienv check` runs the same function under Pulumi's mocks.
// Bad config, a refused plan or inputs a component refuses stop the run with one line per problem and no stack
// trace (pulumi.RunError).
import { execFileSync } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, writeFileSync } from "node:fs";
import * as path from "node:path";
import * as pulumi from "@pulumi/pulumi";
import { MultiEnv, type MultiEnvOutputs } from "../components/multiEnv";
import { ConfigError, loadStackConfig } from "./config";
import { readRecordings } from "./config/recordings";
import {
  DOCKER_DEFAULT_ADDRESS_POOLS,
  formatProblem,
  plan,
  recordingDockerfile,
  type EngineMachine,
  type Plan,
} from "./plan";
import { isLocalEngine, localEngineMachine } from "./engines/docker";
import { DEFAULT_BASE_IMAGE, PROJECT_IMAGES, projectImagesNeeded } from "./plan/images";
import { SELF_TEST_ENV } from "./plan/self-test";
import { isPoolStack } from "./config/pool-load";
import { cleanUpPooledSites, leasedAccountsOutput, leasePooledSites, poolProgram } from "./program-pools";

/** The repository root: the build context of the project's images. */
const REPO_ROOT = path.resolve(__dirname, "..");

export interface ProgramOptions {
  /**
   * Bundle the services the project's images copy (scripts/bundle.mjs) before declaring the images, so a fresh
   * checkout deploys with nothing built first. Default true; `multienv check` renders the graph without it.
   */
  bundle?: boolean;
  /**
   * Ask the local engine and this machine what the site proxies must never dial (the machine's addresses, the
   * engine's address pools). Default true; `multienv check` runs without an engine, and shows Docker's own pools.
   */
  probeEngine?: boolean;
  /**
   * Wait, before declaring the env, until each pooled live site's account is leased. Default true; `multienv check`
   * renders the graph without a lease store.
   */
  waitForAccounts?: boolean;
}

/** Writes dist/bundle/<name>.js for every service the plan's project images copy; one line naming what failed. */
function bundleServices(planned: Plan): void {
  const bundles = [
    ...new Set(
      projectImagesNeeded(true, planned.computers, planned.websites).flatMap((role) => PROJECT_IMAGES[role].bundles),
    ),
  ];
  const { isFresh } = require(path.join(REPO_ROOT, "scripts/bundle-freshness.cjs")) as {
    isFresh(root: string, name: string): boolean;
  };
  if (bundles.every((name) => isFresh(REPO_ROOT, name))) return;
  try {
    execFileSync(process.execPath, [path.join(REPO_ROOT, "scripts/bundle.mjs"), ...bundles], {
      cwd: REPO_ROOT,
      stdio: ["ignore", "ignore", "pipe"],
      encoding: "utf8",
    });
  } catch (error) {
    const stderr = (error as { stderr?: string }).stderr?.trim() || (error as Error).message;
    throw new pulumi.RunError(`multienv: bundling the services for the project's images failed: ${stderr}`);
  }
}

/** Where the build context of the image carrying a recording is written: the HAR and a Dockerfile, by its digest. */
function recordingContext(sha256: string): string {
  return path.join(REPO_ROOT, "dist", "replay", sha256);
}

/**
 * Writes each replayed site's recording image build context (dist/replay/<sha256>/): a context holds what the image
 * copies and nothing else, and the HAR may sit anywhere. Keyed by content, so one written is never written again.
 */
function writeRecordingContexts(planned: Plan): void {
  for (const site of planned.websites) {
    if (!site.replay) continue;
    const dir = recordingContext(site.replay.recording.sha256);
    if (existsSync(path.join(dir, "recording.har"))) continue;
    mkdirSync(dir, { recursive: true });
    writeFileSync(path.join(dir, "Dockerfile"), recordingDockerfile());
    copyFileSync(site.replay.recording.path, path.join(dir, "recording.har"));
  }
}

/**
 * The machine of the docker target's engine, as its site proxies must know it. On this machine's own engine, asked
 * of it; an engine elsewhere (DOCKER_HOST naming another machine) shows only Docker's own pools, with a warning that
 * the machine's addresses must be guarded by its firewall. Remote targets learn their hosts from the plan.
 */
async function engineMachineOf(planned: Plan, probe: boolean): Promise<EngineMachine | undefined> {
  if (planned.target !== "docker") return undefined;
  if (!probe) return { addresses: [], addressPools: DOCKER_DEFAULT_ADDRESS_POOLS };
  if (!isLocalEngine()) {
    pulumi.log.warn(
      `multienv: the engine (DOCKER_HOST=${process.env.DOCKER_HOST}) is on another machine, whose addresses the site proxies cannot learn; guard them with that machine's firewall (README "Security")`,
    );
    return { addresses: [], addressPools: DOCKER_DEFAULT_ADDRESS_POOLS };
  }
  try {
    return await localEngineMachine();
  } catch (error) {
    throw new pulumi.RunError(
      `multienv: the local Docker engine did not answer (${error instanceof Error ? error.message : String(error)}); start dockerd, or set DOCKER_HOST`,
    );
  }
}

export async function multienvProgram(
  options: ProgramOptions = {},
): Promise<MultiEnvOutputs | Record<string, unknown>> {
  const stack = pulumi.getStack();
  // A pool's stack holds accounts for task stacks to lease, and deploys nothing.
  if (isPoolStack()) return poolProgram();
  let loaded;
  try {
    loaded = loadStackConfig();
  } catch (error) {
    if (error instanceof ConfigError) throw new pulumi.RunError(error.message);
    throw error;
  }
  // Pulumi runs the program in the project directory: relative recordings are taken from there.
  const recordings = await readRecordings(loaded.config, process.cwd());
  for (const warning of recordings.warnings) pulumi.log.warn(formatProblem(warning));
  if (recordings.problems.length > 0) throw new pulumi.RunError(recordings.problems.map(formatProblem).join("\n"));
  const result = plan(loaded.config, {
    stack,
    selfTest: process.env[SELF_TEST_ENV] !== "off",
    recordings: recordings.recordings,
  });
  for (const warning of result.warnings) pulumi.log.warn(warning);
  if (!result.ok) throw new pulumi.RunError(result.problems.map(formatProblem).join("\n"));
  if (options.bundle !== false) {
    bundleServices(result.plan);
    writeRecordingContexts(result.plan);
  }
  const engineMachine = await engineMachineOf(result.plan, options.probeEngine !== false);

  // A pooled live site's account is leased first: a stack that gets none fails with nothing of it created.
  const pooled = await leasePooledSites(result.plan, stack, options.waitForAccounts !== false);
  try {
    const env = new MultiEnv(stack, {
      accounts: pooled.settings,
      plan: result.plan,
      secrets: loaded.secrets,
      // Relative, as the state keeps it: the same checkout elsewhere is no change.
      buildContext: path.relative(process.cwd(), REPO_ROOT) || ".",
      recordingContext: (sha256) => path.relative(process.cwd(), recordingContext(sha256)),
      baseImage: process.env.MULTIENV_BASE_IMAGE || DEFAULT_BASE_IMAGE,
      engineMachine,
    });
    cleanUpPooledSites(pooled, env, stack);
    const accounts = leasedAccountsOutput(pooled);
    return accounts === undefined ? env.outputs : { ...env.outputs, accounts };
  } catch (error) {
    // Components refuse inputs the plan let through with a message naming the config key; show just that.
    throw new pulumi.RunError(error instanceof Error ? error.message : String(error));
  }
}
