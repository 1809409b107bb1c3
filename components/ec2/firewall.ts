// ec2 target: the security groups of the env's VMs, each an allowlist (src/plan/targets/ec2.ts `ec2SecurityRules`).
// The groups come first and the rules after, as their own resources, because the env VM's rules name the
// computer VMs' groups and theirs name the env's. AWS's default allow-all egress is removed on creation.
import type * as awsTypes from "@pulumi/aws";
import { aws } from "./aws";
import * as pulumi from "@pulumi/pulumi";
import type { Plan } from "../../src/plan";
import type { HostSecurity, SecurityRule } from "../../src/plan/targets/ec2";
import { awsTags, computerPeer, ec2SecurityRules } from "../../src/plan/targets/ec2";

export interface Ec2FirewallArgs {
  /** The plan: the stack, the computers, ec2 (runner CIDRs, VPC). */
  plan: Pick<Plan, "stack" | "target" | "ec2" | "computers">;
}

/** `env` for the env VM, `computer:<name>` for a computer's VM. */
export type HostKey = string;

/** The security groups of the env's VMs, one allowlist per VM, and their rules. */
export class Ec2Firewall extends pulumi.ComponentResource {
  private readonly groups = new Map<HostKey, awsTypes.ec2.SecurityGroup>();
  /** Every rule resource: a VM's readiness check waits for them (SSH must be open). */
  readonly rules: pulumi.Resource[] = [];

  constructor(name: string, args: Ec2FirewallArgs, opts?: pulumi.ComponentResourceOptions) {
    super("multienv:ec2:Ec2Firewall", name, {}, opts);
    const { plan } = args;
    if (plan.target !== "ec2" || plan.ec2 === undefined)
      throw new pulumi.ResourceError(`Ec2Firewall ${name}: the plan's target is ${plan.target}, not ec2`, this);
    if (plan.ec2.runnerCidrs.length === 0)
      throw new pulumi.ResourceError(
        `Ec2Firewall ${name}: no runner CIDRs; nobody could reach the gateway or SSH`,
        this,
      );
    const security = ec2SecurityRules(plan);
    // The groups must live in the VPC of the VMs' subnet: the given VPC, else the subnet's, else the default VPC.
    const vpcId: pulumi.Input<string> | undefined =
      plan.ec2.vpcId ??
      (plan.ec2.subnetId !== undefined
        ? aws().ec2.getSubnetOutput({ id: plan.ec2.subnetId }, { parent: this }).vpcId
        : undefined);
    const hosts: { key: HostKey; role: string; security: HostSecurity }[] = [
      { key: "env", role: "env", security: security.env },
      ...plan.computers.map((c) => ({ key: computerPeer(c.name), role: c.name, security: security.computers[c.name] })),
    ];
    for (const { key, role } of hosts) {
      const groupName = `${name}-${role}-sg`;
      this.groups.set(
        key,
        new (aws().ec2.SecurityGroup)(
          groupName,
          {
            description: `multienv ${plan.stack}: ${key === "env" ? "the env VM (gateway, sites)" : `the VM of ${key}`}; an allowlist`,
            vpcId,
            revokeRulesOnDelete: true,
            tags: awsTags(plan, groupName),
          },
          { parent: this },
        ),
      );
    }
    for (const { key, role, security: host } of hosts) {
      host.ingress.forEach((rule, i) => this.addRules(plan, `${name}-${role}-in-${i}`, key, rule, "ingress"));
      host.egress.forEach((rule, i) => this.addRules(plan, `${name}-${role}-out-${i}`, key, rule, "egress"));
    }
    this.registerOutputs({});
  }

  /** The security group id of a host. */
  groupId(key: HostKey): pulumi.Output<string> {
    const group = this.groups.get(key);
    if (group === undefined) throw new pulumi.ResourceError(`Ec2Firewall: no security group for ${key}`, this);
    return group.id;
  }

  private addRules(
    plan: Pick<Plan, "stack">,
    name: string,
    key: HostKey,
    rule: SecurityRule,
    direction: "ingress" | "egress",
  ): void {
    const sources: { suffix: string; peer: Partial<awsTypes.vpc.SecurityGroupIngressRuleArgs> }[] = [];
    if (rule.peer !== undefined)
      sources.push({ suffix: "", peer: { referencedSecurityGroupId: this.groupId(rule.peer) } });
    (rule.cidrBlocks ?? []).forEach((cidr, i) => sources.push({ suffix: `-v4-${i}`, peer: { cidrIpv4: cidr } }));
    (rule.ipv6CidrBlocks ?? []).forEach((cidr, i) => sources.push({ suffix: `-v6-${i}`, peer: { cidrIpv6: cidr } }));
    for (const { suffix, peer } of sources) {
      const args = {
        securityGroupId: this.groupId(key),
        description: rule.description,
        ipProtocol: rule.protocol,
        fromPort: rule.fromPort,
        toPort: rule.toPort,
        ...peer,
        tags: awsTags(plan, `${name}${suffix}`),
      };
      const opts = { parent: this };
      this.rules.push(
        direction === "ingress"
          ? new (aws().vpc.SecurityGroupIngressRule)(`${name}${suffix}`, args, opts)
          : new (aws().vpc.SecurityGroupEgressRule)(`${name}${suffix}`, args, opts),
      );
    }
  }
}
