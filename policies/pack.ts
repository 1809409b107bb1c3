// The pack's rules as CrossGuard policies, all mandatory. Resource rules become resource validations that
// say "not applicable" to other types (the Docker resources are dynamic resources, which have no SDK class
// for validateResourceOfType to filter by); stack rules become stack validations. The checks themselves are the rules'
// own (rules/), shared with `multienv check`.
import {
  type Policies,
  type ResourceValidation,
  type ResourceValidationPolicy,
  type StackValidationPolicy,
} from "@pulumi/policy";
import { checkResource, checkStack, resourceFromCrossGuard, stackFromCrossGuard } from "./evaluate";
import { appliesTo, type ResourceRule, type Rule, type StackRule } from "./rule";
import { RULES } from "./rules";

function report(rule: ResourceRule): ResourceValidation {
  return (args, reportViolation) => {
    for (const v of checkResource(rule, resourceFromCrossGuard(args))) reportViolation(v.message);
  };
}

function resourcePolicy(rule: ResourceRule): ResourceValidationPolicy {
  const validateResource: ResourceValidation = (args, reportViolation) => {
    if (!appliesTo(rule, args.type)) {
      args.notApplicable(
        rule.appliesTo === "aws" ? "applies to AWS resources only" : `applies to ${rule.appliesTo.join(", ")} only`,
      );
      return;
    }
    report(rule)(args, reportViolation);
  };
  return { name: rule.name, description: rule.description, enforcementLevel: "mandatory", validateResource };
}

function stackPolicy(rule: StackRule): StackValidationPolicy {
  return {
    name: rule.name,
    description: rule.description,
    enforcementLevel: "mandatory",
    validateStack: (args, reportViolation) => {
      for (const v of checkStack(rule, stackFromCrossGuard(args)))
        reportViolation(v.message, v.resource === "stack" ? undefined : v.resource);
    },
  };
}

export function toCrossGuard(rule: Rule): ResourceValidationPolicy | StackValidationPolicy {
  return rule.kind === "resource" ? resourcePolicy(rule) : stackPolicy(rule);
}

export const PACK_NAME = "multienv";

export const policies: Policies = RULES.map(toCrossGuard);
