// Policy 5, ec2: security groups never open SSH, the gateway's ports, DevTools or a proxy's control (log)
// port to the whole internet; no VM (so no computer whose network is an allowlist) has all-protocol or
// all-port egress to the world; instances require IMDSv2 with a hop limit of 1 and encrypt their root volume;
// every taggable AWS resource carries the stack and task tags.
import { CDP_PORT, GATEWAY_BROWSE_PORT, GATEWAY_PORT, SITE_PROXY_CONTROL_PORT } from "../../src/plan/topology";
import { TAGS } from "../contract";
import { asArray, asRecord, asString, awsTagsOf, input, TYPES, type PolicyResource } from "../model";
import type { ResourceRule } from "../rule";
import { UNTAGGABLE_AWS_TYPES } from "./aws-untaggable";

const SSH_PORT = 22;
/** What each guarded port is, for messages: every one would hand a stranger the env or a browser. */
const GUARDED: Record<number, string> = {
  [SSH_PORT]: "SSH",
  [GATEWAY_PORT]: "the gateway port",
  [GATEWAY_BROWSE_PORT]: "the gateway browse port",
  [SITE_PROXY_CONTROL_PORT]: "a site proxy's control port (its log, CA and DevTools)",
  [CDP_PORT]: "the browser's DevTools port",
};
const GUARDED_PORTS = Object.keys(GUARDED).map(Number);

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

/** The permissions a resource grants one way: inline in a SecurityGroup, or one rule resource. */
function permissionsOf(resource: PolicyResource, direction: "ingress" | "egress"): Permission[] {
  switch (resource.type) {
    case TYPES.securityGroup:
      return asArray(input(resource, direction)).map((e) => {
        const r = asRecord(e);
        return {
          protocol: r.protocol,
          fromPort: r.fromPort,
          toPort: r.toPort,
          cidrs: [...asArray(r.cidrBlocks), ...asArray(r.ipv6CidrBlocks)],
        };
      });
    case TYPES.securityGroupRule:
      if (input(resource, "type") !== direction) return [];
      return [
        {
          protocol: input(resource, "protocol"),
          fromPort: input(resource, "fromPort"),
          toPort: input(resource, "toPort"),
          cidrs: [...asArray(input(resource, "cidrBlocks")), ...asArray(input(resource, "ipv6CidrBlocks"))],
        },
      ];
    case direction === "ingress" ? TYPES.ingressRule : TYPES.egressRule:
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
    `Security group ingress must never open SSH (${SSH_PORT}), the gateway's ports (${GATEWAY_PORT}, ${GATEWAY_BROWSE_PORT}), a site proxy's control and log port (${SITE_PROXY_CONTROL_PORT}) or DevTools (${CDP_PORT}) to 0.0.0.0/0 or ::/0. ` +
    "To comply: allow those ports only from the runner's CIDRs (ec2.runnerCidrs in the stack config).",
  appliesTo: [TYPES.securityGroup, TYPES.securityGroupRule, TYPES.ingressRule],
  check(resource) {
    const problems: string[] = [];
    for (const permission of permissionsOf(resource, "ingress")) {
      for (const port of worldOpenPorts(permission)) {
        const what = GUARDED[port];
        const to = permission.cidrs.filter(isWorld).join(" and ");
        problems.push(`opens ${what} (${port}) to ${to}; allow it only from the runner's CIDRs (ec2.runnerCidrs)`);
      }
    }
    return problems;
  },
};

/** tcp or udp over every port (0 or 1 to 65535): all protocols in all but name. */
function isEveryPort(p: Permission): boolean {
  const protocol = String(p.protocol ?? "").toLowerCase();
  if (!["tcp", "6", "udp", "17"].includes(protocol)) return false;
  return Number(p.fromPort) <= 1 && Number(p.toPort) >= 65535;
}

// Stricter than "a computer whose network is an allowlist": docs/design.md gives every VM of the env an allowlist
// (the env VM the web ports and the computers' relay ports; a computer VM the gateway port, plus the web ports
// only when it reaches public hosts), so an all-protocol egress is wrong on any of them, and the rule needs
// no mark telling which group belongs to which computer. Every port of tcp (or udp) to the world is the same
// hole under another name.
export const ec2NoOpenEgress: ResourceRule = {
  kind: "resource",
  name: "ec2-no-open-egress",
  description:
    "No security group may allow all protocols on all ports out, nor every tcp or udp port to the world: a computer whose network is an allowlist reaches only the gateway VM's port and, when it reaches public hosts, the web ports; the env VM only what it needs. " +
    "To comply: replace a protocol -1 (all) or a 0-65535 egress with tcp rules for the ports the VM needs.",
  appliesTo: [TYPES.securityGroup, TYPES.securityGroupRule, TYPES.egressRule],
  check(resource) {
    const problems: string[] = [];
    for (const p of permissionsOf(resource, "egress")) {
      if (isAllProtocols(p.protocol)) {
        problems.push(
          "allows all protocols on all ports out; allow only the tcp ports the VM needs (the gateway port, the web ports when it reaches public hosts)",
        );
      } else if (isEveryPort(p) && p.cidrs.some(isWorld)) {
        problems.push(
          `allows ${String(p.protocol)} ${String(p.fromPort)}-${String(p.toPort)} out to ${p.cidrs.filter(isWorld).join(" and ")}: every port, as good as all protocols; allow only the ports the VM needs`,
        );
      }
    }
    return problems;
  },
};

export const ec2InstanceHardening: ResourceRule = {
  kind: "resource",
  name: "ec2-instance-hardening",
  description:
    "Every EC2 instance must require IMDSv2 with a response hop limit of 1 (a container, one hop further, gets no token) and encrypt its root volume. " +
    'To comply: set metadataOptions.httpTokens: "required", metadataOptions.httpPutResponseHopLimit: 1 and rootBlockDevice.encrypted: true.',
  appliesTo: [TYPES.instance],
  check(instance) {
    const problems: string[] = [];
    const metadata = asRecord(input(instance, "metadataOptions"));
    const tokens = asString(metadata.httpTokens);
    if (tokens !== "required")
      problems.push(
        `does not require IMDSv2 (metadataOptions.httpTokens is ${tokens === undefined ? "unset" : `"${tokens}"`}); set it to "required"`,
      );
    // Unset is AWS's default of 1 for most AMIs but 2 for some: only an explicit 1 is known to hold.
    const hops = metadata.httpPutResponseHopLimit;
    if (Number(hops) !== 1) {
      problems.push(
        `metadataOptions.httpPutResponseHopLimit is ${hops === undefined ? "unset" : String(hops)}; set it to 1, so a container on the VM (one hop further) cannot get a metadata token`,
      );
    }
    if (asRecord(input(instance, "rootBlockDevice")).encrypted !== true)
      problems.push("does not encrypt its root volume; set rootBlockDevice.encrypted: true");
    return problems;
  },
};

export const ec2LifetimeFuse: ResourceRule = {
  kind: "resource",
  name: "ec2-lifetime-fuse",
  description:
    "Every EC2 instance must terminate when it shuts down, so the lifetime fuse in its user data (a power-off timer, ec2.lifetimeHours) ends the VM and its bill, even for a task nobody destroys. " +
    'To comply: set instanceInitiatedShutdownBehavior: "terminate".',
  appliesTo: [TYPES.instance],
  check(instance) {
    const behaviour = asString(input(instance, "instanceInitiatedShutdownBehavior"));
    return behaviour === "terminate"
      ? []
      : [
          `instanceInitiatedShutdownBehavior is ${behaviour === undefined ? "unset (stop)" : `"${behaviour}"`}: a VM that powers itself off would keep its volume billing and could be started again; set it to "terminate"`,
        ];
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
      .map(
        (key) =>
          `has no ${key} tag; add it to the resource's tags (or the provider's defaultTags). If this resource type cannot carry tags, add "${resource.type}" to policies/rules/aws-untaggable.ts`,
      );
  },
};
