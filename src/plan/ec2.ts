// What the ec2 target does with its VMs (docs/design.md "Topology"): the security groups as rules, the tags,
// the user data, and the shell commands that ship images and check readiness over SSH. Pure data from the Plan.
import { GATEWAY_BROWSE_PORT, SITE_PROXY_CONTROL_PORT } from "./topology";
import type { Plan } from "./types";

/** Tags on every AWS resource: which stack (task) it belongs to, so a bill or a leak names its task. */
export function awsTags(plan: Plan, name: string): Record<string, string> {
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
export function ec2SecurityRules(plan: Plan): { env: HostSecurity; computers: Record<string, HostSecurity> } {
  const ec2 = plan.ec2;
  const runner = ec2?.runnerCidrs ?? [];
  const gatewayPort = plan.gateway.port;
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
      fromRunner(SSH_PORT, "SSH (Docker engine)"),
      fromRunner(gatewayPort, "gateway"),
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
        { description: "the gateway browse listener", protocol: "tcp", fromPort: GATEWAY_BROWSE_PORT, toPort: GATEWAY_BROWSE_PORT, peer: "env" },
        ...(c.reachesPublicHosts ? webEgress("public hosts the computer reaches") : []),
      ],
    };
  }
  return { env, computers };
}

/** The login user of the default AMI (Amazon ECS-optimized Amazon Linux 2023: Docker preinstalled). */
export const EC2_SSH_USER = "ec2-user";

/**
 * The SSM parameter naming the default AMI: Amazon Linux 2023 with Docker already installed, so a computer VM
 * whose security group has no web egress still has Docker at boot.
 */
export const EC2_DEFAULT_AMI_PARAMETER = "/aws/service/ecs/optimized-ami/amazon-linux-2023/recommended/image_id";

/**
 * User data: make sure Docker is installed (an image other than the default may lack it; installing then needs
 * the web ports), running, and usable by the SSH user; the ECS agent of the default AMI is not used.
 */
export function ec2UserData(): string {
  return [
    "#!/bin/bash",
    "set -eu",
    "if ! command -v docker >/dev/null 2>&1; then",
    "  if command -v dnf >/dev/null 2>&1; then dnf install -y docker;",
    "  else apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q docker.io; fi",
    "fi",
    "systemctl disable --now ecs 2>/dev/null || true",
    "systemctl enable --now docker",
    `usermod -aG docker ${EC2_SSH_USER} 2>/dev/null || usermod -aG docker ubuntu 2>/dev/null || true`,
    "touch /var/lib/multienv-docker-ready",
    "",
  ].join("\n");
}

/** ssh options for a VM created by this deploy: its host key is new, so it cannot be known yet. */
export const EC2_SSH_OPTIONS = ["-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR"];

/** `text` as one /bin/sh word. */
export function shellQuote(text: string): string {
  return `'${text.replace(/'/g, `'\\''`)}'`;
}

/**
 * Copies an image from the runner's engine to a VM (`user@host`) with `docker save | ssh docker load`,
 * skipping the copy when the VM already has that image id. Runs on the runner with its docker CLI and
 * ssh-agent, as the deploy's own SSH connections to the engine do.
 */
export function shipImageCommand(image: string, sshTarget: string): string {
  const quote = shellQuote;
  const ssh = `ssh ${EC2_SSH_OPTIONS.join(" ")} ${quote(sshTarget)}`;
  const inspect = `docker image inspect -f '{{.Id}}' ${quote(image)}`;
  return [
    "set -eu",
    `id=$(${inspect})`,
    `if [ "$(${ssh} ${quote(inspect)} 2>/dev/null || true)" = "$id" ]; then echo ${quote(`${image} is there`)}; exit 0; fi`,
    `docker save ${quote(image)} | ${ssh} docker load`,
  ].join("\n");
}

/**
 * The readiness command run over SSH: waits until user data finished and Docker answers. `sudo`: this session
 * may have started before user data added the SSH user to the docker group (the deploy's own SSH
 * sessions start later and have the group).
 */
export const EC2_READINESS_COMMAND =
  "for i in $(seq 1 120); do if [ -e /var/lib/multienv-docker-ready ] && sudo -n docker info >/dev/null 2>&1; then exit 0; fi; sleep 5; done; " +
  "echo 'Docker did not come up within 10 minutes' >&2; exit 1";

/**
 * Runs the readiness command on a VM (`user@host`) over SSH from the runner, retrying the connection while the
 * VM boots (about 10 minutes), so the first container is created only once Docker answers there.
 */
export function remoteReadinessCommand(sshTarget: string): string {
  const quote = shellQuote;
  const ssh = `ssh ${EC2_SSH_OPTIONS.join(" ")} -o ConnectTimeout=10 -o BatchMode=yes ${quote(sshTarget)}`;
  return [
    "for attempt in $(seq 1 60); do",
    `  if ${ssh} ${quote(EC2_READINESS_COMMAND)}; then exit 0; fi`,
    "  sleep 10",
    "done",
    `echo ${quote(`${sshTarget}: Docker did not answer over SSH within 10 minutes`)} >&2`,
    "exit 1",
  ].join("\n");
}
