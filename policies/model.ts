// The plain data every policy is written against, and the readers that pull facts out of it.
// Two sources fill it: a graph rendered under Pulumi's mocks (`multienv check`) and CrossGuard's
// validation arguments (`pulumi up --policy-pack policies`); see evaluate.ts for both adapters.
import { topologyNames } from "../src/plan/topology";
import { RESOURCE_TYPES } from "../src/providers/types";
import { CAPTURES_VOLUME_ROLE, LABELS, ROLES, type ContainerRole } from "./contract";
import { isSecretValue, reveal } from "./secrets";

/** Pulumi type tokens of the resources the pack looks at (test/policies checks them against the SDK classes). */
export const TYPES = {
  container: RESOURCE_TYPES.container,
  network: RESOURCE_TYPES.network,
  volume: RESOURCE_TYPES.volume,
  secret: RESOURCE_TYPES.secret,
  securityGroup: "aws:ec2/securityGroup:SecurityGroup",
  securityGroupRule: "aws:ec2/securityGroupRule:SecurityGroupRule",
  ingressRule: "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule",
  egressRule: "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule",
  instance: "aws:ec2/instance:Instance",
  stack: "pulumi:pulumi:Stack",
} as const;

export interface PolicyResource {
  /** Pulumi type token, e.g. `docker:index/container:Container`. */
  type: string;
  /** Logical (Pulumi) name. */
  name: string;
  /** Known under CrossGuard; a mocked graph has only names. */
  urn?: string;
  /** Input properties. Values may be secret-marked (see secrets.ts); readers below reveal them. */
  inputs: Record<string, unknown>;
  /** The `additionalSecretOutputs` resource option, where the source knows options (CrossGuard does, mocks do not). */
  additionalSecretOutputs?: string[];
  /** The type of the resource's parent (a component such as `multienv:index:ControlToken`), where known. */
  parentType?: string;
  /** The resource's explicit provider (its name in a graph, its URN under CrossGuard). */
  provider?: string;
  /** The inputs of the resource's provider, where known: AWS default tags live there. */
  providerInputs?: Record<string, unknown>;
}

export interface PolicyStack {
  resources: PolicyResource[];
  /** The stack's outputs, where known. */
  outputs?: Record<string, unknown>;
  /**
   * True when secret values are still marked as such (Pulumi mocks). False under CrossGuard,
   * which unwraps every secret before a policy runs, so secret-ness cannot be judged there.
   */
  secretsVisible: boolean;
  /** Plaintext values known to be secret (for example the stack's secret config values). */
  knownSecrets?: string[];
}

export interface Violation {
  /** The policy's name, as in the pack. */
  policy: string;
  /** The resource's URN, or its logical name when no URN is known; "stack" for the stack as a whole. */
  resource: string;
  /** The resource's logical name and type; unset for the stack as a whole. */
  name?: string;
  type?: string;
  /** What is wrong and how to comply. */
  message: string;
}

/** Who a violation is about: the resource's URN where known, else its name. */
export function resourceId(resource: PolicyResource): string {
  return resource.urn ?? resource.name;
}

export function input(resource: PolicyResource, key: string): unknown {
  return reveal(resource.inputs[key]);
}

/** @pulumi/policy's error for reading a value a preview cannot know yet (internal to the package, so untyped). */
const { UnknownValueError } = require("@pulumi/policy/proxy") as { UnknownValueError: new (...args: never[]) => Error };

/**
 * The input, or undefined where CrossGuard cannot know it yet: during a preview, an input computed from another
 * new resource (a sidecar's `networkMode: container:<id>`). The same check runs again with the value known
 * before the resource is created, so reading it as unset here loses nothing and spares an advisory per preview.
 */
export function knownInput(resource: PolicyResource, key: string): unknown {
  try {
    return input(resource, key);
  } catch (error) {
    if (error instanceof UnknownValueError) return undefined;
    throw error;
  }
}

function asArray(value: unknown): unknown[] {
  return Array.isArray(value) ? value : [];
}

function asRecord(value: unknown): Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
}

function asString(value: unknown): string | undefined {
  return typeof value === "string" ? value : undefined;
}

// ---- docker ---------------------------------------------------------------------------------

/** Docker labels as a map; docker.Container/Network/Volume take them as `[{label, value}]`. */
export function labelsOf(resource: PolicyResource): Record<string, string> {
  return memo(labelCache, resource, () => {
    const labels: Record<string, string> = {};
    for (const entry of asArray(input(resource, "labels"))) {
      const { label, value } = asRecord(entry);
      if (typeof label === "string") labels[label] = String(value ?? "");
    }
    return labels;
  });
}

// Rules ask for the same facts of a resource many times over; resources are not changed while a pack runs.
const labelCache = new WeakMap<PolicyResource, Record<string, string>>();
const networkCache = new WeakMap<PolicyResource, string[]>();

function memo<T>(cache: WeakMap<PolicyResource, T>, resource: PolicyResource, compute: () => T): T {
  let value = cache.get(resource);
  if (value === undefined) {
    value = compute();
    cache.set(resource, value);
  }
  return value;
}

/**
 * A container's role: its `multienv.role` label; a container labelled only with the site it captures is a capture
 * sidecar.
 */
export function roleOf(resource: PolicyResource): ContainerRole | string | undefined {
  const labels = labelsOf(resource);
  return labels[LABELS.role] ?? (labels[LABELS.captureSite] !== undefined ? ROLES.capture : undefined);
}

/** The Docker name: the `name` input, else the logical name. */
export function dockerName(resource: PolicyResource): string {
  return asString(input(resource, "name")) ?? resource.name;
}

/** How a resource is called in a message: its Docker/AWS name and, when different, its logical name. */
export function describe(resource: PolicyResource): string {
  const name = dockerName(resource);
  return name === resource.name ? `"${name}"` : `"${name}" (${resource.name})`;
}

export function ofType(stack: PolicyStack, type: string): PolicyResource[] {
  return stack.resources.filter((r) => r.type === type);
}

export function containersOf(stack: PolicyStack): PolicyResource[] {
  return ofType(stack, TYPES.container);
}

export interface EnvEntry {
  name: string;
  value: string;
  /** The entry, or the whole `envs` list, is secret-marked. */
  secret: boolean;
}

/** A container's environment: docker.Container takes `envs` as `["NAME=value", ...]`. */
export function envOf(container: PolicyResource): EnvEntry[] {
  const raw = container.inputs.envs;
  const listSecret = isSecretValue(raw);
  const list = asArray(revealOuter(raw));
  const entries: EnvEntry[] = [];
  for (const item of list) {
    const text = reveal(item);
    if (typeof text !== "string") continue;
    const eq = text.indexOf("=");
    entries.push({
      name: eq < 0 ? text : text.slice(0, eq),
      value: eq < 0 ? "" : text.slice(eq + 1),
      secret: listSecret || isSecretValue(item),
    });
  }
  return entries;
}

/** The array inside a secret-marked list, keeping the marks on its elements. */
function revealOuter(value: unknown): unknown {
  if (isSecretValue(value) && typeof value === "object" && value !== null && "value" in value)
    return (value as { value: unknown }).value;
  return value;
}

export interface MountInfo {
  /** Volume name (named volumes), host path (binds), or undefined. */
  source?: string;
  target?: string;
  readOnly: boolean;
  kind: "volume" | "bind" | "tmpfs" | "from-container";
  fromContainer?: string;
}

/** Everything mounted into a container: the `volumes` and `mounts` inputs together. */
export function mountsOf(container: PolicyResource): MountInfo[] {
  const found: MountInfo[] = [];
  for (const entry of asArray(input(container, "volumes"))) {
    const v = asRecord(entry);
    if (typeof v.fromContainer === "string") {
      found.push({ kind: "from-container", fromContainer: v.fromContainer, readOnly: v.readOnly === true });
      continue;
    }
    found.push({
      kind: typeof v.volumeName === "string" ? "volume" : "bind",
      source: asString(v.volumeName) ?? asString(v.hostPath),
      target: asString(v.containerPath),
      readOnly: v.readOnly === true,
    });
  }
  for (const entry of asArray(input(container, "mounts"))) {
    const m = asRecord(entry);
    const type = asString(m.type);
    found.push({
      kind: type === "bind" ? "bind" : type === "tmpfs" ? "tmpfs" : "volume",
      source: asString(m.source),
      target: asString(m.target),
      readOnly: m.readOnly === true,
    });
  }
  return found;
}

/** The names of the networks a container joins through `networksAdvanced`. */
export function advancedNetworksOf(container: PolicyResource): string[] {
  return asArray(input(container, "networksAdvanced"))
    .map((n) => asString(asRecord(n).name))
    .filter((n): n is string => n !== undefined);
}

/** The network a container's `networkMode` names, if it names a user network (not bridge/host/none/container:). */
export function networkModeNetwork(container: PolicyResource): string | undefined {
  const mode = asString(knownInput(container, "networkMode"));
  if (mode === undefined || mode === "" || isBuiltinNetworkMode(mode)) return undefined;
  return mode;
}

export function isBuiltinNetworkMode(mode: string): boolean {
  return ["bridge", "default", "host", "none"].includes(mode) || mode.startsWith("container:");
}

/**
 * Which Docker engine a resource is on: the `host` of the docker provider it is created with (none: the local
 * engine), so two providers of one host are one engine; undefined when that is not known (no provider or its
 * inputs not known, or a host not known yet, as in a preview before the VM exists).
 */
function engineOf(resource: PolicyResource): string | undefined {
  if (resource.provider === undefined || resource.providerInputs === undefined) return undefined;
  const host = reveal(resource.providerInputs.host);
  const text = JSON.stringify(host === undefined || host === null ? "" : host);
  return /\[unknown\]|04da6b54-80e4-46f7-96ec-b56ff0331ba9/.test(text) ? undefined : text;
}

/** True when two resources may be on the same Docker engine: the same provider host, or one of them unknown. */
export function sameEngine(a: PolicyResource, b: PolicyResource): boolean {
  const [ea, eb] = [engineOf(a), engineOf(b)];
  return ea === undefined || eb === undefined || ea === eb;
}

/** Every user network a container is on. */
export function networksOf(container: PolicyResource): string[] {
  return memo(networkCache, container, () => {
    const names = new Set(advancedNetworksOf(container));
    const mode = networkModeNetwork(container);
    if (mode !== undefined) names.add(mode);
    return [...names];
  });
}

/**
 * The names a container's attachment may use for a docker.Network: its Docker name (components pass `network.name`).
 */
export function networkRefs(network: PolicyResource): string[] {
  return [dockerName(network)];
}

/**
 * The captures volumes of a stack: `<stack>-captures` for the stack the volume is labelled with, or labelled
 * `multienv.role=captures`.
 */
export function capturesVolumes(stack: PolicyStack): PolicyResource[] {
  return ofType(stack, TYPES.volume).filter((v) => {
    const labels = labelsOf(v);
    if (labels[LABELS.role] === CAPTURES_VOLUME_ROLE) return true;
    const owner = labels[LABELS.stack];
    return owner !== undefined && dockerName(v) === topologyNames.capturesVolume(owner);
  });
}

// ---- aws ------------------------------------------------------------------------------------

/** A resource's own `tags` merged over its provider's default tags (where the provider is known). */
export function awsTagsOf(resource: PolicyResource): Record<string, string> {
  const tags: Record<string, string> = {};
  let defaults = resource.providerInputs ? reveal(resource.providerInputs.defaultTags) : undefined;
  if (typeof defaults === "string") {
    try {
      defaults = JSON.parse(defaults);
    } catch {
      defaults = undefined;
    }
  }
  for (const [k, v] of Object.entries(asRecord(asRecord(defaults).tags))) tags[k] = String(v ?? "");
  for (const [k, v] of Object.entries(asRecord(input(resource, "tags")))) tags[k] = String(v ?? "");
  return tags;
}

export { asArray, asRecord, asString };
