// src/plan/ec2.ts: the ec2 target's rules and scripts.
import { execFileSync } from "node:child_process";
import { describe, expect, it } from "vitest";
import { ec2SecurityRules, shipImageCommand } from "../../src/plan/ec2";
import { planned } from "./layout-fixture";

describe("ec2", () => {
  it("never opens SSH or the gateway port beyond the runner, and gives web egress only to computers that reach public hosts", () => {
    const ec2 = { region: "us-east-1", instanceType: "t3.large", runnerCidrs: ["192.0.2.1/32", "2001:db8::/64"], sshPublicKey: "ssh-ed25519 AAAA x" };
    const rules = ec2SecurityRules(planned({ target: "ec2", ec2 }));
    for (const rule of [...rules.env.ingress, ...rules.computers.closed.ingress].filter((r) => r.peer === undefined)) {
      expect(rule.cidrBlocks, rule.description).toEqual(["192.0.2.1/32"]);
      expect(rule.ipv6CidrBlocks, rule.description).toEqual(["2001:db8::/64"]);
    }
    const webPorts = (name: string) => rules.computers[name].egress.filter((r) => r.cidrBlocks?.includes("0.0.0.0/0")).map((r) => r.fromPort);
    expect(webPorts("wide")).toEqual([80, 443]);
    expect(webPorts("listed")).toEqual([80, 443]);
    expect(webPorts("closed")).toEqual([]);
    expect(rules.computers.closed.egress).toEqual([{ description: "the gateway browse listener", protocol: "tcp", fromPort: 8081, toPort: 8081, peer: "env" }]);
    // The computers reach the gateway's browse listener only, never its published one; the gateway VM reaches each
    // computer's control port only (its listener wants the computer's token).
    expect(rules.env.ingress.filter((r) => r.peer !== undefined).map((r) => r.fromPort)).toEqual([8081, 8081, 8081]);
    expect(rules.computers.closed.ingress.filter((r) => r.peer !== undefined).map((r) => [r.fromPort, r.toPort])).toEqual([[9000, 9000]]);
  });

  it("copies an image to a VM with a shell command bash accepts, quoting the image and the target", () => {
    const script = shipImageCommand("multienv/o'dd:1", "ec2-user@203.0.113.9");
    execFileSync("bash", ["-n", "-c", script]);
    expect(script).toContain(`docker save 'multienv/o'\\''dd:1' | ssh -o StrictHostKeyChecking=no`);
    expect(script).toContain("'ec2-user@203.0.113.9' docker load");
  });
});
