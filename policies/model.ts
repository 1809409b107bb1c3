// The plain data every policy is written against, and the readers that pull facts out of it.
// Two sources fill it: a graph rendered under Pulumi's mocks (`multienv check`) and CrossGuard's
// validation arguments (`pulumi up --policy-pack policies`); see evaluate.ts for both adapters.
import { PROJECT_IMAGES } from "../src/plan/images";
import { topologyNames } from "../src/plan/topology";
import { RESOURCE_TYPES } from "../src/protocol/resource-types";
import { CAPTURES_VOLUME_ROLE, LABELS, POD_CONTAINERS, ROLES, type ContainerRole } from "./contract";
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
  namespace: "kubernetes:core/v1:Namespace",
  pod: "kubernetes:core/v1:Pod",
  service: "kubernetes:core/v1:Service",
  kubernetesSecret: "kubernetes:core/v1:Secret",
  networkPolicy: "kubernetes:networking.k8s.io/v1:NetworkPolicy",
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

/** The Docker name: the `name` input (a Kubernetes object's `metadata.name`), else the logical name. */
export function dockerName(resource: PolicyResource): string {
  if (resource.type.startsWith("kubernetes:")) return metadataOf(resource).name ?? resource.name;
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

// ---- kubernetes -----------------------------------------------------------------------------
// A Kubernetes resource's inputs are its manifest (`metadata`, `spec`, `stringData`...), under the mocks and under
// CrossGuard alike. In a preview, parts of it are unknown (a pod's hostAliases hold the ClusterIPs of new
// Services); those parts read as unset, so the rest of the manifest is still judged.

/** The sentinels a value takes where it is not known yet: CrossGuard's (in a preview) and the mocked graph's. */
const UNKNOWN_VALUES = new Set([
  "1c4a061d-8072-4f0a-a4cb-0ff528b18fe7",
  "3eeb2bf0-c639-47a8-9e75-3b44932eb421",
  "04da6b54-80e4-46f7-96ec-b56ff0331ba9",
  "6a19a0b0-7e62-4c92-b797-7f8e31da9cc2",
  "030794c1-ac77-496b-92df-f27374a8bd58",
  "e48ece36-62e2-4504-bad9-02848725956a",
  "dd056dcd-154b-4c76-9bd3-c8f88648b5ff",
  "[unknown]",
]);

/** The object behind @pulumi/policy's unknown-checking proxy (reading through the proxy throws on an unknown). */
function unproxied(value: unknown): unknown {
  if (typeof value !== "object" || value === null) return value;
  const target = (value as Record<string, unknown>).__getSpecialProxyTarget;
  return target === undefined ? value : target;
}

/** `value` with secret marks removed and every unknown part read as unset, at any depth. */
export function revealKnown(value: unknown): unknown {
  const plain = unproxied(value);
  if (typeof plain === "string" && UNKNOWN_VALUES.has(plain)) return undefined;
  if (isSecretValue(plain) && typeof plain === "object") return revealKnown((plain as { value?: unknown }).value);
  if (Array.isArray(plain)) return plain.map(revealKnown);
  if (typeof plain === "object" && plain !== null && Object.getPrototypeOf(plain) === Object.prototype) {
    return Object.fromEntries(Object.entries(plain).map(([k, v]) => [k, revealKnown(v)]));
  }
  return plain;
}

/** An input as the source holds it: secret marks kept, an unknown value as its sentinel (reading it never throws). */
export function rawInput(resource: PolicyResource, key: string): unknown {
  return unproxied(asRecord(unproxied(resource.inputs))[key]);
}

/** One input of a Kubernetes resource (its manifest's `spec`, `metadata`...), unknown parts unset. */
export function manifest(resource: PolicyResource, key: string): unknown {
  return revealKnown(rawInput(resource, key));
}

export interface KubernetesMetadata {
  name?: string;
  /** Unset where not known (a preview, before the namespace exists): such a resource may be in any namespace. */
  namespace?: string;
  labels: Record<string, string>;
  annotations: Record<string, string>;
}

export function metadataOf(resource: PolicyResource): KubernetesMetadata {
  return memo(metadataCache, resource, () => {
    const m = asRecord(manifest(resource, "metadata"));
    const strings = (value: unknown) =>
      Object.fromEntries(Object.entries(asRecord(value)).map(([k, v]) => [k, String(v ?? "")]));
    return {
      name: asString(m.name),
      namespace: asString(m.namespace),
      labels: strings(m.labels),
      annotations: strings(m.annotations),
    };
  });
}

const metadataCache = new WeakMap<PolicyResource, KubernetesMetadata>();

/** Whether two namespaces may be one: equal, or either not known yet. */
export function sameNamespace(a: string | undefined, b: string | undefined): boolean {
  return a === undefined || b === undefined || a === b;
}

/** A pod's `multienv.role` label. */
export function podRoleOf(pod: PolicyResource): string | undefined {
  return metadataOf(pod).labels[LABELS.role];
}

export type PodContainerKind = "init" | "main" | "ephemeral";

/** One container of a pod, as its spec writes it, and what it is to the pack. */
export interface PodContainer {
  name: string;
  kind: PodContainerKind;
  image?: string;
  /** The pod role's, or `capture` / `capture-server` for a website pod's capture sidecars (see podContainerRole). */
  role: string | undefined;
  spec: Record<string, unknown>;
  /** Its position in its list (`initContainers`, `containers`, `ephemeralContainers`). */
  index: number;
}

const WEBSITE_POD_ROLES: string[] = [ROLES.server, ROLES.frontend, ROLES.replay];

/** Whether a pod is a website's (its server, its frontend, or a replayed site's replay server). */
export function isWebsitePod(pod: PolicyResource): boolean {
  return WEBSITE_POD_ROLES.includes(podRoleOf(pod) ?? "");
}

/**
 * What a container of a pod is: in a website pod, an init container named `capture` is the capture (tcpdump) and
 * one named `capture-server` its file server; every other container has its pod's role. So a container called
 * `capture` anywhere else (a browser's pod, a site's main containers) is no capture and holds nothing a capture may.
 */
function podContainerRole(pod: PolicyResource, name: string, kind: PodContainerKind): string | undefined {
  if (kind === "init" && isWebsitePod(pod)) {
    if (name === POD_CONTAINERS.capture) return ROLES.capture;
    if (name === POD_CONTAINERS.captureServer) return POD_CONTAINERS.captureServer;
  }
  return podRoleOf(pod);
}

/** A pod's spec, unknown parts unset. */
export function podSpecOf(pod: PolicyResource): Record<string, unknown> {
  return asRecord(manifest(pod, "spec"));
}

/** Every container of a pod: init containers (native sidecars among them), its containers, ephemeral ones. */
export function podContainersOf(pod: PolicyResource): PodContainer[] {
  const spec = podSpecOf(pod);
  const kinds: [string, PodContainerKind][] = [
    ["initContainers", "init"],
    ["containers", "main"],
    ["ephemeralContainers", "ephemeral"],
  ];
  return kinds.flatMap(([key, kind]) =>
    asArray(spec[key]).map((entry, index) => {
      const c = asRecord(entry);
      const name = asString(c.name) ?? "(unnamed)";
      return { name, kind, image: asString(c.image), role: podContainerRole(pod, name, kind), spec: c, index };
    }),
  );
}

/** Whether an init container keeps running beside the pod's containers (`restartPolicy: Always`). */
export function isNativeSidecar(container: PodContainer): boolean {
  return container.kind === "init" && container.spec.restartPolicy === "Always";
}

/** Whether an image is one of the project's own (`multienv/<role>`), under an image registry or not. */
export function isProjectImage(image: string | undefined, role: keyof typeof PROJECT_IMAGES): boolean {
  if (image === undefined) return false;
  const own = PROJECT_IMAGES[role].imageName;
  return image === own || image.endsWith(`/${own}`);
}

/** One entry of a container's `env`, as a pod spec writes it. */
export interface PodEnvEntry {
  name: string;
  /** The entry sets `value` (in the pod spec itself). */
  hasValue: boolean;
  /** The `value`, or something enclosing it, is secret-marked (the mocks' view: a secret put into the spec). */
  secretValue: boolean;
  valueFrom?: Record<string, unknown>;
}

/** Steps into `value` by `keys`, through proxies and secret marks; whether a mark was passed on the way. */
function rawAt(value: unknown, keys: (string | number)[]): { value: unknown; secret: boolean } {
  let current = unproxied(value);
  let secret = false;
  for (const key of [undefined, ...keys]) {
    if (key !== undefined) current = unproxied(asRecord(current)[key as never] ?? asArray(current)[key as never]);
    while (isSecretValue(current)) {
      secret = true;
      if (typeof current !== "object" || current === null) break;
      current = unproxied((current as { value?: unknown }).value);
    }
  }
  return { value: current, secret };
}

/** A container's `env`, read from the raw inputs so that secret marks show. */
export function podEnvOf(pod: PolicyResource, container: PodContainer): PodEnvEntry[] {
  const env = rawAt(pod.inputs, ["spec", containerListKey(container.kind), container.index, "env"]);
  return asArray(env.value).map((_, i) => {
    const entry = asRecord(revealKnown(asArray(env.value)[i]));
    const value = rawAt(env.value, [i, "value"]);
    return {
      name: asString(entry.name) ?? "",
      hasValue: entry.value !== undefined,
      secretValue: env.secret || value.secret,
      ...(entry.valueFrom !== undefined ? { valueFrom: asRecord(entry.valueFrom) } : {}),
    };
  });
}

function containerListKey(kind: PodContainerKind): string {
  return kind === "init" ? "initContainers" : kind === "main" ? "containers" : "ephemeralContainers";
}

/** The pods of a stack a NetworkPolicy peer's or a policy's `podSelector` selects, in `namespace`. */
export function selectedPods(
  pods: PolicyResource[],
  selector: unknown,
  namespace: string | undefined,
): PolicyResource[] {
  return pods.filter((p) => sameNamespace(metadataOf(p).namespace, namespace) && matchesSelector(selector, p));
}

/** Whether a label selector (`matchLabels`, `matchExpressions`) selects a pod; `{}` selects every pod. */
export function matchesSelector(selector: unknown, pod: PolicyResource): boolean {
  const { matchLabels, matchExpressions } = asRecord(selector);
  const labels = metadataOf(pod).labels;
  for (const [k, v] of Object.entries(asRecord(matchLabels))) if (labels[k] !== String(v)) return false;
  for (const e of asArray(matchExpressions)) {
    const { key, operator, values } = asRecord(e);
    const has = typeof key === "string" && key in labels;
    const within =
      has &&
      asArray(values)
        .map(String)
        .includes(labels[key as string]);
    if (operator === "In" && !within) return false;
    if (operator === "NotIn" && within) return false;
    if (operator === "Exists" && !has) return false;
    if (operator === "DoesNotExist" && has) return false;
  }
  return true;
}

export { asArray, asRecord, asString };
