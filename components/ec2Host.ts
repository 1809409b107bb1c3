// ec2 target: one VM with Docker, whose engine is reached over SSH (docker-api.ts) once a readiness command has
// seen Docker answer. IMDSv2 is required (no token-less metadata for a container to steal credentials through) and
// the root volume is encrypted. The VM's security group comes from Ec2Firewall.
import type * as awsTypes from "@pulumi/aws";
import { aws } from "./aws";
import * as pulumi from "@pulumi/pulumi";
import { EC2_SSH_OPTIONS, remoteReadinessCommand } from "../src/plan/layout";
import type { EngineTarget } from "../src/providers/docker-api";
import { LocalCommand } from "../src/providers/resources";
import { OPENSSH_PUBLIC_KEY } from "../src/config/schema";

export interface Ec2HostArgs {
  /** Instance type, e.g. `t3.large`. */
  instanceType: string;
  /** The AMI; it must have Docker or reach the web ports to install it. A later change of it is ignored (no replacement). */
  ami: pulumi.Input<string>;
  /** The subnet; unset: the default subnet of the default VPC. */
  subnetId?: string;
  /** The VM's security group (its allowlist). */
  securityGroupId: pulumi.Input<string>;
  /** The SSH public key the runner connects with; its private key must be in the runner's ssh-agent. */
  sshPublicKey: string;
  /** The login user of the AMI. */
  sshUser: string;
  /** User data: installs and starts Docker. */
  userData: string;
  /** Tags for every AWS resource of the host (the stack and task tags among them); `Name` is set per resource. */
  tags: (name: string) => Record<string, string>;
  /** What must exist before the readiness check can connect (the firewall rules that open SSH). */
  readyAfter: pulumi.Resource[];
}

export class Ec2Host extends pulumi.ComponentResource {
  readonly instance: awsTypes.ec2.Instance;
  /** This VM's engine, over SSH; it answers once `ready` is done. */
  readonly target: pulumi.Output<EngineTarget>;
  readonly publicIp: pulumi.Output<string>;
  readonly privateIp: pulumi.Output<string>;
  /** `user@publicIp`: where the runner reaches the VM over SSH. */
  readonly sshTarget: pulumi.Output<string>;
  /** The readiness check: done once Docker answers on the VM. */
  readonly ready: LocalCommand;

  constructor(name: string, args: Ec2HostArgs, opts?: pulumi.ComponentResourceOptions) {
    super("multienv:ec2:Ec2Host", name, {}, opts);
    if (!OPENSSH_PUBLIC_KEY.test(args.sshPublicKey)) {
      throw new Error(`Ec2Host ${name}: sshPublicKey is not an OpenSSH public key (ssh-ed25519 AAAA..., ssh-rsa AAAA...)`);
    }
    const keyPair = new (aws().ec2.KeyPair)(`${name}-key`, { publicKey: args.sshPublicKey, tags: args.tags(`${name}-key`) }, { parent: this });
    this.instance = new (aws().ec2.Instance)(
      `${name}-vm`,
      {
        ami: args.ami,
        instanceType: args.instanceType,
        keyName: keyPair.keyName,
        subnetId: args.subnetId,
        vpcSecurityGroupIds: [args.securityGroupId],
        associatePublicIpAddress: true,
        userData: args.userData,
        userDataReplaceOnChange: true,
        // The lifetime fuse in user data powers the VM off; this makes that a termination, so it stops billing.
        instanceInitiatedShutdownBehavior: "terminate",
        metadataOptions: { httpTokens: "required", httpEndpoint: "enabled", httpPutResponseHopLimit: 1 },
        rootBlockDevice: { encrypted: true, volumeType: "gp3", deleteOnTermination: true },
        tags: args.tags(`${name}-vm`),
        volumeTags: args.tags(`${name}-vm-root`),
      },
      // A new release of the default AMI changes its SSM parameter: running VMs keep the AMI they booted.
      { parent: this, ignoreChanges: ["ami"] },
    );
    this.publicIp = this.instance.publicIp;
    this.privateIp = this.instance.privateIp;
    this.sshTarget = pulumi.interpolate`${args.sshUser}@${this.publicIp}`;
    this.ready = new LocalCommand(
      `${name}-docker-ready`,
      { create: this.sshTarget.apply(remoteReadinessCommand), triggers: [this.instance.id] },
      { parent: this, dependsOn: args.readyAfter },
    );
    // Containers on this VM carry the readiness check as a dependency through the target.
    this.target = pulumi.all([this.sshTarget, this.ready.stdout]).apply(([target]) => ({ host: `ssh://${target}`, sshOptions: EC2_SSH_OPTIONS }));
    this.registerOutputs({ publicIp: this.publicIp, privateIp: this.privateIp });
  }
}
