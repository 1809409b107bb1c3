// ec2 target: one VM with Docker. IMDSv2 is required with a hop limit of 1 (no token for a container to steal
// credentials with) and the root volume is encrypted. Its SSH host key is made at deploy and installed by user
// data, so the runner pins it (src/plan/targets/ssh.ts) and never accepts another. The VM's security group comes from
// Ec2Firewall; what runs on it, and its readiness, from RemoteEngines.
import type * as awsTypes from "@pulumi/aws";
import { aws } from "./aws";
import * as pulumi from "@pulumi/pulumi";
import { ec2UserData } from "../../src/plan/targets/ec2";
import type { SshEndpoint } from "../../src/plan/targets/ssh";
import { SshHostKey } from "../../src/providers/resources";
import { OPENSSH_PUBLIC_KEY } from "../../src/config/schema";

export interface Ec2HostArgs {
  /** Instance type, e.g. `t3.large`. */
  instanceType: string;
  /**
   * The AMI; it must have Docker or reach the web ports to install it. A later change of it is ignored (no
   * replacement).
   */
  ami: pulumi.Input<string>;
  /** The subnet; unset: the default subnet of the default VPC. */
  subnetId?: string;
  /** The VM's security group (its allowlist). */
  securityGroupId: pulumi.Input<string>;
  /** The SSH public key the runner connects with; its private key must be in the runner's ssh-agent. */
  sshPublicKey: string;
  /** The login user of the AMI. */
  sshUser: string;
  /** Hours after boot at which the VM powers off and so terminates (its lifetime fuse). */
  lifetimeHours: number;
  /** Tags for every AWS resource of the host (the stack and task tags among them); `Name` is set per resource. */
  tags: (name: string) => Record<string, string>;
}

/** One EC2 VM with Docker, its key pair and its pinned SSH host key, terminated by its lifetime fuse. */
export class Ec2Host extends pulumi.ComponentResource {
  readonly instance: awsTypes.ec2.Instance;
  readonly publicIp: pulumi.Output<string>;
  readonly privateIp: pulumi.Output<string>;
  /** How the runner reaches the VM: its public address, the SSH user, the host key made for it. */
  readonly ssh: pulumi.Output<SshEndpoint>;

  constructor(name: string, args: Ec2HostArgs, opts?: pulumi.ComponentResourceOptions) {
    super("multienv:ec2:Ec2Host", name, {}, opts);
    if (!OPENSSH_PUBLIC_KEY.test(args.sshPublicKey)) {
      throw new pulumi.ResourceError(
        `Ec2Host ${name}: sshPublicKey is not an OpenSSH public key (ssh-ed25519 AAAA..., ssh-rsa AAAA...)`,
        this,
      );
    }
    const keyPair = new (aws().ec2.KeyPair)(
      `${name}-key`,
      { publicKey: args.sshPublicKey, tags: args.tags(`${name}-key`) },
      { parent: this },
    );
    const hostKey = new SshHostKey(`${name}-host-key`, { comment: `${name} host key` }, { parent: this });
    this.instance = new (aws().ec2.Instance)(
      `${name}-vm`,
      {
        ami: args.ami,
        instanceType: args.instanceType,
        keyName: keyPair.keyName,
        subnetId: args.subnetId,
        vpcSecurityGroupIds: [args.securityGroupId],
        associatePublicIpAddress: true,
        // It holds the host's private key: a secret in the state.
        userData: pulumi.secret(hostKey.privateKey.apply((key) => ec2UserData(args.sshUser, args.lifetimeHours, key))),
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
    this.ssh = pulumi
      .all([this.publicIp, hostKey.publicKey])
      .apply(([host, key]) => ({ host, user: args.sshUser, hostKey: key }));
    this.registerOutputs({ publicIp: this.publicIp, privateIp: this.privateIp });
  }
}
