// Policy: every security group and security group rule description uses only the characters AWS accepts
// there. AWS refuses any other (an apostrophe, say) when it creates the rule, after the VMs exist, so an
// `up` fails half-way with both VMs left running; the policy refuses it before anything is created.
import { asArray, asRecord, input, TYPES, type PolicyResource } from "../model";
import type { ResourceRule } from "../rule";

/** The characters AWS allows in a group's and a rule's description (EC2-VPC), and its length limit. */
export const AWS_DESCRIPTION_CHARS = /^[a-zA-Z0-9. _\-:/()#,@[\]+=&;{}!$*]*$/;
export const AWS_DESCRIPTION_MAX = 255;

/** Each description a resource carries, with where it is. */
function descriptionsOf(resource: PolicyResource): [string, unknown][] {
  const own: [string, unknown][] = [["description", input(resource, "description")]];
  if (resource.type !== TYPES.securityGroup) return own;
  const inline = (key: string): [string, unknown][] =>
    asArray(input(resource, key)).map((e, i) => [`${key}[${i}].description`, asRecord(e).description]);
  return [...own, ...inline("ingress"), ...inline("egress")];
}

export const awsDescriptionCharset: ResourceRule = {
  kind: "resource",
  name: "aws-description-charset",
  description:
    `Security group and rule descriptions may hold only a-z A-Z 0-9 space and . _ - : / ( ) # , @ [ ] + = & ; { } ! $ *, at most ${AWS_DESCRIPTION_MAX} characters, or AWS refuses the resource mid-deploy. ` +
    "To comply: reword the description without the other characters (no apostrophes or quotes).",
  appliesTo: [TYPES.securityGroup, TYPES.securityGroupRule, TYPES.ingressRule, TYPES.egressRule],
  check(resource) {
    const problems: string[] = [];
    for (const [where, value] of descriptionsOf(resource)) {
      if (typeof value !== "string") continue;
      const bad = [...new Set([...value].filter((c) => !AWS_DESCRIPTION_CHARS.test(c)))];
      if (bad.length > 0)
        problems.push(
          `${where} ${JSON.stringify(value)} has characters AWS refuses there (${bad.map((c) => JSON.stringify(c)).join(", ")}); reword it without them`,
        );
      if (value.length > AWS_DESCRIPTION_MAX)
        problems.push(`${where} is ${value.length} characters; AWS takes at most ${AWS_DESCRIPTION_MAX}`);
    }
    return problems;
  },
};
