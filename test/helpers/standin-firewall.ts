// Security groups for stand-in VMs: the rules `ec2SecurityRules` gives each VM, as iptables rules in the
// stand-in's namespace on its one link, so the stand-ins hold the same allowlists the ec2 groups do. Ingress
// in mangle PREROUTING and egress in mangle POSTROUTING (before Docker's own NAT and forwarding rules, which
// would otherwise let published ports through whatever INPUT says); replies to allowed connections pass.
import { execFileSync } from "node:child_process";
import { CONTAINER_HOST_GUARD, type HostSecurity, type SecurityRule } from "../../src/plan/targets/ec2";
import type { StandinVm } from "./standin";

/** Applies `security` to the stand-in: `peers` maps `env` / `computer:<name>` to the stand-ins' addresses. */
export function applySecurityGroup(standin: StandinVm, security: HostSecurity, peers: Record<string, string>): void {
  const link = `mevn-${standin.name}`;
  const rules: string[][] = [];
  const sources = (rule: SecurityRule): string[] => [
    ...(rule.peer !== undefined ? [`${peers[rule.peer]}/32`] : []),
    ...(rule.cidrBlocks ?? []),
  ];
  for (const [chain, dir, list] of [
    ["PREROUTING", "-i", security.ingress],
    ["POSTROUTING", "-o", security.egress],
  ] as const) {
    const name = `MULTIENV-${chain === "PREROUTING" ? "IN" : "OUT"}`;
    rules.push(["-N", name], ["-A", chain, dir, link, "-j", name]);
    rules.push(["-A", name, "-m", "conntrack", "--ctstate", "ESTABLISHED,RELATED", "-j", "RETURN"]);
    for (const rule of list) {
      for (const cidr of sources(rule)) {
        rules.push([
          "-A",
          name,
          chain === "PREROUTING" ? "-s" : "-d",
          cidr,
          "-p",
          rule.protocol,
          "--dport",
          `${rule.fromPort}:${rule.toPort}`,
          "-j",
          "RETURN",
        ]);
      }
    }
    rules.push(["-A", name, "-j", "DROP"]);
  }
  for (const rule of rules)
    execFileSync("ip", ["netns", "exec", standin.namespace, "iptables", "-t", "mangle", ...rule]);
}

/** The guard ec2 user data puts on a VM against its own containers (CONTAINER_HOST_GUARD), in the stand-in. */
export function applyContainerHostGuard(standin: StandinVm): void {
  for (const rule of CONTAINER_HOST_GUARD)
    execFileSync("ip", ["netns", "exec", standin.namespace, "iptables", ...rule]);
}
