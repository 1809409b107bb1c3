// The ec2 section's own decisions: the instance type's architecture (so its AMI), defaults, refusals.
import { describe, expect, it } from "vitest";
import { ec2Problems, instanceArchitecture, plannedEc2 } from "../../src/plan/ec2";
import type { StackConfig } from "../../src/plan/types";

const EC2 = { region: "us-east-1", instanceType: "t3.large", runnerCidrs: ["203.0.113.7/32"], sshPublicKey: "ssh-ed25519 AAAA me" };

describe("instanceArchitecture", () => {
  it("knows Graviton families by the g after their generation, and a1", () => {
    for (const type of ["t4g.small", "m6g.large", "m7gd.xlarge", "c6gn.large", "c7g.medium", "r8g.large", "x2gd.large", "im4gn.large", "is4gen.large", "g5g.xlarge", "hpc7g.4xlarge", "a1.large"]) {
      expect(instanceArchitecture(type), type).toBe("arm64");
    }
  });

  it("takes every other family as x86_64, GPU families that start with g among them", () => {
    for (const type of ["t3.large", "t3a.large", "m5.large", "m6i.large", "m7i-flex.large", "c5n.large", "g4dn.xlarge", "g6.xlarge", "gr6.4xlarge", "p4d.24xlarge", "inf2.xlarge", "z1d.large", "m5zn.large"]) {
      expect(instanceArchitecture(type), type).toBe("x86_64");
    }
  });
});

describe("plannedEc2", () => {
  it("fills the defaults and picks the AMI parameter of the architecture, none when an AMI is given", () => {
    expect(plannedEc2(EC2)).toMatchObject({ sshUser: "ec2-user", lifetimeHours: 4, architecture: "x86_64", amiParameter: "/aws/service/ecs/optimized-ami/amazon-linux-2023/recommended/image_id" });
    expect(plannedEc2({ ...EC2, instanceType: "t4g.large" }).amiParameter).toBe("/aws/service/ecs/optimized-ami/amazon-linux-2023/arm64/recommended/image_id");
    expect(plannedEc2({ ...EC2, ami: "ami-0abc", sshUser: "ubuntu" })).toMatchObject({ amiParameter: undefined, sshUser: "ubuntu" });
  });
});

describe("ec2Problems", () => {
  const config = (ec2: Partial<typeof EC2> & Record<string, unknown>, target: StackConfig["target"] = "ec2") =>
    ({ target, websites: {}, computers: {}, captureTraffic: false, capture: { fileSizeMb: 20, fileCount: 10 }, selfTest: true, ec2: { ...EC2, ...ec2 } }) as StackConfig;

  it("refuses vpcId without subnetId, naming both keys", () => {
    expect(ec2Problems(config({ vpcId: "vpc-0abc" }))).toEqual([
      { path: "ec2.vpcId", message: expect.stringMatching(/^is set without ec2\.subnetId: .* set ec2\.subnetId to a subnet of vpc-0abc, or remove ec2\.vpcId$/) },
    ]);
    expect(ec2Problems(config({ vpcId: "vpc-0abc", subnetId: "subnet-0abc" }))).toEqual([]);
    expect(ec2Problems(config({ subnetId: "subnet-0abc" }))).toEqual([]);
    expect(ec2Problems(config({ vpcId: "vpc-0abc" }, "docker"))).toEqual([]);
  });
});
