// Policy 5, ec2: security groups never open SSH or the gateway port to the whole internet; no VM (so no
// computer whose network is an allowlist) has all-protocol egress; instances require IMDSv2 and
// encrypt their root volume; every taggable AWS resource carries the stack and task tags.
import { GATEWAY_PORT } from "../../src/plan/topology";
import { TAGS } from "../contract";
import { asArray, asRecord, asString, awsTagsOf, input, TYPES, type PolicyResource } from "../model";
import type { ResourceRule } from "../rule";
import { UNTAGGABLE_AWS_TYPES } from "./aws-untaggable";

const SSH_PORT = 22;
const GUARDED_PORTS = [SSH_PORT, GATEWAY_PORT];

/** 0.0.0.0/0, ::/0 and any other prefix of length 0: every address. */
function isWorld(cidr: unknown): boolean {
  return typeof cidr === "string" && /\/0$/.test(cidr.trim());
}

function isAllProtocols(protocol: unknown): boolean {
  const p = String(protocol ?? "").toLowerCase();
  return p === "-1" || p === "all";
}

function isTcp(protocol: unknown): boolean {
  const p = String(protocol ?? "").toLowerCase();
  return p === "tcp" || p === "6";
}

/** One permission in a normalized form, whichever resource it came from. */
interface Permission {
  protocol: unknown;
  fromPort: unknown;
  toPort: unknown;
  cidrs: unknown[];
}

/** The guarded ports a permission opens to every address. */
function worldOpenPorts(p: Permission): number[] {
  if (!p.cidrs.some(isWorld)) return [];
  if (isAllProtocols(p.protocol)) return GUARDED_PORTS;
  if (!isTcp(p.protocol)) return [];
  const from = Number(p.fromPort);
  const to = p.toPort === undefined ? from : Number(p.toPort);
  return GUARDED_PORTS.filter((port) => from <= port && port <= to);
}

/** The ingress permissions a resource grants: inline in a SecurityGroup, or one rule resource. */
function ingressOf(resource: PolicyResource): Permission[] {
  switch (resource.type) {
    case TYPES.securityGroup:
      return asArray(input(resource, "ingress")).map((e) => {
        const r = asRecord(e);
        return { protocol: r.protocol, fromPort: r.fromPort, toPort: r.toPort, cidrs: [...asArray(r.cidrBlocks), ...asArray(r.ipv6CidrBlocks)] };
      });
    case TYPES.securityGroupRule:
      if (input(resource, "type") !== "ingress") return [];
      return [
        {
          protocol: input(resource, "protocol"),
          fromPort: input(resource, "fromPort"),
          toPort: input(resource, "toPort"),
          cidrs: [...asArray(input(resource, "cidrBlocks")), ...asArray(input(resource, "ipv6CidrBlocks"))],
        },
      ];
    case TYPES.ingressRule:
      return [
        {
          protocol: input(resource, "ipProtocol"),
          fromPort: input(resource, "fromPort"),
          toPort: input(resource, "toPort"),
          cidrs: [input(resource, "cidrIpv4"), input(resource, "cidrIpv6")].filter((c) => c !== undefined),
        },
      ];
    default:
      return [];
  }
}

export const ec2IngressClosedToWorld: ResourceRule = {
  kind: "resource",
  name: "ec2-ingress-closed-to-world",
  description:
    `Security group ingress must never open SSH (${SSH_PORT}) or the gateway port (${GATEWAY_PORT}) to 0.0.0.0/0 or ::/0. ` +
    "To comply: allow those ports only from the runner's CIDRs (ec2.runnerCidrs in the stack config).",
  appliesTo: [TYPES.securityGroup, TYPES.securityGroupRule, TYPES.ingressRule],
  check(resource) {
    const problems: string[] = [];
    for (const permission of ingressOf(resource)) {
      for (const port of worldOpenPorts(permission)) {
        const what = port === SSH_PORT ? "SSH" : "the gateway port";
        const to = permission.cidrs.filter(isWorld).join(" and ");
        problems.push(`opens ${what} (${port}) to ${to}; allow it only from the runner's CIDRs (ec2.runnerCidrs)`);
      }
    }
    return problems;
  },
};

/** The protocol of every egress permission a resource grants. */
function egressProtocolsOf(resource: PolicyResource): unknown[] {
  switch (resource.type) {
    case TYPES.securityGroup:
      return asArray(input(resource, "egress")).map((e) => asRecord(e).protocol);
    case TYPES.securityGroupRule:
      return input(resource, "type") === "egress" ? [input(resource, "protocol")] : [];
    case TYPES.egressRule:
      return [input(resource, "ipProtocol")];
    default:
      return [];
  }
}

// Stricter than "a computer whose network is an allowlist": docs/design.md gives every VM of the env an allowlist
// (the env VM the web ports and the computers' relay ports; a computer VM the gateway port, plus the web ports
// only when it reaches public hosts), so an all-protocol egress is wrong on any of them, and the rule needs
// no mark telling which group belongs to which computer.
export const ec2NoOpenEgress: ResourceRule = {
  kind: "resource",
  name: "ec2-no-open-egress",
  description:
    "No security group may allow all protocols on all ports out: a computer whose network is an allowlist reaches only the gateway VM's port and, when it reaches public hosts, the web ports; the env VM only what it needs. " +
    "To comply: replace a protocol -1 (all) egress with tcp rules for the ports the VM needs.",
  appliesTo: [TYPES.securityGroup, TYPES.securityGroupRule, TYPES.egressRule],
  check(resource) {
    return egressProtocolsOf(resource).some(isAllProtocols)
      ? ["allows all protocols on all ports out; allow only the tcp ports the VM needs (the gateway port, the web ports when it reaches public hosts)"]
      : [];
  },
};

export const ec2InstanceHardening: ResourceRule = {
  kind: "resource",
  name: "ec2-instance-hardening",
  description:
    "Every EC2 instance must require IMDSv2 and encrypt its root volume. " +
    'To comply: set metadataOptions.httpTokens: "required" and rootBlockDevice.encrypted: true.',
  appliesTo: [TYPES.instance],
  check(instance) {
    const problems: string[] = [];
    const tokens = asString(asRecord(input(instance, "metadataOptions")).httpTokens);
    if (tokens !== "required") problems.push(`does not require IMDSv2 (metadataOptions.httpTokens is ${tokens === undefined ? "unset" : `"${tokens}"`}); set it to "required"`);
    if (asRecord(input(instance, "rootBlockDevice")).encrypted !== true) problems.push("does not encrypt its root volume; set rootBlockDevice.encrypted: true");
    return problems;
  },
};

export const awsResourceTags: ResourceRule = {
  kind: "resource",
  name: "aws-resource-tags",
  description:
    `Every AWS resource that can carry tags must carry ${TAGS.stack} and ${TAGS.task}. ` +
    "To comply: set both tags on the resource (or in the AWS provider's defaultTags).",
  appliesTo: "aws",
  check(resource) {
    if (UNTAGGABLE_AWS_TYPES.has(resource.type)) return [];
    const tags = awsTagsOf(resource);
    return [TAGS.stack, TAGS.task]
      .filter((key) => (tags[key] ?? "") === "")
      .map((key) => `has no ${key} tag; add it to the resource's tags (or the provider's defaultTags). If this resource type cannot carry tags, add "${resource.type}" to policies/rules/aws-untaggable.ts`);
  },
};
