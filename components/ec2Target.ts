// The ec2 target: a VM for the env and one per computer, each with its own Docker engine (reached over SSH)
// and security group; every image is built or pulled on the runner's engine and copied to the VMs that run it.
import type * as awsTypes from "@pulumi/aws";
import { aws } from "./aws";
import * as pulumi from "@pulumi/pulumi";
import type { PlannedComputer } from "../src/plan";
import {
  awsTags,
  computerEngineNetworks,
  computerPeer,
  ec2UserData,
  envEngineNetworks,
  projectImagesNeeded,
} from "../src/plan/layout";
import { LABELS } from "../policies/contract";
import { DockerEngine } from "./dockerEngine";
import { Ec2Firewall } from "./ec2Firewall";
import { Ec2Host } from "./ec2Host";
import type { EnvTarget, EnvTargetArgs } from "./envTarget";

/** A multi env on EC2 VMs. */
export class Ec2Target extends pulumi.ComponentResource implements EnvTarget {
  readonly env: DockerEngine;
  readonly gatewayPrivateAddress: pulumi.Output<string>;
  readonly gatewayPublicAddress: pulumi.Output<string>;
  private readonly computerHosts = new Map<string, Ec2Host>();
  private readonly computerEngines = new Map<string, DockerEngine>();

  constructor(name: string, args: EnvTargetArgs, opts?: pulumi.ComponentResourceOptions) {
    super("multienv:ec2:Ec2Target", name, {}, opts);
    const { plan } = args;
    if (plan.ec2 === undefined) {
      throw new pulumi.ResourceError("multienv:ec2: target is ec2 and the ec2 settings are missing; set multienv:ec2 (region, instanceType, runnerCidrs, sshPublicKey)", this);
    }
    const ec2 = plan.ec2;
    const tags = (name: string) => awsTags(plan, name);
    const awsProvider = new (aws().Provider)(`${plan.stack}-aws`, { region: ec2.region as awsTypes.Region }, { parent: this });
    const awsOpts = { parent: this, providers: { aws: awsProvider } };
    const firewall = new Ec2Firewall(`${plan.stack}-firewall`, { plan }, awsOpts);
    // The default AMI is the instance type's architecture's; the VMs ignore later changes of it (below), so a new
    // AMI release reaches new VMs only, and an `up` never replaces a running one for it.
    const ami: pulumi.Input<string> =
      ec2.ami ?? aws().ssm.getParameterOutput({ name: ec2.amiParameter! }, { parent: this, provider: awsProvider }).value;
    const host = (name: string, key: string) =>
      new Ec2Host(
        name,
        {
          instanceType: ec2.instanceType,
          ami,
          subnetId: ec2.subnetId,
          securityGroupId: firewall.groupId(key),
          sshPublicKey: ec2.sshPublicKey,
          sshUser: ec2.sshUser,
          userData: ec2UserData(ec2.sshUser, ec2.lifetimeHours),
          tags,
          readyAfter: firewall.rules,
        },
        awsOpts,
      );
    const engineArgs = { buildContext: args.buildContext, baseImage: args.baseImage, labels: { [LABELS.stack]: plan.stack } };
    // Every image is built or pulled on the runner's engine and copied to the VMs that run it (see DockerEngine).
    const images = new DockerEngine(
      `${plan.stack}-images`,
      { ...engineArgs, target: args.runnerEngine, networks: { internal: [], external: [] }, volumes: [], projectImages: projectImagesNeeded(true, plan.computers) },
      { parent: this },
    );
    const imagesFor = (vm: Ec2Host) => ({ engine: images, sshTarget: vm.sshTarget, after: [vm.ready] });
    const envHost = host(`${plan.stack}-env`, "env");
    const env = new DockerEngine(
      `${plan.stack}-env-engine`,
      {
        ...engineArgs,
        target: envHost.target,
        networks: envEngineNetworks(plan),
        volumes: plan.capture.enabled ? [plan.capture.volumeName] : [],
        projectImages: [],
        imagesFrom: imagesFor(envHost),
        deletedWith: envHost.instance,
      },
      { parent: this },
    );
    for (const computer of plan.computers) {
      const vm = host(`${plan.stack}-${computer.name}`, computerPeer(computer.name));
      this.computerHosts.set(computer.name, vm);
      this.computerEngines.set(
        computer.name,
        new DockerEngine(
          `${plan.stack}-${computer.name}-engine`,
          {
            ...engineArgs,
            target: vm.target,
            networks: computerEngineNetworks(computer),
            volumes: [computer.caVolumeName],
            projectImages: [],
            imagesFrom: imagesFor(vm),
            deletedWith: vm.instance,
          },
          { parent: this },
        ),
      );
    }
    this.env = env;
    this.gatewayPrivateAddress = envHost.privateIp;
    this.gatewayPublicAddress = envHost.publicIp;
    this.registerOutputs({});
  }

  computer(computer: PlannedComputer): DockerEngine {
    return this.computerEngines.get(computer.name)!;
  }

  computerAddress(computer: PlannedComputer): pulumi.Output<string> {
    return this.computerHosts.get(computer.name)!.privateIp;
  }
}
