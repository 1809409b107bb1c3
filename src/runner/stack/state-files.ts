// The task stacks of a file state backend, read straight from its checkpoint files: what `ls` lists, and what
// `status`, `outputs`, `screenshot` and `watch` check before anything else (the stack is there, and deployed).
// Reading the files needs neither the Pulumi CLI nor the secrets passphrase, and takes milliseconds where a
// `pulumi stack ls` and an export per stack take seconds; secret values stay ciphertext and are never read.
//
// The layout is Pulumi's own: `<backend>/.pulumi/stacks/<project>/<stack>.json` (`.json.gz` when Pulumi writes
// gzipped state), or `<backend>/.pulumi/stacks/<stack>.json` for a backend without project folders (meta.yaml
// version 0). Each file is `{version: 3, checkpoint: {stack, latest: {manifest: {time}, resources: [...]}}}`.
import { existsSync, readFileSync } from "node:fs";
import { readdir, readFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { gunzipSync } from "node:zlib";
import YAML from "yaml";
import { CONFIG_NAMESPACE } from "../../plan/problems";
import { RESOURCE_TYPES } from "../../protocol/resource-types";
import type { StateResource } from "../../engines/docker";
import { RunnerError } from "../errors";
import { KUBERNETES_TYPES } from "../targets/kubernetes/state";
import { SECRET_PLACEHOLDER } from "./outputs";
import { backendUrlFor, DEFAULT_PROJECT_DIR } from "./workspace";

/** The key Pulumi marks a secret value with in state (its "signature" for secrets). */
const SECRET_SIG_KEY = "4dabf18193072939515e22adb298388d";
const SECRET_SIG = "1b47061264138c4ac30d75fd1eb44270";

/** Where to find the state: the project (its Pulumi.yaml names it) and the environment (PULUMI_BACKEND_URL). */
export interface StateOptions {
  projectDir?: string;
  env?: NodeJS.ProcessEnv;
}

/** One stack as its checkpoint file holds it. */
export interface StateStack {
  name: string;
  /** When its last update (up, refresh, destroy) finished, ISO 8601; undefined for a stack never updated. */
  lastUpdated?: string;
  resources: StateResource[];
  /** The stack's outputs, each secret one (or one holding a secret) as "[secret]". */
  outputs: Record<string, unknown>;
}

/** The directory of a `file://` backend URL, or undefined for another kind of backend. */
export function fileBackendDir(backendUrl: string): string | undefined {
  if (!backendUrl.startsWith("file://")) return undefined;
  const rest = backendUrl.slice("file://".length);
  // `file://~` is Pulumi's spelling of the home directory.
  return rest.startsWith("~") ? join(process.env.HOME ?? "/", rest.slice(1)) : rest;
}

function projectNameOf(projectDir: string): string {
  const file = join(projectDir, "Pulumi.yaml");
  if (!existsSync(file))
    throw new RunnerError(
      `${projectDir} has no Pulumi.yaml; run from the multienv checkout or pass its directory as the project directory`,
    );
  const parsed = YAML.parse(readFileSync(file, "utf8")) as { name?: unknown } | null;
  return typeof parsed?.name === "string" ? parsed.name : "multienv";
}

/** The folder holding the project's stack checkpoints in the backend directory `dir`. */
function stacksDirOf(dir: string, project: string): string {
  const meta = join(dir, ".pulumi", "meta.yaml");
  const version = existsSync(meta)
    ? Number((YAML.parse(readFileSync(meta, "utf8")) as { version?: unknown } | null)?.version ?? 0)
    : // A backend Pulumi never wrote to yet is laid out as a new one would be.
      1;
  return version >= 1 ? join(dir, ".pulumi", "stacks", project) : join(dir, ".pulumi", "stacks");
}

function stateLocation(options: StateOptions): { stacksDir: string; backendUrl: string } {
  const projectDir = resolve(options.projectDir ?? DEFAULT_PROJECT_DIR);
  const backendUrl = backendUrlFor(projectDir, options.env ?? process.env);
  const dir = fileBackendDir(backendUrl);
  if (dir === undefined)
    throw new RunnerError(
      `the state backend ${backendUrl} is not a file backend; these commands read a local one (unset PULUMI_BACKEND_URL for .multienv/state, or give a file:// URL)`,
    );
  return { stacksDir: stacksDirOf(dir, projectNameOf(projectDir)), backendUrl };
}

/** True when `value` is, or holds, a secret as state stores it. */
export function holdsSecret(value: unknown): boolean {
  if (Array.isArray(value)) return value.some(holdsSecret);
  if (value === null || typeof value !== "object") return false;
  const record = value as Record<string, unknown>;
  if (record[SECRET_SIG_KEY] === SECRET_SIG) return true;
  return Object.values(record).some(holdsSecret);
}

interface Checkpoint {
  checkpoint?: {
    stack?: string;
    latest?: { manifest?: { time?: string }; resources?: StateResource[] } | null;
  };
}

function parseCheckpoint(name: string, bytes: Buffer, gzipped: boolean): StateStack {
  const checkpoint = JSON.parse((gzipped ? gunzipSync(bytes) : bytes).toString("utf8")) as Checkpoint;
  const latest = checkpoint.checkpoint?.latest ?? undefined;
  const resources = latest?.resources ?? [];
  const root = resources.find((r) => r.type === "pulumi:pulumi:Stack");
  const outputs = Object.fromEntries(
    Object.entries(root?.outputs ?? {})
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([key, value]) => [key, holdsSecret(value) ? SECRET_PLACEHOLDER : value]),
  );
  return { name, lastUpdated: latest?.manifest?.time, resources, outputs };
}

const CHECKPOINT_FILE = /^([a-z0-9][a-z0-9-]*)\.json(\.gz)?$/;

/** Every stack of the project in the state backend, by name. */
export async function readStateStacks(options: StateOptions = {}): Promise<StateStack[]> {
  const { stacksDir } = stateLocation(options);
  const names = await readdir(stacksDir).catch((error: NodeJS.ErrnoException) => {
    if (error.code === "ENOENT") return [] as string[];
    throw error;
  });
  const stacks: StateStack[] = [];
  for (const file of names.sort()) {
    const match = CHECKPOINT_FILE.exec(file);
    if (!match) continue;
    // A stack Pulumi is rewriting from .json to .json.gz (or back) has both for a moment: the plain one is read.
    if (match[2] && names.includes(`${match[1]}.json`)) continue;
    stacks.push(parseCheckpoint(match[1], await readFile(join(stacksDir, file)), match[2] !== undefined));
  }
  return stacks;
}

/** True when the state holds a deployed env: containers or pods, or a gateway in the outputs. */
export function isDeployed(stack: StateStack): boolean {
  return (
    "gatewayUrl" in stack.outputs ||
    stack.resources.some((r) => r.type === RESOURCE_TYPES.container || r.type === KUBERNETES_TYPES.pod)
  );
}

/**
 * The one line for a stack that is not deployed (not in the state, or nothing of it deployed), with the command that
 * deploys it. `so`: what follows for the command (nothing to destroy); `noStackFile`: there is no stack file to deploy
 * it from, so the line says to write one first.
 */
export function notDeployed(name: string, more: { so?: string; noStackFile?: boolean } = {}): RunnerError {
  const deploy = more.noStackFile
    ? `there is no stacks/Pulumi.${name}.yaml to deploy it from: write one (see the examples in stacks/), then run \`multienv up ${name}\``
    : `deploy it with \`multienv up ${name}\``;
  return new RunnerError(`stack ${name} is not deployed${more.so ? `, so ${more.so}` : ""}; ${deploy}`);
}

/**
 * The stack `name` as the state holds it; a one-line RunnerError (notDeployed) when there is no such stack, or (with
 * `deployed`) when nothing of it is deployed.
 */
export async function readStateStack(
  name: string,
  options: StateOptions & { deployed?: boolean } = {},
): Promise<StateStack> {
  const found = (await readStateStacks(options)).find((s) => s.name === name);
  if (found === undefined || (options.deployed && !isDeployed(found))) throw notDeployed(name);
  return found;
}

/** The stack's target as its stack file says (`docker` when it names none); undefined without a stack file. */
export function targetOf(name: string, projectDir: string = DEFAULT_PROJECT_DIR): string | undefined {
  const file = join(resolve(projectDir), "stacks", `Pulumi.${name}.yaml`);
  if (!existsSync(file)) return undefined;
  try {
    const parsed = YAML.parse(readFileSync(file, "utf8")) as { config?: Record<string, unknown> } | null;
    const target = parsed?.config?.[`${CONFIG_NAMESPACE}:target`];
    return typeof target === "string" ? target : "docker";
  } catch {
    return undefined;
  }
}
