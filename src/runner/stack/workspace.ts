// Opening a task stack through the Automation API.
// One LocalWorkspace on the project directory (Pulumi.yaml, stacks/Pulumi.<stack>.yaml); state in a local
// file backend under .multienv/state unless the user chose a backend with PULUMI_BACKEND_URL; secrets under
// the passphrase in PULUMI_CONFIG_PASSPHRASE (or _FILE).
//
// Several tasks at once: each task is its own stack, and stacks are independent in the file backend (each has
// its own state file and its own lock). The Automation API passes `--stack` to every command, so no command
// depends on the "currently selected" stack another task may have changed. Operations on one stack from this
// process queue behind each other (lock.ts); another process on the same stack meets Pulumi's own
// stack lock and gets a one-line error saying so.
import { existsSync, readFileSync } from "node:fs";
import { mkdir } from "node:fs/promises";
import { join, resolve } from "node:path";
import { LocalWorkspace, PulumiCommand, Stack, type ConfigMap } from "@pulumi/pulumi/automation";
import YAML from "yaml";
import type { ClusterTarget } from "../../engines/kubernetes";
import { CONFIG_NAMESPACE } from "../../plan/problems";
import { stackNameProblem } from "../../plan/reserved";
import { explain, RunnerError } from "../errors";
import { backendUrlFor, STATE_DIR } from "./backend";
import { DEFAULT_PROJECT_DIR } from "./project-dir";
import { builtToolchainDir } from "./toolchain";

export { backendUrlFor, DEFAULT_PROJECT_DIR, STATE_DIR };

/**
 * The Pulumi CLI the Automation API runs: a `pulumi` on PATH (installed the usual way, or linked there by
 * scripts/pulumi-toolchain.sh), else the one that script built on this machine; undefined when there is neither
 * (the Automation API then fails to start `pulumi`, which ../errors.ts turns into an install hint).
 */
async function pulumiCommandFor(env: NodeJS.ProcessEnv): Promise<PulumiCommand | undefined> {
  const onPath = (env.PATH ?? "").split(":").some((dir) => dir !== "" && existsSync(join(dir, "pulumi")));
  const built = builtToolchainDir(env);
  if (!onPath && !existsSync(join(built, "bin", "pulumi"))) return undefined;
  const root = onPath ? undefined : built;
  // Asked once per process: getting one runs `pulumi version`, a CLI start that every stack opened paid again.
  const key = root ?? "PATH";
  let command = pulumiCommands.get(key);
  if (command === undefined) {
    // The one this project built reports the version it was built from; one on PATH is held to the SDK's minimum.
    command = PulumiCommand.get({ root, skipVersionCheck: root !== undefined });
    pulumiCommands.set(key, command);
    command.catch(() => pulumiCommands.delete(key));
  }
  return command;
}

/** The CLI found so far in this process, by where it was found (its root, or "PATH"). */
const pulumiCommands = new Map<string, Promise<PulumiCommand>>();

/**
 * The engine settings every operation the runner starts runs with, unless the user's environment sets them: the
 * number of steps under way at once (the CLI's default is 4 per core, 8 on 2 cores, while a demo-sized env has
 * about 20 steps ready at once that mostly wait: a network's create or delete waits 2 s in the docker provider
 * before it reads the network back, so 8 slots left later networks and volumes queued behind that wait), and diffs
 * run in parallel (a no-change `up` diffs every resource through its provider). bench:e2e measured both
 * (docs/performance.md "Deploy").
 */
export const ENGINE_SETTINGS: Readonly<Record<string, string>> = {
  PULUMI_PARALLEL: "32",
  PULUMI_PARALLEL_DIFF: "true",
};

/** ENGINE_SETTINGS less those `env` sets itself. */
export function engineSettings(env: NodeJS.ProcessEnv = process.env): Record<string, string> {
  return Object.fromEntries(Object.entries(ENGINE_SETTINGS).filter(([name]) => env[name] === undefined));
}

/**
 * Another stack with a stack file's config (a task run beside the one its file describes: a test, a benchmark),
 * `override` keys on top, written as the file writes them (`multienv:selfTest`). Secret (`secure:`) values are
 * ciphertext under the file's stack: give them again in `secrets`.
 */
export function specFromStackFile(file: string, name: string, override: Record<string, unknown> = {}): StackSpec {
  const parsed = YAML.parse(readFileSync(file, "utf8")) as { config?: Record<string, unknown> } | null;
  return { name, config: { ...(parsed?.config ?? {}), ...override } };
}

/** A stack described in code instead of a stacks/Pulumi.<stack>.yaml file. */
export interface StackSpec {
  /** The stack (task) name. */
  name: string;
  /**
   * Config keys; a bare key is in the `multienv` namespace (`websites` means `multienv:websites`). Objects are written
   * as JSON.
   */
  config: Record<string, unknown>;
  /** Secret config keys and their values (e.g. `githubToken`), stored encrypted. */
  secrets?: Record<string, string>;
}

export interface WorkspaceOptions {
  /** Default: the multienv checkout. */
  projectDir?: string;
  /** What the caller is doing, for error messages ("deploying"). Default: "opening the stack". */
  doing?: string;
  /**
   * Create the stack when the backend has none (deploying does; collecting or destroying a stack that was never
   * deployed is an error).
   */
  create?: boolean;
  /** The environment to read PULUMI_* settings from. Default: process.env. */
  env?: NodeJS.ProcessEnv;
  /** Variables the program runs with besides those (e.g. the self-test's switch). */
  programEnv?: Record<string, string>;
}

export interface OpenedStack {
  name: string;
  projectDir: string;
  stack: Stack;
  /** `multienv:target` as the stack file or spec names it, read without the CLI (undefined: the default). */
  target?: string;
  /** Serialises operations on this stack in this process (see lock.ts). */
  lockKey: string;
  /** The cluster `multienv:kubernetes` names, for a stack on the kubernetes target. */
  cluster: ClusterTarget;
}

/** The spec's config as the Automation API writes it: namespaced keys, objects as JSON, secrets flagged. */
export function specConfigMap(spec: StackSpec): ConfigMap {
  const key = (k: string) => (k.includes(":") ? k : `${CONFIG_NAMESPACE}:${k}`);
  const map: ConfigMap = {};
  for (const [k, value] of Object.entries(spec.config)) {
    if (value === undefined) continue;
    map[key(k)] = { value: typeof value === "string" ? value : JSON.stringify(value), secret: false };
  }
  for (const [k, value] of Object.entries(spec.secrets ?? {})) map[key(k)] = { value, secret: true };
  return map;
}

/**
 * What turns a stack's config `current` into `wanted`: the keys to remove and the entries to set. An entry whose
 * value and secrecy already match is left out, so reopening an unchanged stack writes nothing (each write is a
 * CLI call, and every episode of a task reopens its stack).
 */
export function configChanges(current: ConfigMap, wanted: ConfigMap): { stale: string[]; changed: ConfigMap } {
  const stale = Object.keys(current).filter((k) => !(k in wanted));
  const changed: ConfigMap = {};
  for (const [k, entry] of Object.entries(wanted)) {
    const now = current[k];
    if (now === undefined || now.value !== entry.value || Boolean(now.secret) !== Boolean(entry.secret)) {
      changed[k] = entry;
    }
  }
  return { stale, changed };
}

function stackFileOf(projectDir: string, stack: string): string {
  return join(projectDir, "stacks", `Pulumi.${stack}.yaml`);
}

const TARGET_KEY = `${CONFIG_NAMESPACE}:target`;

/**
 * `multienv:target` as the spec or the stack file writes it, keys read as the CLI reads them: the CLI reads it from
 * the same file, and a `config get` is a CLI start of its own. A file that cannot be read names no target here; the
 * program then says what is wrong.
 */
export function configuredTarget(spec: StackSpec | undefined, projectDir: string, name: string): string | undefined {
  try {
    return specConfigMap(spec ?? specFromStackFile(stackFileOf(projectDir, name), name))[TARGET_KEY]?.value;
  } catch {
    return undefined;
  }
}

/**
 * The cluster `multienv:kubernetes` names (its kubeconfig and context), read as configuredTarget reads the target;
 * empty (kubectl's defaults) when it names none or cannot be read.
 */
export function configuredCluster(spec: StackSpec | undefined, projectDir: string, name: string): ClusterTarget {
  try {
    const value = specConfigMap(spec ?? specFromStackFile(stackFileOf(projectDir, name), name))[
      `${CONFIG_NAMESPACE}:kubernetes`
    ]?.value;
    const section = value === undefined ? {} : (JSON.parse(value) as Record<string, unknown>);
    return {
      ...(typeof section.kubeconfig === "string" ? { kubeconfig: section.kubeconfig } : {}),
      ...(typeof section.context === "string" ? { context: section.context } : {}),
    };
  } catch {
    return {};
  }
}

/**
 * Creates or selects the stack `stackOrSpec` names in the project directory. A spec's config replaces the
 * stack's config (keys the spec does not name are removed), so the stack is exactly what the spec says.
 */
export async function openStack(stackOrSpec: string | StackSpec, options: WorkspaceOptions = {}): Promise<OpenedStack> {
  const env = options.env ?? process.env;
  const projectDir = resolve(options.projectDir ?? DEFAULT_PROJECT_DIR);
  const spec = typeof stackOrSpec === "string" ? undefined : stackOrSpec;
  const name = typeof stackOrSpec === "string" ? stackOrSpec : stackOrSpec.name;

  const nameProblem = stackNameProblem(name);
  if (nameProblem !== undefined) throw new RunnerError(nameProblem);
  if (!existsSync(join(projectDir, "Pulumi.yaml"))) {
    throw new RunnerError(
      `stack ${name}: ${projectDir} has no Pulumi.yaml; run from the multienv checkout or pass its directory as the project directory`,
    );
  }
  if (spec === undefined && !existsSync(stackFileOf(projectDir, name))) {
    throw new RunnerError(
      `stack ${name}: there is no stacks/Pulumi.${name}.yaml; write one (see the examples in stacks/) or deploy from a spec object`,
    );
  }

  const backendUrl = backendUrlFor(projectDir, env);
  if (backendUrl.startsWith("file://")) await mkdir(backendUrl.slice("file://".length), { recursive: true });
  const envVars: Record<string, string> = {
    ...engineSettings(env),
    ...options.programEnv,
    PULUMI_BACKEND_URL: backendUrl,
    PULUMI_SKIP_UPDATE_CHECK: "true",
  };

  let stack: Stack;
  try {
    const workspace = await LocalWorkspace.create({
      workDir: projectDir,
      envVars,
      pulumiCommand: await pulumiCommandFor(env),
    });
    const usesPassphrase = backendUrl.startsWith("file://") || env.PULUMI_CONFIG_PASSPHRASE !== undefined;
    if (
      usesPassphrase &&
      env.PULUMI_CONFIG_PASSPHRASE === undefined &&
      env.PULUMI_CONFIG_PASSPHRASE_FILE === undefined
    ) {
      throw new RunnerError(
        `stack ${name}: the local state backend keeps secrets under a passphrase; set PULUMI_CONFIG_PASSPHRASE (or PULUMI_CONFIG_PASSPHRASE_FILE), the same one every time for this stack`,
      );
    }
    stack =
      options.create || spec !== undefined
        ? await Stack.createOrSelect(name, workspace)
        : await Stack.select(name, workspace);
    if (spec !== undefined) {
      const { stale, changed } = configChanges(await stack.getAllConfig(), specConfigMap(spec));
      if (stale.length > 0) await stack.removeAllConfig(stale);
      if (Object.keys(changed).length > 0) await stack.setAllConfig(changed);
    }
  } catch (error) {
    throw explain(error, name, options.doing ?? "opening the stack");
  }
  return {
    name,
    projectDir,
    stack,
    target: configuredTarget(spec, projectDir, name),
    cluster: configuredCluster(spec, projectDir, name),
    lockKey: stackLockKey(name, options),
  };
}

/** The in-process lock key of a stack: the same stack of the same project in the same backend. */
export function stackLockKey(name: string, options: WorkspaceOptions = {}): string {
  const projectDir = resolve(options.projectDir ?? DEFAULT_PROJECT_DIR);
  return `${backendUrlFor(projectDir, options.env ?? process.env)}|${projectDir}|${name}`;
}
