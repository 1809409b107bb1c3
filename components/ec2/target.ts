// The ec2 target: a VM for the env and one per computer, each with its own security group, then on those VMs
// what the hosts target does on any SSH-reachable Docker hosts (RemoteEngines).
import type * as awsTypes from "@pulumi/aws";
import { aws } from "./aws";
import * as pulumi from "@pulumi/pulumi";
import { awsTags, computerPeer } from "../../src/plan/targets/ec2";
import { Ec2Firewall } from "./firewall";
import { Ec2Host } from "./host";
import type { EnvTargetArgs } from "../engine/envTarget";
import type { RemoteHost } from "../hosts/remoteEngines";
import { RemoteTarget } from "../hosts/remote";

/** A multi env on EC2 VMs. */
export class Ec2Target extends RemoteTarget {
  constructor(name: string, args: EnvTargetArgs, opts?: pulumi.ComponentResourceOptions) {
    super("multienv:ec2:Ec2Target", name, {}, opts);
    const { plan } = args;
    if (plan.ec2 === undefined) {
      throw new pulumi.ResourceError(
        "multienv:ec2: target is ec2 and the ec2 settings are missing; set multienv:ec2 (region, instanceType, runnerCidrs, sshPublicKey)",
        this,
      );
    }
    const ec2 = plan.ec2;
    const tags = (name: string) => awsTags(plan, name);
    const awsProvider = new (aws().Provider)(
      `${name}-aws`,
      { region: ec2.region as awsTypes.Region },
      { parent: this },
    );
    const awsOpts = { parent: this, providers: { aws: awsProvider } };
    // The firewall takes this target's name (its type tells them apart): its groups are `<name>-env-sg`.
    const firewall = new Ec2Firewall(name, { plan }, { ...awsOpts, aliases: [{ name: `${name}-firewall` }] });
    // The default AMI is the instance type's architecture's; the VMs ignore later changes of it (below), so a new
    // AMI release reaches new VMs only, and an `up` never replaces a running one for it.
    const ami: pulumi.Input<string> =
      ec2.ami ??
      aws().ssm.getParameterOutput({ name: ec2.amiParameter! }, { parent: this, provider: awsProvider }).value;
    const vm = (role: string, key: string) =>
      new Ec2Host(
        `${name}-${role}`,
        {
          instanceType: ec2.instanceType,
          ami,
          subnetId: ec2.subnetId,
          securityGroupId: firewall.groupId(key),
          sshPublicKey: ec2.sshPublicKey,
          sshUser: ec2.sshUser,
          lifetimeHours: ec2.lifetimeHours,
          tags,
        },
        awsOpts,
      );
    const remote = (host: Ec2Host): RemoteHost => ({
      ssh: host.ssh,
      privateAddress: host.privateIp,
      booted: true,
      machine: host.instance,
      readyAfter: firewall.rules,
    });
    const envVm = vm("env", "env");
    const computers = Object.fromEntries(plan.computers.map((c) => [c.name, remote(vm(c.name, computerPeer(c.name)))]));
    // Everything on the VMs is the hosts target's work: only how the VMs came to be is ec2's.
    this.handOver(name, args, remote(envVm), computers);
    this.registerOutputs({});
  }
}
