// The shape of one policy: a name, a description that tells the user how to comply, and a pure check.
// A resource rule judges one resource on its own; a stack rule needs several (a network and its members,
// a volume and who mounts it). The same objects feed the CrossGuard pack (pack.ts) and `multienv check`
// (evaluate.ts), so a rule lives in exactly one place.
import type { PolicyResource, PolicyStack } from "./model";

export interface ResourceRule {
  kind: "resource";
  name: string;
  description: string;
  /** The type tokens the rule applies to; "aws" for every AWS resource. */
  appliesTo: readonly string[] | "aws";
  /** One message per violation; none when the resource complies. */
  check(resource: PolicyResource): string[];
}

export interface StackFinding {
  /** The resource at fault; undefined for the stack as a whole. */
  resource?: PolicyResource;
  message: string;
}

export interface StackRule {
  kind: "stack";
  name: string;
  description: string;
  check(stack: PolicyStack): StackFinding[];
}

export type Rule = ResourceRule | StackRule;

export function appliesTo(rule: ResourceRule, type: string): boolean {
  return rule.appliesTo === "aws" ? type.startsWith("aws:") : rule.appliesTo.includes(type);
}
