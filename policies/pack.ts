// The pack's rules as CrossGuard policies, all mandatory. Resource rules become resource validations
// filtered by type with validateResourceOfType (so the engine skips other types cheaply); stack rules
// become stack validations. The checks themselves are the rules' own (rules/), shared with `multienv check`.
import * as aws from "@pulumi/aws";
import * as docker from "@pulumi/docker";
import { validateResourceOfType, type Policies, type ResourceValidation, type ResourceValidationPolicy, type StackValidationPolicy } from "@pulumi/policy";
import { checkResource, checkStack, resourceFromCrossGuard, stackFromCrossGuard } from "./evaluate";
import { TYPES } from "./model";
import type { ResourceRule, Rule, StackRule } from "./rule";
import { RULES } from "./rules";

/** The SDK class of each type token a resource rule names: validateResourceOfType needs the class. */
const CLASSES: Record<string, new (...args: any[]) => any> = {
  [TYPES.container]: docker.Container,
  [TYPES.network]: docker.Network,
  [TYPES.volume]: docker.Volume,
  [TYPES.securityGroup]: aws.ec2.SecurityGroup,
  [TYPES.securityGroupRule]: aws.ec2.SecurityGroupRule,
  [TYPES.ingressRule]: aws.vpc.SecurityGroupIngressRule,
  [TYPES.egressRule]: aws.vpc.SecurityGroupEgressRule,
  [TYPES.instance]: aws.ec2.Instance,
};

function report(rule: ResourceRule): ResourceValidation {
  return (args, reportViolation) => {
    for (const v of checkResource(rule, resourceFromCrossGuard(args))) reportViolation(v.message);
  };
}

function resourcePolicy(rule: ResourceRule): ResourceValidationPolicy {
  let validateResource: ResourceValidation | ResourceValidation[];
  if (rule.appliesTo === "aws") {
    validateResource = (args, reportViolation) => {
      if (!args.type.startsWith("aws:")) args.notApplicable("applies to AWS resources only");
      report(rule)(args, reportViolation);
    };
  } else {
    validateResource = rule.appliesTo.map((type) => {
      const cls = CLASSES[type];
      if (cls === undefined) throw new Error(`policies/pack.ts: no SDK class for ${type}; add it to CLASSES`);
      return validateResourceOfType(cls, (_props, args, reportViolation) => report(rule)(args, reportViolation));
    });
    if (validateResource.length === 1) validateResource = validateResource[0];
  }
  return { name: rule.name, description: rule.description, enforcementLevel: "mandatory", validateResource };
}

function stackPolicy(rule: StackRule): StackValidationPolicy {
  return {
    name: rule.name,
    description: rule.description,
    enforcementLevel: "mandatory",
    validateStack: (args, reportViolation) => {
      for (const v of checkStack(rule, stackFromCrossGuard(args))) reportViolation(v.message, v.resource === "stack" ? undefined : v.resource);
    },
  };
}

export function toCrossGuard(rule: Rule): ResourceValidationPolicy | StackValidationPolicy {
  return rule.kind === "resource" ? resourcePolicy(rule) : stackPolicy(rule);
}

export const PACK_NAME = "multienv";

export const policies: Policies = RULES.map(toCrossGuard);
