// What the ec2 target does with its VMs (docs/design.md "Topology"): the security groups as rules, the tags,
// the user data; and the ec2 section's own decisions: the instance type's architecture (so its AMI), the SSH user,
// the lifetime, and the combinations AWS would take but mis-place. Pure data from the Plan. What runs on the VMs
// once they answer over SSH (readiness, the image load) is the hosts target's too: ssh.ts.
import { GATEWAY_BROWSE_PORT, SITE_PROXY_CONTROL_PORT } from "../topology";
import ipaddr from "ipaddr.js";
import { problem } from "../problems";
import { EC2_READY_MARKER, shellQuote } from "./ssh";
import type { Ec2Config, Plan, PlannedEc2, Problem, StackConfig } from "../types";

/** Tags on every AWS resource: which stack (task) it belongs to, so a bill or a leak names its task. */
export function awsTags(plan: Pick<Plan, "stack">, name: string): Record<string, string> {
  return { Name: name, "multienv:stack": plan.stack, "multienv:task": plan.stack };
}

/** A security group rule as data; `peer` names another VM of the env instead of CIDRs. */
export interface SecurityRule {
  description: string;
  protocol: "tcp" | "udp";
  fromPort: number;
  toPort: number;
  cidrBlocks?: string[];
  ipv6CidrBlocks?: string[];
  /** The security group of another VM of this env: `env` or `computer:<name>`. */
  peer?: string;
}

export interface HostSecurity {
  ingress: SecurityRule[];
  egress: SecurityRule[];
}

const SSH_PORT = 22;

const WEB_PORTS = [80, 443];

const ANYWHERE = ["0.0.0.0/0"];

const ANYWHERE_V6 = ["::/0"];

export function computerPeer(computer: string): string {
  return `computer:${computer}`;
}

function webEgress(why: string): SecurityRule[] {
  return WEB_PORTS.map((port) => ({
    description: `${why} (port ${port})`,
    protocol: "tcp" as const,
    fromPort: port,
    toPort: port,
    cidrBlocks: ANYWHERE,
    ipv6CidrBlocks: ANYWHERE_V6,
  }));
}

/**
 * Security groups of the ec2 target, each an allowlist.
 * - env VM: ingress only from the runner's CIDRs to SSH and the gateway's published port, and from computer VMs
 *   to the gateway's browse port; egress to the web ports (image pulls and the Docker install at boot; live site
 *   servers call their real site) and to each computer VM's proxy control port.
 * - computer VM: ingress SSH from the runner and the proxy control port from the env VM (the control listener
 *   refuses whoever lacks the computer's token: a group cannot tell the gateway from a site container on the
 *   env VM); egress to the env VM's browse port, plus the web ports only when the computer reaches public hosts.
 *   A computer whose network is `none` or only synthetic sites has no way to the internet at all.
 */
export function ec2SecurityRules(plan: Pick<Plan, "ec2" | "computers">): {
  env: HostSecurity;
  computers: Record<string, HostSecurity>;
} {
  const ec2 = plan.ec2;
  const runner = ec2?.runnerCidrs ?? [];
  // AWS takes IPv4 and IPv6 CIDRs in separate fields.
  const runnerV4 = runner.filter((cidr) => !cidr.includes(":"));
  const runnerV6 = runner.filter((cidr) => cidr.includes(":"));
  const fromRunner = (port: number, what: string): SecurityRule => ({
    description: `${what} from the runner`,
    protocol: "tcp",
    fromPort: port,
    toPort: port,
    cidrBlocks: runnerV4,
    ...(runnerV6.length > 0 ? { ipv6CidrBlocks: runnerV6 } : {}),
  });
  const env: HostSecurity = {
    ingress: [
      // SSH alone: the runner reaches the gateway through an SSH tunnel to the VM's loopback, never over the network.
      fromRunner(SSH_PORT, "SSH (Docker engine and the gateway tunnel)"),
      // The computers reach the browse listener alone: synthetic pages, never /svc/, traffic/v1 or CDP.
      ...plan.computers.map((c) => ({
        description: `gateway browse listener from computer ${c.name}`,
        protocol: "tcp" as const,
        fromPort: GATEWAY_BROWSE_PORT,
        toPort: GATEWAY_BROWSE_PORT,
        peer: computerPeer(c.name),
      })),
    ],
    egress: [
      ...webEgress("image pulls, Docker install and live site servers"),
      ...plan.computers.map((c) => ({
        description: `computer ${c.name} site proxy control (token required)`,
        protocol: "tcp" as const,
        fromPort: SITE_PROXY_CONTROL_PORT,
        toPort: SITE_PROXY_CONTROL_PORT,
        peer: computerPeer(c.name),
      })),
    ],
  };
  const computers: Record<string, HostSecurity> = {};
  for (const c of plan.computers) {
    computers[c.name] = {
      ingress: [
        fromRunner(SSH_PORT, "SSH (Docker engine)"),
        // A group rule cannot tell the gateway from a site container on the env VM, so the control listener
        // itself refuses every request without this computer's token (which only the gateway holds).
        {
          description: "site proxy control from the env VM (token required)",
          protocol: "tcp" as const,
          fromPort: SITE_PROXY_CONTROL_PORT,
          toPort: SITE_PROXY_CONTROL_PORT,
          peer: "env",
        },
      ],
      egress: [
        {
          description: "the gateway browse listener",
          protocol: "tcp",
          fromPort: GATEWAY_BROWSE_PORT,
          toPort: GATEWAY_BROWSE_PORT,
          peer: "env",
        },
        ...(c.reachesPublicHosts ? webEgress("public hosts the computer reaches") : []),
      ],
    };
  }
  return { env, computers };
}

/**
 * The lifetime fuse, as user data lines: a systemd timer at an absolute time `hours` after first boot powers
 * the VM off, and its shutdown behaviour (terminate) then ends it, so a task nobody destroys stops billing.
 * Absolute and persistent: a reboot neither restarts the count nor skips a time already past.
 */
export function lifetimeFuseLines(hours: number): string[] {
  const minutes = Math.max(1, Math.round(hours * 60));
  return [
    `fuse_at=$(date -u -d "+${minutes} minutes" '+%Y-%m-%d %H:%M:%S UTC')`,
    "cat >/etc/systemd/system/multienv-fuse.service <<'UNIT'",
    "[Unit]",
    "Description=multienv lifetime fuse: power off, and so terminate, this VM",
    "[Service]",
    "Type=oneshot",
    "ExecStart=/usr/bin/systemctl poweroff",
    "UNIT",
    "printf '[Unit]\\nDescription=multienv lifetime fuse\\n[Timer]\\nOnCalendar=%s\\nPersistent=true\\n[Install]\\nWantedBy=timers.target\\n' \"$fuse_at\" >/etc/systemd/system/multienv-fuse.timer",
    "systemctl daemon-reload",
    "systemctl enable --now multienv-fuse.timer",
  ];
}

/** sshd settings for a parallel `up` over one shared connection: many sessions on it, many connections at once. */
export const SSHD_LIMITS = { maxSessions: 64, maxStartups: "100:30:200" };

/**
 * User data lines installing the host key the deploy made (the only one sshd then presents: the runner pins it)
 * and the session limits, then restarting sshd. A file under sshd_config.d sorted first: its values win.
 */
export function sshdUserDataLines(hostPrivateKey: string): string[] {
  return [
    "install -d -m 755 /etc/ssh/sshd_config.d",
    "(umask 077; cat >/etc/ssh/multienv_host_ed25519_key <<'MULTIENV_HOST_KEY'",
    `${hostPrivateKey.trim()}`,
    "MULTIENV_HOST_KEY",
    ")",
    "cat >/etc/ssh/sshd_config.d/00-multienv.conf <<'MULTIENV_SSHD'",
    "HostKey /etc/ssh/multienv_host_ed25519_key",
    `MaxSessions ${SSHD_LIMITS.maxSessions}`,
    `MaxStartups ${SSHD_LIMITS.maxStartups}`,
    "MULTIENV_SSHD",
    "grep -q '^Include /etc/ssh/sshd_config.d/' /etc/ssh/sshd_config || sed -i '1i Include /etc/ssh/sshd_config.d/*.conf' /etc/ssh/sshd_config",
    "systemctl restart sshd 2>/dev/null || systemctl restart ssh",
  ];
}

/**
 * The host's own guard against its containers: Docker isolates an internal network in the FORWARD chain alone, so
 * a container on one (a browser, a synthetic site) still reaches every listener of its own host (sshd, anything
 * bound on the host's addresses) through its bridge. These iptables rules drop each new connection a container
 * opens to the host itself; what passes through the host (a container's egress, a published port) is forwarded,
 * not input, and replies to the host's own connections (the userland proxy of a port published on loopback) pass.
 */
export const CONTAINER_HOST_GUARD: string[][] = ["docker0", "br-+"].map((bridge) => [
  "-I",
  "INPUT",
  "-i",
  bridge,
  "-m",
  "conntrack",
  "--ctstate",
  "NEW",
  "-j",
  "DROP",
]);

/** CONTAINER_HOST_GUARD as shell lines, each added once. */
export function containerHostGuardLines(): string[] {
  return CONTAINER_HOST_GUARD.map(
    (rule) => `iptables ${["-C", ...rule.slice(1)].join(" ")} 2>/dev/null || iptables ${rule.join(" ")}`,
  );
}

/**
 * User data: arm the lifetime fuse first (whatever fails later, the VM still ends), install the pinned host key
 * and sshd's limits, then make sure Docker is installed (an image other than the default may lack it; installing
 * then needs the web ports), the host guarded from its containers, and Docker running and usable by the SSH user;
 * the ECS agent of the default AMI is not used.
 */
export function ec2UserData(sshUser: string, lifetimeHours: number, hostPrivateKey: string): string {
  return [
    "#!/bin/bash",
    "set -eu",
    ...lifetimeFuseLines(lifetimeHours),
    ...sshdUserDataLines(hostPrivateKey),
    "if ! command -v docker >/dev/null 2>&1; then",
    "  if command -v dnf >/dev/null 2>&1; then dnf install -y docker;",
    "  else apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q docker.io; fi",
    "fi",
    "systemctl disable --now ecs 2>/dev/null || true",
    ...containerHostGuardLines(),
    "systemctl enable --now docker",
    `usermod -aG docker ${shellQuote(sshUser)}`,
    `touch ${EC2_READY_MARKER}`,
    "",
  ].join("\n");
}

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

/** A lifetime shorter than this leaves the instances too little time to be deployed and used. */
const EC2_SHORTEST_SENSIBLE_LIFETIME_MINUTES = 30;

/** The address ranges set aside for documentation (RFC 5737, RFC 3849): no runner ever connects from one. */
const DOCUMENTATION_RANGES = ["192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24", "2001:db8::/32"].map((cidr) =>
  ipaddr.parseCIDR(cidr),
);

function inDocumentationRange(cidr: string): boolean {
  try {
    const [address] = ipaddr.parseCIDR(cidr);
    // match() compares addresses of one kind: an IPv4 address is never in an IPv6 range, or the other way round.
    return DOCUMENTATION_RANGES.some(
      ([range, bits]) => range.kind() === address.kind() && (address as ipaddr.IPv4).match(range as ipaddr.IPv4, bits),
    );
  } catch {
    return false;
  }
}

/**
 * True when an OpenSSH public key line's base64 holds a key of the type it names (an ssh-ed25519 one: the type and 32
 * bytes). A documentation placeholder or a line cut short does not; EC2 refuses to import it.
 */
export function wellFormedPublicKey(line: string): boolean {
  const [type, base64] = line.split(" ");
  if (base64 === undefined || !/^[A-Za-z0-9+/]+={0,2}$/.test(base64) || base64.length % 4 !== 0) return false;
  const blob = Buffer.from(base64, "base64");
  if (blob.length < 4) return false;
  const length = blob.readUInt32BE(0);
  if (blob.subarray(4, 4 + length).toString("latin1") !== type) return false;
  if (type !== "ssh-ed25519") return blob.length > 4 + length;
  return blob.length === 4 + length + 4 + 32 && blob.readUInt32BE(4 + length) === 32;
}

/**
 * Warnings for ec2 values that still look like the examples' placeholders: a runner CIDR in a documentation range,
 * a public key that holds no key. `check` passes with them; the deploy cannot.
 */
export function ec2Warnings(config: StackConfig): Problem[] {
  const ec2 = config.ec2;
  if (config.target !== "ec2" || ec2 === undefined) return [];
  const warnings: Problem[] = [];
  ec2.runnerCidrs.forEach((cidr, index) => {
    if (inDocumentationRange(cidr))
      warnings.push(
        problem(
          ["ec2", "runnerCidrs", index],
          `${cidr} is in a range set aside for documentation, so no runner connects from it (a placeholder?); write the address this runner connects from, e.g. its public IP (curl https://checkip.amazonaws.com) with /32`,
        ),
      );
  });
  const hours = ec2.lifetimeHours ?? EC2_DEFAULT_LIFETIME_HOURS;
  if (hours * 60 < EC2_SHORTEST_SENSIBLE_LIFETIME_MINUTES)
    warnings.push(
      problem(
        ["ec2", "lifetimeHours"],
        `${hours} powers the instances off after ${Math.max(1, Math.round(hours * 60))} minute(s), less than the ${EC2_SHORTEST_SENSIBLE_LIFETIME_MINUTES} a deploy and a task need at the least; give the hours the task needs (default ${EC2_DEFAULT_LIFETIME_HOURS})`,
      ),
    );
  if (!wellFormedPublicKey(ec2.sshPublicKey))
    warnings.push(
      problem(
        ["ec2", "sshPublicKey"],
        "holds no usable key (a placeholder?), and EC2 refuses to import it; write your own public key line, such as the contents of ~/.ssh/id_ed25519.pub",
      ),
    );
  return warnings;
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
