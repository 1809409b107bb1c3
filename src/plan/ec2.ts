// The ec2 target's own decisions from its config section: which architecture the instance type runs, so which
// AMI the VMs boot; the SSH user; how long a VM may live; and the combinations AWS would take but mis-place.
import { problem } from "./problems";
import type { Ec2Config, PlannedEc2, Problem, StackConfig } from "./types";

/** The CPU architecture of an EC2 instance type, as the AMI parameters name it. */
export type Ec2Architecture = "arm64" | "x86_64";

/** The login user of the default AMI (Amazon ECS-optimized Amazon Linux 2023). */
export const EC2_DEFAULT_SSH_USER = "ec2-user";

/** Hours a VM runs before it powers itself off and, since its shutdown behaviour is terminate, is terminated. */
export const EC2_DEFAULT_LIFETIME_HOURS = 4;

/**
 * The SSM parameters naming the default AMI per architecture: Amazon Linux 2023 with Docker already installed,
 * so a computer VM whose security group has no web egress still has Docker at boot.
 */
export const EC2_DEFAULT_AMI_PARAMETERS: Record<Ec2Architecture, string> = {
  x86_64: "/aws/service/ecs/optimized-ami/amazon-linux-2023/recommended/image_id",
  arm64: "/aws/service/ecs/optimized-ami/amazon-linux-2023/arm64/recommended/image_id",
};

/**
 * The architecture of an instance type. Graviton families carry a `g` right after their generation (`t4g`,
 * `m7gd`, `c6gn`, `im4gn`, `is4gen`, `g5g`), and `a1` is the first; GPU families start with `g` before the
 * generation (`g4dn`, `g6`, `gr6`) and are x86, as is every other family.
 */
export function instanceArchitecture(instanceType: string): Ec2Architecture {
  const family = instanceType.split(".")[0];
  if (family === "a1") return "arm64";
  const match = /^[a-z]+(?:-[a-z0-9]+)?\d+([a-z-]*)$/.exec(family);
  return match !== null && match[1].startsWith("g") ? "arm64" : "x86_64";
}

/** Refusals of the ec2 section, each naming its key. */
export function ec2Problems(config: StackConfig): Problem[] {
  const ec2 = config.ec2;
  if (config.target !== "ec2" || ec2 === undefined) return [];
  const problems: Problem[] = [];
  if (ec2.vpcId !== undefined && ec2.subnetId === undefined) {
    problems.push(
      problem(
        ["ec2", "vpcId"],
        `is set without ec2.subnetId: the security groups would be created in ${ec2.vpcId} and the VMs in the default VPC's default subnet, which AWS refuses; set ec2.subnetId to a subnet of ${ec2.vpcId}, or remove ec2.vpcId`,
      ),
    );
  }
  return problems;
}

/** The ec2 section as the components use it: every default filled in, the architecture decided. */
export function plannedEc2(ec2: Ec2Config): PlannedEc2 {
  const architecture = instanceArchitecture(ec2.instanceType);
  return {
    ...ec2,
    runnerCidrs: [...ec2.runnerCidrs],
    sshUser: ec2.sshUser ?? EC2_DEFAULT_SSH_USER,
    lifetimeHours: ec2.lifetimeHours ?? EC2_DEFAULT_LIFETIME_HOURS,
    architecture,
    amiParameter: ec2.ami === undefined ? EC2_DEFAULT_AMI_PARAMETERS[architecture] : undefined,
  };
}
