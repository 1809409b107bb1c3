// `multienv check`: validates a task stack offline. Reads the stack file (a `secure:` value counts as a secret
// without being decrypted), loads and validates its config, plans it, runs the program under Pulumi's mocks
// and holds the rendered graph to the graph checks (the policy pack). Needs no Pulumi CLI or cloud; of Docker, it
// asks the local engine only whether it has the project images the deploy runs (no engine there: a warning).
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { ConfigError } from "../../config/errors";
import { isPoolFile, readPoolFile, type PoolConfig } from "../../config/pool";
import type { Plan } from "../../plan";
import { memberTaskOf } from "../../plan/pool-names";
import { formatProblem } from "../../plan/problems";
import {
  projectImageProblems,
  referencedProjectImages,
  requestedBaseImage,
  type FoundImage,
  type ProjectImageRole,
} from "../../plan/images";
import { projectImagesOn } from "../../engines/docker";
import type { StackConfig } from "../../plan/types";
import { runPolicies } from "../../../policies/evaluate";
import { RESOURCE_TYPES } from "../../protocol/resource-types";
import { GraphError, renderGraph, type Graph, type GraphResource } from "./graph";
import { backendUrlFor } from "../stack/backend";
import { DEFAULT_PROJECT_DIR } from "../stack/project-dir";
import { checkStackFile } from "./stack-file";

/** One finding of a graph check: which check (policy), on which resource, what is wrong and how to comply. */
export interface GraphFinding {
  policy: string;
  /** The resource (URN or name), or "stack" for the stack as a whole. */
  resource: string;
  message: string;
}

export interface GraphCheckContext {
  stack: string;
  plan: Plan;
  /** Config keys (namespace `multienv`) whose values are secrets. */
  secretKeys: string[];
}

/** A check over the rendered graph. Secrets in the graph are "[secret]"; a plaintext secret is a finding. */
export type GraphCheck = (graph: Graph, context: GraphCheckContext) => GraphFinding[];

/**
 * The checks `check` runs over every graph it renders: the hook the policy pack (policies/) plugs into, e.g.
 * `GRAPH_CHECKS.push((graph) => runPolicies(graph))`. Each finding becomes a problem line
 * `policy <name>: <resource>: <message>` and makes the stack fail the check.
 */
export const GRAPH_CHECKS: GraphCheck[] = [
  // The policy pack's rules (policies/), named by the resource's logical name (its URN is long for a line).
  (graph) => runPolicies(graph).map((v) => ({ policy: v.policy, resource: v.name ?? v.resource, message: v.message })),
];

export interface CheckResult {
  ok: boolean;
  stack: string;
  /** The stack file checked. */
  file: string;
  /** One line each: config and plan problems (`multienv:<path>: ...`), program refusals, policy findings. */
  problems: string[];
  warnings: string[];
  resources: GraphResource[];
  outputs: Record<string, unknown>;
}

export interface CheckOptions {
  /** Where `stacks/` is; default: the working directory. */
  projectDir?: string;
  /** Graph checks to run; default GRAPH_CHECKS. */
  checks?: GraphCheck[];
  /** What the engine has under the project images' tags; default: the local engine's (DOCKER_HOST, else the socket). */
  imagesOn?: (roles: readonly ProjectImageRole[]) => Promise<Partial<Record<ProjectImageRole, FoundImage>>>;
  /** Where MULTIENV_BASE_IMAGE and PULUMI_BACKEND_URL are read; default process.env. */
  env?: Record<string, string | undefined>;
}

/**
 * The project images the deploy would run and the engine lacks (or has built FROM another base than asked for), one
 * problem line each with the command that builds it; an engine that does not answer is a warning, not a problem.
 */
async function imageFindings(plan: Plan, options: CheckOptions): Promise<{ problems: string[]; warnings: string[] }> {
  const roles = referencedProjectImages(plan);
  if (roles.length === 0) return { problems: [], warnings: [] };
  let found;
  try {
    found = await (options.imagesOn ?? projectImagesOn)(roles);
  } catch (error) {
    const why = error instanceof Error ? error.message : String(error);
    return {
      problems: [],
      warnings: [`the Docker engine did not answer (${why}), so whether it has the project's images is not checked`],
    };
  }
  const base = requestedBaseImage(options.env ?? process.env);
  return { problems: projectImageProblems(roles, found, base).map(formatProblem), warnings: [] };
}

/**
 * A stack named as a member of a task's warm pool (`<task>-w<n>`) beside that task's stack file: `multienv warm
 * <task>` would take it for a member, rewrite its stack file and deploy over it. Pool members are deployed by the
 * keeper, never checked or brought up by hand, so the name is refused.
 */
function memberNameProblem(stack: string, projectDir: string): string | undefined {
  const task = memberTaskOf(stack);
  if (task === undefined || !existsSync(join(projectDir, "stacks", `Pulumi.${task}.yaml`))) return undefined;
  return `stack ${stack}: the name of a member of task ${task}'s warm pool (<task>-w<n>, beside stacks/Pulumi.${task}.yaml): \`multienv warm ${task}\` would deploy over it; give the stack a name without the -w<n> suffix`;
}

export async function checkStack(stackOrPath: string, options: CheckOptions = {}): Promise<CheckResult> {
  const offline = await checkStackFile(stackOrPath, options.projectDir);
  const { stack, file, stackFile } = offline;
  const empty = { stack, file, resources: [], outputs: {} };
  const collision = memberNameProblem(stack, options.projectDir ?? DEFAULT_PROJECT_DIR);
  if (collision !== undefined) return { ...empty, ok: false, problems: [collision], warnings: [] };
  const backendUrl = backendUrlFor(options.projectDir ?? DEFAULT_PROJECT_DIR, options.env ?? process.env);
  // A pool's stack deploys nothing: its config, and where its leases are, is all there is to check.
  if (isPoolFile(file)) {
    try {
      const { pool, warnings } = readPoolFile(file, stack);
      const problems = poolStoreProblems(pool, backendUrl);
      return { ...empty, ok: problems.length === 0, problems, warnings: warnings.map(formatProblem) };
    } catch (error) {
      if (error instanceof ConfigError)
        return { ...empty, ok: false, problems: error.problems.map(formatProblem), warnings: [] };
      throw error;
    }
  }
  if (!offline.ok || stackFile === undefined || offline.plan === undefined)
    return { ...empty, ok: false, problems: offline.problems, warnings: offline.warnings };
  const planned = { plan: offline.plan, warnings: offline.warnings };
  const pools = pooledSiteFindings(stackFile.config, dirname(file), backendUrl);
  planned.warnings.push(...pools.warnings);
  if (pools.problems.length > 0) return { ...empty, ok: false, problems: pools.problems, warnings: planned.warnings };

  const images = imageFindings(planned.plan, options);
  let graph: Graph;
  try {
    graph = await renderGraph({ stack, config: stackFile.rawConfig, secretKeys: stackFile.secretKeys });
  } catch (error) {
    if (error instanceof GraphError) {
      const { problems, warnings } = await images;
      return {
        ...empty,
        ok: false,
        problems: [...problems, ...error.message.split("\n").filter(Boolean)],
        warnings: [...planned.warnings, ...warnings],
      };
    }
    throw error;
  }
  const context: GraphCheckContext = { stack, plan: planned.plan, secretKeys: Object.keys(stackFile.secrets) };
  const findings = (options.checks ?? GRAPH_CHECKS).flatMap((check) => check(graph, context));
  const imageResult = await images;
  const problems = [...imageResult.problems, ...findings.map((f) => `policy ${f.policy}: ${f.resource}: ${f.message}`)];
  return {
    ok: problems.length === 0,
    stack,
    file,
    problems,
    warnings: [...planned.warnings, ...imageResult.warnings],
    resources: graph.resources,
    outputs: graph.outputs,
  };
}

/**
 * `--json`: exactly the docs/design.md shape `{ok, problems[], warnings[], resources[{type,name,parent,inputs}],
 * outputs{}}`.
 */
export function checkJson(result: CheckResult): string {
  return JSON.stringify(
    {
      ok: result.ok,
      problems: result.problems,
      warnings: result.warnings,
      resources: result.resources.map((r) => ({
        type: r.type,
        name: r.name,
        parent: r.parent ?? null,
        ...(r.provider ? { provider: r.provider } : {}),
        inputs: r.inputs,
        ...(r.additionalSecretOutputs ? { additionalSecretOutputs: r.additionalSecretOutputs } : {}),
      })),
      outputs: result.outputs,
    },
    null,
    2,
  );
}

/** The human report: problems, or the resource tree with key inputs, then warnings. */
export function checkText(result: CheckResult): { stdout: string; stderr: string } {
  const warnings = result.warnings.map((w) => `warning: ${w}`);
  if (!result.ok) {
    const header = `multienv check ${result.stack}: ${result.problems.length} problem${result.problems.length === 1 ? "" : "s"} in ${result.file}`;
    return { stdout: "", stderr: [header, ...result.problems, ...warnings].join("\n") + "\n" };
  }
  const lines = [`multienv check ${result.stack}: ok, ${result.resources.length} resources (${result.file})`, ""];
  lines.push(...resourceTree(result.resources));
  lines.push("", "outputs:");
  for (const [key, value] of Object.entries(result.outputs)) lines.push(`  ${key}: ${JSON.stringify(value)}`);
  return { stdout: lines.join("\n") + "\n", stderr: warnings.length > 0 ? warnings.join("\n") + "\n" : "" };
}

function resourceTree(resources: GraphResource[]): string[] {
  const children = new Map<string | undefined, GraphResource[]>();
  const key = (type: string | undefined, name: string | undefined) =>
    name === undefined ? undefined : `${type}::${name}`;
  for (const r of resources) {
    const parent = key(r.parentType, r.parent);
    if (!children.has(parent)) children.set(parent, []);
    children.get(parent)!.push(r);
  }
  const lines: string[] = [];
  const walk = (parent: string | undefined, depth: number) => {
    for (const r of children.get(parent) ?? []) {
      const summary = keyInputs(r);
      lines.push(
        `${"  ".repeat(depth)}${r.type} ${r.name}${r.provider ? ` [provider ${r.provider}]` : ""}${summary ? `  ${summary}` : ""}`,
      );
      walk(key(r.type, r.name), depth + 1);
    }
  };
  walk(undefined, 0);
  return lines;
}

const show = (value: unknown) => (typeof value === "string" ? value : JSON.stringify(value));

/** The inputs a reader checks first, per resource type; secrets are "[secret]" already. */
function keyInputs(r: GraphResource): string {
  const i = r.inputs as Record<string, any>;
  const parts: string[] = [];
  switch (r.type) {
    case RESOURCE_TYPES.container: {
      parts.push(`image=${show(i.image)}`);
      if (i.networkMode) parts.push(`networkMode=${show(i.networkMode)}`);
      if (Array.isArray(i.networksAdvanced))
        parts.push(`networks=${i.networksAdvanced.map((n: any) => n.name).join(",")}`);
      if (Array.isArray(i.ports) && i.ports.length > 0)
        parts.push(
          `ports=${i.ports.map((p: any) => `${p.ip ?? ""}:${p.external ?? "auto"}->${p.internal}`).join(",")}`,
        );
      if (i.capabilities?.adds?.length) parts.push(`capAdd=${i.capabilities.adds.join(",")}`);
      if (i.capabilities?.drops?.length) parts.push(`capDrop=${i.capabilities.drops.join(",")}`);
      if (Array.isArray(i.mounts) && i.mounts.length > 0)
        parts.push(`mounts=${i.mounts.map((m: any) => `${m.source}:${m.target}${m.readOnly ? ":ro" : ""}`).join(",")}`);
      if (i.envs !== undefined)
        parts.push(
          `env=${Array.isArray(i.envs) ? i.envs.map((e: unknown) => (typeof e === "string" ? e.split("=")[0] : show(e))).join(",") : show(i.envs)}`,
        );
      if (i.healthcheck) parts.push("healthcheck");
      if (i.wait) parts.push("wait");
      break;
    }
    case RESOURCE_TYPES.network:
      parts.push(i.internal ? "internal" : "external");
      break;
    case RESOURCE_TYPES.image:
      parts.push(`name=${show(i.name)}`);
      if (i.build) parts.push(`dockerfile=${show(i.build.dockerfile)}`);
      break;
    case RESOURCE_TYPES.dockerProvider:
      if (i.host) parts.push(`host=${show(i.host)}`);
      break;
    case "aws:ec2/instance:Instance":
      parts.push(
        `instanceType=${show(i.instanceType)}`,
        `httpTokens=${show(i.metadataOptions?.httpTokens)}`,
        `rootEncrypted=${show(i.rootBlockDevice?.encrypted)}`,
      );
      break;
    case "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule":
    case "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule":
      parts.push(
        `${show(i.ipProtocol)} ${i.fromPort}-${i.toPort}`,
        `from/to=${show(i.cidrIpv4 ?? i.cidrIpv6 ?? i.referencedSecurityGroupId)}`,
      );
      break;
    case RESOURCE_TYPES.command:
      parts.push(`create=${show(i.create)}`);
      break;
  }
  return parts.join(" ");
}

/**
 * Where a pool's leases are, held to where its stacks' state is: with no `store`, each machine leases from its own
 * file (src/accounts/location.ts), which is safe only while the state is a local file too, so that no other machine
 * deploys the same stacks. A state elsewhere (a cloud backend, an object store) needs a store every stack shares.
 */
function poolStoreProblems(pool: PoolConfig, backendUrl: string): string[] {
  if (pool.store !== undefined || backendUrl.startsWith("file://")) return [];
  const where = URL.canParse(backendUrl) ? `${new URL(backendUrl).protocol}//${new URL(backendUrl).host}` : "elsewhere";
  return [
    `multienv:pool.store: is unset, so each machine leases the pool's accounts from its own store, but the stacks' state is not a local file (it is at ${where}), so another machine may deploy the same stacks and lease an account twice; set store to a PostgreSQL URL every stack of the pool reaches, e.g. postgres://multienv@db.internal/multienv`,
  ];
}

/**
 * A live site that leases its account from a pool: the pool's stack file beside the task's, valid, its leases in a
 * store its stacks share, and none of the site's own settings one that an account of the pool sets (the site's
 * account settings are the pool's alone). The pool's warnings too.
 */
function pooledSiteFindings(
  config: StackConfig,
  stacksDir: string,
  backendUrl: string,
): { problems: string[]; warnings: string[] } {
  const problems: string[] = [];
  const warnings: string[] = [];
  for (const [site, website] of Object.entries(config.websites)) {
    const pool = website.accountPool;
    if (pool === undefined) continue;
    const at = `multienv:websites.${site}.accountPool`;
    const poolFile = join(stacksDir, `Pulumi.${pool}.yaml`);
    if (!existsSync(poolFile)) {
      problems.push(`${at}: names pool ${pool}, which has no stack file ${poolFile}; write it with multienv:pool`);
      continue;
    }
    if (!isPoolFile(poolFile)) {
      problems.push(`${at}: ${poolFile} is not a pool's stack (it has no multienv:pool)`);
      continue;
    }
    let accounts;
    try {
      const read = readPoolFile(poolFile, pool);
      accounts = read.pool.accounts;
      problems.push(...poolStoreProblems(read.pool, backendUrl).map((p) => `pool ${pool}: ${p}`));
      warnings.push(...read.warnings.map((w) => `pool ${pool}: ${formatProblem(w)}`));
    } catch (error) {
      if (!(error instanceof ConfigError)) throw error;
      problems.push(...error.problems.map((p) => `pool ${pool}: ${formatProblem(p)}`));
      continue;
    }
    for (const setting of Object.keys(website.settings).sort()) {
      const setBy = Object.keys(accounts).filter(
        (a) => Object.hasOwn(accounts[a].settings, setting) || Object.hasOwn(accounts[a].secretSettings, setting),
      );
      if (setBy.length > 0)
        problems.push(
          `multienv:websites.${site}.settings.${setting}: is an account setting of pool ${pool} (accounts ${setBy.join(", ")}); a site that leases its account takes its account settings from the pool alone, so remove it here`,
        );
    }
  }
  return { problems, warnings };
}
