// src/plan/targets/ec2.ts: the ec2 target's rules and scripts, and its config section's decisions (architecture,
// defaults, refusals).
import { execFileSync } from "node:child_process";
import { describe, expect, it } from "vitest";
import {
  containerHostGuardLines,
  ec2Problems,
  ec2SecurityRules,
  ec2Warnings,
  instanceArchitecture,
  lifetimeFuseLines,
  plannedEc2,
  wellFormedPublicKey,
} from "../../src/plan/targets/ec2";
import { shipImagesCommand } from "../../src/plan/targets/ssh";
import { formatProblem } from "../../src/plan/problems";
import type { StackConfig } from "../../src/plan/types";
import { layoutPlan } from "./layout-fixture";

describe("ec2", () => {
  it("never opens SSH or the gateway port beyond the runner, and gives web egress only to computers that reach public hosts", () => {
    const ec2 = {
      region: "us-east-1",
      instanceType: "t3.large",
      runnerCidrs: ["192.0.2.1/32", "2001:db8::/64"],
      sshPublicKey: "ssh-ed25519 AAAA x",
    };
    const rules = ec2SecurityRules(layoutPlan({ target: "ec2", ec2 }));
    for (const rule of [...rules.env.ingress, ...rules.computers.closed.ingress].filter((r) => r.peer === undefined)) {
      expect(rule.cidrBlocks, rule.description).toEqual(["192.0.2.1/32"]);
      expect(rule.ipv6CidrBlocks, rule.description).toEqual(["2001:db8::/64"]);
    }
    const webPorts = (name: string) =>
      rules.computers[name].egress.filter((r) => r.cidrBlocks?.includes("0.0.0.0/0")).map((r) => r.fromPort);
    expect(webPorts("wide")).toEqual([80, 443]);
    expect(webPorts("listed")).toEqual([80, 443]);
    expect(webPorts("closed")).toEqual([]);
    expect(rules.computers.closed.egress).toEqual([
      { description: "the gateway browse listener", protocol: "tcp", fromPort: 8081, toPort: 8081, peer: "env" },
    ]);
    // The computers reach the gateway's browse listener only, never its published one; the gateway VM reaches each
    // computer's control port only (its listener wants the computer's token).
    expect(rules.env.ingress.filter((r) => r.peer !== undefined).map((r) => r.fromPort)).toEqual([8081, 8081, 8081]);
    expect(
      rules.computers.closed.ingress.filter((r) => r.peer !== undefined).map((r) => [r.fromPort, r.toPort]),
    ).toEqual([[9000, 9000]]);
  });

  it("ships a host's images in one compressed save, by id, with a shell command sh accepts", () => {
    const endpoint = { host: "203.0.113.9", user: "ec2-user", hostKey: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAITestKey" };
    const script = shipImagesCommand(["sha256:bbb", "sha256:aaa", "sha256:bbb"], endpoint);
    execFileSync("sh", ["-n", "-c", script]);
    expect(script).toContain("for i in '\\''sha256:aaa'\\'' '\\''sha256:bbb'\\''; do docker image inspect");
    expect(script).toContain('docker save "$@" | $pack | ssh -F "$cfg" "$alias" "$unpack | docker load"');
    expect(script).toContain('pack="zstd -q -T0 -3"');
    expect(script.match(/docker save/g)).toHaveLength(1);
  });
});

describe("containerHostGuardLines", () => {
  it("adds each rule once: a second run of the user data finds it and adds nothing", () => {
    const lines = containerHostGuardLines();
    expect(lines).toEqual([
      "iptables -C INPUT -i docker0 -m conntrack --ctstate NEW -j DROP 2>/dev/null || iptables -I INPUT -i docker0 -m conntrack --ctstate NEW -j DROP",
      "iptables -C INPUT -i br-+ -m conntrack --ctstate NEW -j DROP 2>/dev/null || iptables -I INPUT -i br-+ -m conntrack --ctstate NEW -j DROP",
    ]);
  });
});

describe("lifetimeFuseLines", () => {
  it("arms a persistent timer at an absolute time systemd reads, hours after boot", () => {
    const lines = lifetimeFuseLines(0.5);
    expect(lines[0]).toContain('date -u -d "+30 minutes"');
    expect(lines.join("\n")).toContain("Persistent=true");
    expect(lines.join("\n")).toContain("ExecStart=/usr/bin/systemctl poweroff");
    // The fuse's time as the first line computes it, parsed by systemd itself where it is installed.
    const at = execFileSync("/bin/bash", ["-c", `${lines[0]}; echo "$fuse_at"`])
      .toString()
      .trim();
    const minutes = (Date.parse(at.replace(" UTC", "Z").replace(" ", "T")) - Date.now()) / 60_000;
    expect(minutes).toBeGreaterThan(28);
    expect(minutes).toBeLessThan(31);
    try {
      execFileSync("systemd-analyze", ["calendar", at], { stdio: "pipe" });
    } catch (error) {
      if ((error as { code?: string }).code !== "ENOENT") throw error;
    }
  });
});

const EC2 = {
  region: "us-east-1",
  instanceType: "t3.large",
  runnerCidrs: ["203.0.113.7/32"],
  sshPublicKey: "ssh-ed25519 AAAA me",
};

describe("instanceArchitecture", () => {
  it("knows Graviton families by the g after their generation, and a1", () => {
    for (const type of [
      "t4g.small",
      "m6g.large",
      "m7gd.xlarge",
      "c6gn.large",
      "c7g.medium",
      "r8g.large",
      "x2gd.large",
      "im4gn.large",
      "is4gen.large",
      "g5g.xlarge",
      "hpc7g.4xlarge",
      "a1.large",
    ]) {
      expect(instanceArchitecture(type), type).toBe("arm64");
    }
  });

  it("takes every other family as x86_64, GPU families that start with g among them", () => {
    for (const type of [
      "t3.large",
      "t3a.large",
      "m5.large",
      "m6i.large",
      "m7i-flex.large",
      "c5n.large",
      "g4dn.xlarge",
      "g6.xlarge",
      "gr6.4xlarge",
      "p4d.24xlarge",
      "inf2.xlarge",
      "z1d.large",
      "m5zn.large",
    ]) {
      expect(instanceArchitecture(type), type).toBe("x86_64");
    }
  });
});

describe("plannedEc2", () => {
  it("fills the defaults and picks the AMI parameter of the architecture, none when an AMI is given", () => {
    expect(plannedEc2(EC2)).toMatchObject({
      sshUser: "ec2-user",
      lifetimeHours: 4,
      architecture: "x86_64",
      amiParameter: "/aws/service/ecs/optimized-ami/amazon-linux-2023/recommended/image_id",
    });
    expect(plannedEc2({ ...EC2, instanceType: "t4g.large" }).amiParameter).toBe(
      "/aws/service/ecs/optimized-ami/amazon-linux-2023/arm64/recommended/image_id",
    );
    expect(plannedEc2({ ...EC2, ami: "ami-0abc", sshUser: "ubuntu" })).toMatchObject({
      amiParameter: undefined,
      sshUser: "ubuntu",
    });
  });
});

describe("ec2Problems", () => {
  const config = (ec2: Partial<typeof EC2> & Record<string, unknown>, target: StackConfig["target"] = "ec2") =>
    ({
      target,
      websites: {},
      computers: {},
      captureTraffic: false,
      capture: { fileSizeMb: 20, fileCount: 10 },
      selfTest: true,
      ec2: { ...EC2, ...ec2 },
    }) as StackConfig;

  it("refuses vpcId without subnetId, naming both keys", () => {
    expect(ec2Problems(config({ vpcId: "vpc-0abc" }))).toEqual([
      {
        path: "ec2.vpcId",
        message: expect.stringMatching(
          /^is set without ec2\.subnetId: .* set ec2\.subnetId to a subnet of vpc-0abc, or remove ec2\.vpcId$/,
        ),
      },
    ]);
    expect(ec2Problems(config({ vpcId: "vpc-0abc", subnetId: "subnet-0abc" }))).toEqual([]);
    expect(ec2Problems(config({ subnetId: "subnet-0abc" }))).toEqual([]);
    expect(ec2Problems(config({ vpcId: "vpc-0abc" }, "docker"))).toEqual([]);
  });
});

describe("the ec2 section's placeholders", () => {
  const config = (ec2: Partial<StackConfig["ec2"]>) =>
    ({
      target: "ec2",
      ec2: {
        region: "us-east-1",
        instanceType: "t3.large",
        runnerCidrs: ["198.18.0.7/32"],
        sshPublicKey: REAL_KEY,
        sshUser: "ec2-user",
        lifetimeHours: 4,
        ...ec2,
      },
    }) as StackConfig;
  // A well-formed ed25519 public key line (32 key bytes), as ssh-keygen writes one.
  const REAL_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl me@host";

  it("warns while runnerCidrs hold a documentation range or the key holds no key (the examples' placeholders)", () => {
    expect(ec2Warnings(config({})).map(formatProblem)).toEqual([]);
    expect(
      ec2Warnings(
        config({
          runnerCidrs: ["203.0.113.7/32", "10.0.0.0/8", "2001:db8::/48"],
          sshPublicKey:
            "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKq1Kz0d7ExampleKeyForDocsOnly0000000000000000 runner@multienv",
        }),
      ).map((w) => w.path),
    ).toEqual(["ec2.runnerCidrs[0]", "ec2.runnerCidrs[2]", "ec2.sshPublicKey"]);
    expect(ec2Warnings(config({ runnerCidrs: ["203.0.113.7/32"] })).map(formatProblem)[0]).toBe(
      "multienv:ec2.runnerCidrs[0]: 203.0.113.7/32 is in a range set aside for documentation, so no runner connects from it (a placeholder?); write the address this runner connects from, e.g. its public IP (curl https://checkip.amazonaws.com) with /32",
    );
  });

  it("takes a key line's type from its base64, so a key of another type under ssh-ed25519 is no key", () => {
    expect(wellFormedPublicKey(REAL_KEY)).toBe(true);
    expect(wellFormedPublicKey(REAL_KEY.replace("ssh-ed25519", "ssh-rsa"))).toBe(false);
    expect(wellFormedPublicKey("ssh-ed25519 AAAA me")).toBe(false);
  });
});

describe("a lifetime too short to use", () => {
  it("warns that the instances would power off before a deploy and a task are done", () => {
    const config = {
      target: "ec2",
      ec2: {
        region: "us-east-1",
        instanceType: "t3.large",
        runnerCidrs: ["198.18.0.7/32"],
        sshPublicKey: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl me@host",
        sshUser: "ec2-user",
        lifetimeHours: 0.1,
      },
    } as StackConfig;
    expect(ec2Warnings(config).map(formatProblem)).toEqual([
      "multienv:ec2.lifetimeHours: 0.1 powers the instances off after 6 minute(s), less than the 30 a deploy and a task need at the least; give the hours the task needs (default 4)",
    ]);
    expect(ec2Warnings({ ...config, ec2: { ...config.ec2!, lifetimeHours: 0.5 } })).toEqual([]);
  });
});
