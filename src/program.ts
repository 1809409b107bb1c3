// The multienv Pulumi program: stack config -> plan -> MultiEnv -> stack outputs. `index.ts` (Pulumi.yaml
// `main`) exports it for `pulumi up`; `multienv check` runs the same function under Pulumi's mocks.
// Bad config, a refused plan or inputs a component refuses stop the run with one line per problem and no stack
// trace (pulumi.RunError).
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
import { isLocalEngine, localEngineMachine, projectImagesOn } from "./engines/docker";
import {
  PROJECT_IMAGES,
  projectImageProblems,
  referencedProjectImages,
  requestedBaseImage,
  type ProjectImageIds,
} from "./plan/images";
import { SELF_TEST_ENV } from "./plan/self-test";
import { isPoolStack } from "./config/pool-load";
import { cleanUpPooledSites, leasedAccountsOutput, leasePooledSites, poolProgram } from "./program-pools";
import { countsAsStep, formatDeclaredResources } from "./protocol/declared-resources";

/** The repository root: recording images' build contexts are written under it. */
const REPO_ROOT = path.resolve(__dirname, "..");

export interface ProgramOptions {
  /**
   * Write each replayed site's recording image build context (dist/replay/) before declaring the images. Default
   * true; `multienv check` renders the graph without it.
   */
  writeRecordingContexts?: boolean;
  /**
   * Ask the local engine and this machine what the site proxies must never dial (the machine's addresses, the
   * engine's address pools), and the runner's engine the ids of the project's images. Default true; `multienv check`
   * runs without an engine (it asks for the images itself), and shows Docker's own pools and what each id stands for.
   */
  probeEngine?: boolean;
  /**
   * Wait, before declaring the env, until each pooled live site's account is leased. Default true; `multienv check`
   * renders the graph without a lease store.
   */
  waitForAccounts?: boolean;
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
      `multienv: the engine (DOCKER_HOST=${process.env.DOCKER_HOST}) is on another machine, whose addresses the site proxies cannot learn; guard them with that machine's firewall (docs/features.md "Security")`,
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

/**
 * The id of each project image the deploy runs, as the runner's engine has it under its tag: `npm run images` builds
 * them and a deploy builds none, so an image rebuilt with other content replaces exactly the containers running it.
 * A missing one, or one built FROM another base than MULTIENV_BASE_IMAGE asks for, stops the run with one line each
 * naming the command that builds it. Without an engine (`check`), what each id stands for.
 */
async function projectImageIds(planned: Plan, probe: boolean): Promise<ProjectImageIds> {
  const roles = referencedProjectImages(planned);
  if (!probe) return Object.fromEntries(roles.map((role) => [role, `<id of ${PROJECT_IMAGES[role].imageName}>`]));
  let found;
  try {
    found = await projectImagesOn(roles);
  } catch (error) {
    throw new pulumi.RunError(
      `multienv: the Docker engine did not answer (${error instanceof Error ? error.message : String(error)}); start dockerd, or set DOCKER_HOST`,
    );
  }
  const problems = projectImageProblems(roles, found, requestedBaseImage(process.env));
  if (problems.length > 0) throw new pulumi.RunError(problems.map(formatProblem).join("\n"));
  return Object.fromEntries(roles.map((role) => [role, found[role]!.id]));
}

/**
 * Counts every resource constructed from here on that the engine takes a step on. Each constructor runs the stack's
 * transformations as it is called, before any input resolves, so once the env's components are constructed the
 * count is whole, seconds before the engine's last step.
 */
function countDeclaredResources(): { count: number } {
  const declared = { count: 0 };
  pulumi.runtime.registerStackTransformation((args) => {
    if (countsAsStep(args.type)) declared.count++;
    return undefined;
  });
  return declared;
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
  if (options.writeRecordingContexts !== false) writeRecordingContexts(result.plan);
  const [engineMachine, projectImages] = await Promise.all([
    engineMachineOf(result.plan, options.probeEngine !== false),
    projectImageIds(result.plan, options.probeEngine !== false),
  ]);

  // Counting starts before the leases, which are steps too.
  const declared = countDeclaredResources();
  // A pooled live site's account is leased first: a stack that gets none fails with nothing of it created.
  const pooled = await leasePooledSites(result.plan, stack, options.waitForAccounts !== false);
  try {
    const env = new MultiEnv(stack, {
      accounts: pooled.settings,
      plan: result.plan,
      secrets: loaded.secrets,
      projectImages,
      // Relative, as the state keeps it: the same checkout elsewhere is no change.
      recordingContext: (sha256) => path.relative(process.cwd(), recordingContext(sha256)),
      engineMachine,
    });
    cleanUpPooledSites(pooled, env, stack);
    pulumi.log.debug(formatDeclaredResources(declared.count));
    const accounts = leasedAccountsOutput(pooled);
    return accounts === undefined ? env.outputs : { ...env.outputs, accounts };
  } catch (error) {
    // Components refuse inputs the plan let through with a message naming the config key; show just that.
    throw new pulumi.RunError(error instanceof Error ? error.message : String(error));
  }
}
