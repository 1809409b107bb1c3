// Running the pack's rules over plain data: the entry point `multienv check` uses, and the adapters
// from each source (a graph rendered under Pulumi's mocks; CrossGuard's validation arguments).
import type { PolicyResource as CrossGuardResource, ResourceValidationArgs, StackValidationArgs } from "@pulumi/policy";
import { describe, resourceId, TYPES, type PolicyResource, type PolicyStack, type Violation } from "./model";
import { appliesTo, type ResourceRule, type Rule, type StackRule } from "./rule";
import { RULES } from "./rules";

/** One resource as src/runner/check/graph.ts renders it under Pulumi's mocks. */
export interface GraphResource {
  type: string;
  name: string;
  urn?: string;
  /** Inputs as the mocks received them: secret values keep Pulumi's secret marker (or are "[secret]"). */
  inputs: Record<string, unknown>;
  /** The name and type of the resource's parent, for resources that have one (other than the stack). */
  parent?: string;
  parentType?: string;
  /** The logical name of the resource's explicit provider, itself a resource of the graph. */
  provider?: string;
  /** The resource option; unset means none when the graph records resource options (see RunOptions). */
  additionalSecretOutputs?: string[];
}

export interface Graph {
  resources: GraphResource[];
  outputs?: Record<string, unknown>;
}

export interface RunOptions {
  /** Plaintext values known to be secret, e.g. the stack's secret config values; no plaintext may contain them. */
  knownSecrets?: string[];
  /** Only these policies (by name); all when unset. */
  only?: string[];
  /**
   * Whether the graph records resource options, so a resource without `additionalSecretOutputs` has none.
   * Default true (src/runner/check/graph.ts records them); false skips the rules that need them.
   */
  resourceOptionsKnown?: boolean;
}

/** A mocked graph as the pack's data: secret markers are still there, so secret-ness is judged. */
export function stackFromGraph(graph: Graph | GraphResource[], options: RunOptions = {}): PolicyStack {
  const { resources, outputs } = Array.isArray(graph) ? { resources: graph, outputs: undefined } : graph;
  const providers = new Map(
    resources.filter((r) => r.type.startsWith("pulumi:providers:")).map((r) => [r.name, r.inputs]),
  );
  return {
    resources: resources
      .filter((r) => r.type !== TYPES.stack)
      .map((r) => ({
        type: r.type,
        name: r.name,
        urn: r.urn,
        inputs: r.inputs ?? {},
        additionalSecretOutputs: r.additionalSecretOutputs ?? (options.resourceOptionsKnown === false ? undefined : []),
        parentType: r.parentType,
        provider: r.provider,
        providerInputs: r.provider === undefined ? undefined : providers.get(r.provider),
      })),
    outputs,
    secretsVisible: true,
    knownSecrets: options.knownSecrets,
  };
}

/** A resource rule over one resource; each message is prefixed with the resource's name. */
export function checkResource(rule: ResourceRule, resource: PolicyResource): Violation[] {
  if (!appliesTo(rule, resource.type)) return [];
  return rule.check(resource).map((message) => ({
    policy: rule.name,
    resource: resourceId(resource),
    name: resource.name,
    type: resource.type,
    message: `${describe(resource)} ${message}`,
  }));
}

export function checkStack(rule: StackRule, stack: PolicyStack): Violation[] {
  return rule
    .check(stack)
    .map(({ resource, message }) =>
      resource === undefined
        ? { policy: rule.name, resource: "stack", message }
        : { policy: rule.name, resource: resourceId(resource), name: resource.name, type: resource.type, message },
    );
}

/** Every violation of the pack's rules in `stack`, resource rules first, in the pack's order. */
export function evaluate(stack: PolicyStack, rules: readonly Rule[] = RULES): Violation[] {
  const violations: Violation[] = [];
  for (const rule of rules) {
    if (rule.kind === "resource")
      for (const resource of stack.resources) violations.push(...checkResource(rule, resource));
    else violations.push(...checkStack(rule, stack));
  }
  return violations;
}

/**
 * The pack over a graph rendered under Pulumi's mocks: what `multienv check` reports.
 * Accepts the graph (`{resources, outputs}`) or just its resources. Each violation names the policy,
 * the resource (URN, else logical name; "stack" for the stack as a whole) and what to do.
 */
export function runPolicies(graph: Graph | GraphResource[], options: RunOptions = {}): Violation[] {
  const rules = options.only ? RULES.filter((r) => options.only!.includes(r.name)) : RULES;
  return evaluate(stackFromGraph(graph, options), rules);
}

/**
 * One resource as CrossGuard hands it over (secrets already unwrapped): to a resource validation, or as one of
 * a stack validation's resources, which alone know their parent.
 */
export function resourceFromCrossGuard(r: ResourceValidationArgs | CrossGuardResource): PolicyResource {
  return {
    type: r.type,
    name: r.name,
    urn: r.urn,
    inputs: r.props,
    additionalSecretOutputs: r.opts?.additionalSecretOutputs,
    parentType: "parent" in r ? r.parent?.type : undefined,
    provider: r.provider?.urn,
    providerInputs: r.provider?.props,
  };
}

/** The stack as CrossGuard hands it to a stack validation; the Stack resource's properties are its outputs. */
export function stackFromCrossGuard(args: StackValidationArgs): PolicyStack {
  const root = args.resources.find((r) => r.type === TYPES.stack);
  return {
    resources: args.resources.filter((r) => r.type !== TYPES.stack).map(resourceFromCrossGuard),
    outputs: root?.props,
    secretsVisible: false,
  };
}
