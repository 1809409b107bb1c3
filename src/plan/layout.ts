// How a Plan is laid out on a container engine and, for ec2, on VMs (DESIGN "Topology").
// Pure data from the Plan: which networks, mounts, capabilities, ports, commands and firewall rules each piece
// gets. The components in components/ only turn these answers into resources, so every topology rule is here,
// once, with its tests, and the policy pack can hold the rendered graph to the same promises.
import { CAPTURES_DIR, CA_DIR, GATEWAY_BROWSE_PORT, SITE_PROXY_CONTROL_PORT, networkAliases } from "./topology";
import { sshMasterLines, sshRun, sshSetup, type SshEndpoint } from "./ssh";
import type { Plan, PlannedCapture, PlannedComputer, PlannedWebsite } from "./types";

/** Environment variable names the containers read (DESIGN "Entry points", docs/contracts.md). */
export const ENV_VARS = {
  websiteSettings: "AGENTENV_WEBSITE_SETTINGS",
  /** The names the site claims in the config (a JSON list), so its card can declare them. */
  websiteDomains: "AGENTENV_WEBSITE_DOMAINS",
  gatewayConfig: "MULTIENV_GATEWAY_CONFIG",
  controlToken: "MULTIENV_CONTROL_TOKEN",
  siteProxyConfig: "MULTIENV_SITE_PROXY_CONFIG",
  /** The computer's own control token (derived from the control token): its proxy's control listener requires it. */
  siteProxyToken: "MULTIENV_SITE_PROXY_TOKEN",
  browserConfig: "MULTIENV_BROWSER_CONFIG",
} as const;

/** The project's own images, built from `src/<role>/Dockerfile` when a container gives no image of its own. */
export type ProjectImageRole = "gateway" | "site-proxy" | "browser";

/** A project image: its tag, its Dockerfile, and the bundles (scripts/bundle.mjs names) it copies. */
export interface ProjectImage {
  imageName: string;
  dockerfile: string;
  /** The bundles the Dockerfile copies from `dist/bundle/<name>.js`: with the Dockerfile, the whole build context. */
  bundles: string[];
}

export const PROJECT_IMAGES: Record<ProjectImageRole, ProjectImage> = {
  gateway: { imageName: "multienv/gateway:latest", dockerfile: "src/gateway/Dockerfile", bundles: ["gateway"] },
  "site-proxy": { imageName: "multienv/site-proxy:latest", dockerfile: "src/site-proxy/Dockerfile", bundles: ["site-proxy", "site-proxy-supervisor"] },
  browser: { imageName: "multienv/browser:latest", dockerfile: "src/browser/Dockerfile", bundles: ["browser-launcher"] },
};

/** The files of a project image's build context besides its Dockerfile, relative to the repository root. */
export function projectImageFiles(image: ProjectImage): string[] {
  return image.bundles.map((b) => `dist/bundle/${b}.js`);
}

/**
 * The `BASE_IMAGE` build argument of the project's Dockerfiles: Debian with Node 20, which
 * `scripts/build-images.sh` builds offline (debootstrap). `MULTIENV_BASE_IMAGE` overrides it.
 */
export const DEFAULT_BASE_IMAGE = "multienv/node-base";

/**
 * Capture sidecars run tcpdump. They use the gateway image, which carries tcpdump, so a capture needs no
 * image from a registry and an env always captures with the tcpdump its gateway was built with.
 */
export const CAPTURE_IMAGE_ROLE: ProjectImageRole = "gateway";

/** Capabilities: capture sidecars alone hold NET_RAW/NET_ADMIN; every other container drops NET_RAW. */
export const CAPTURE_CAPABILITIES = { adds: ["NET_RAW", "NET_ADMIN"], drops: [] as string[] };
export const DEFAULT_CAPABILITIES = { adds: [] as string[], drops: ["NET_RAW"] };

export interface NetworkAttachment {
  /** Docker network name. */
  network: string;
  /** Names the container answers to on that network. */
  aliases: string[];
}

/**
 * The gateway: on the env network (it reaches the sites there, and listens on nothing there), the ingress network
 * (its published listener, the only one Docker publishes), and each computer's link network (its browse
 * listener, for that computer's proxy alone). On ec2 the computers are on other VMs: their proxies reach the
 * browse listener published on the env VM, so there are no link networks.
 */
export function gatewayNetworks(plan: Plan): NetworkAttachment[] {
  return [
    { network: plan.networks.env, aliases: [] },
    { network: plan.networks.ingress, aliases: [networkAliases.gatewayIngress] },
    ...(plan.target === "docker" ? plan.computers.map((c) => ({ network: c.linkNetworkName, aliases: [networkAliases.gatewayOnLink(c.name)] })) : []),
  ];
}

/** A site server: on the env network under its alias; a live site's server also on egress (it calls the real site). */
export function serverNetworks(plan: Plan, site: PlannedWebsite): NetworkAttachment[] {
  const attachments = [{ network: plan.networks.env, aliases: site.server.alias ? [site.server.alias] : [] }];
  if (site.serverOnEgress) attachments.push({ network: plan.networks.egress, aliases: [] });
  return attachments;
}

/** A synthetic site's frontend: on the env network only. */
export function frontendNetworks(plan: Plan, site: PlannedWebsite): NetworkAttachment[] {
  if (!site.frontend) return [];
  return [{ network: plan.networks.env, aliases: site.frontend.alias ? [site.frontend.alias] : [] }];
}

/**
 * A computer's site proxy: its computer's network (the browser's way out), its link network (the gateway's browse
 * listener, and its own control listener for the gateway), and an egress network of its own when the computer
 * reaches public hosts. Never the env network or another computer's: nothing but the gateway reaches it, and it
 * reaches no site container. ec2: the proxy runs on the computer's VM, which has no link network; its egress
 * network is how the gateway VM reaches its control port (published there), and the VM's security group is the
 * allowlist at network level (see `ec2SecurityRules`).
 */
export function proxyNetworks(plan: Plan, computer: PlannedComputer): NetworkAttachment[] {
  const own = { network: computer.networkName, aliases: [networkAliases.proxyOnComputerNet] };
  if (plan.target !== "docker") return [own, { network: computer.egressNetworkName, aliases: [networkAliases.proxyOnLink(computer.name)] }];
  const attachments = [own, { network: computer.linkNetworkName, aliases: [networkAliases.proxyOnLink(computer.name)] }];
  if (computer.reachesPublicHosts) attachments.push({ network: computer.egressNetworkName, aliases: [] });
  return attachments;
}

/** A computer's browser: its own internal network only; its proxy is its only way out. */
export function browserNetworks(computer: PlannedComputer): NetworkAttachment[] {
  return [{ network: computer.networkName, aliases: [networkAliases.browserOnComputerNet] }];
}

/** The networks one engine holds: docker holds all of them; an ec2 computer VM holds its own and an egress network. */
export interface EngineNetworks {
  /** Internal networks (no route out of the engine). */
  internal: string[];
  /** Networks with a route out. */
  external: string[];
}

export function envEngineNetworks(plan: Plan): EngineNetworks {
  if (plan.target !== "docker") return { internal: [plan.networks.env], external: [plan.networks.egress, plan.networks.ingress] };
  return {
    internal: [plan.networks.env, ...plan.computers.flatMap((c) => [c.networkName, c.linkNetworkName])],
    external: [plan.networks.egress, plan.networks.ingress, ...plan.computers.filter((c) => c.reachesPublicHosts).map((c) => c.egressNetworkName)],
  };
}

export function computerEngineNetworks(computer: PlannedComputer): EngineNetworks {
  return { internal: [computer.networkName], external: [computer.egressNetworkName] };
}

export interface VolumeMount {
  volume: string;
  target: string;
  readOnly: boolean;
}

/** The captures volume: read-write in sidecars, read-only in the gateway, absent from every other container. */
export function captureSidecarMounts(plan: Plan): VolumeMount[] {
  return [{ volume: plan.capture.volumeName, target: CAPTURES_DIR, readOnly: false }];
}

export function gatewayMounts(plan: Plan): VolumeMount[] {
  return plan.capture.enabled ? [{ volume: plan.capture.volumeName, target: CAPTURES_DIR, readOnly: true }] : [];
}

/** The site proxy writes its CA certificate into the computer's CA volume; the browser reads it to trust it. */
export function proxyMounts(computer: PlannedComputer): VolumeMount[] {
  return [{ volume: computer.caVolumeName, target: CA_DIR, readOnly: false }];
}

export function browserMounts(computer: PlannedComputer): VolumeMount[] {
  return [{ volume: computer.caVolumeName, target: CA_DIR, readOnly: true }];
}

/**
 * tcpdump in the website container's network namespace: every interface, packets written as they arrive (-U) so
 * the gateway sees a capture writing, rotating `-C fileSizeMb -W fileCount`, running as root so it can write the
 * volume (-Z root: no switch to a tcpdump user that the volume does not know).
 */
export function captureCommand(plan: Plan, sidecar: PlannedCapture): string[] {
  return [
    "tcpdump", "-i", "any", "-n", "-U",
    "-w", `${CAPTURES_DIR}/${sidecar.filePrefix}`,
    "-C", String(plan.capture.fileSizeMb),
    "-W", String(plan.capture.fileCount),
    "-Z", "root",
  ];
}

/** The docker network mode that puts a sidecar in its website container's network namespace. */
export function sharedNetworkMode(targetContainerId: string): string {
  return `container:${targetContainerId}`;
}

/**
 * The gateway's health check: `/healthz` on its published listener answers 200 only when every site server is
 * ready and every capture is writing, and the gateway container is created with `wait`, so a deploy whose capture
 * is not running fails. node is in the gateway image (the gateway is a node service), so the check needs no curl.
 */
export function gatewayHealthcheck(plan: Plan): { tests: string[]; interval: string; timeout: string; retries: number; startPeriod: string } {
  const url = `http://${networkAliases.gatewayIngress}:${plan.gateway.port}/healthz`;
  const script = `fetch(${JSON.stringify(url)}).then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))`;
  // The deploy runs this check itself until it passes (see the container kind's `wait`); the engine's own schedule
  // only watches a running env, so a long interval keeps an idle env from starting a node process every few seconds.
  return { tests: ["CMD", "node", "-e", script], interval: "30s", timeout: "5s", retries: 3, startPeriod: "10s" };
}

/** Seconds the deploy waits for the gateway to turn healthy before it fails. */
export const GATEWAY_WAIT_TIMEOUT_SECONDS = 120;

/**
 * Where the gateway's ports are published. docker: its published listener on loopback only, on a port the engine
 * chooses (two stacks never collide, and nothing outside the machine reaches it); the browse listener is reached
 * over the link networks, not published. ec2: every address of the VM on the ports themselves, since the security
 * groups (runner CIDRs to the published listener, computer VMs to the browse listener) are what guard them.
 */
export function gatewayPublish(plan: Plan): { internal: number; external?: number; ip: string }[] {
  if (plan.target !== "docker") {
    // The runner's listener on the host's loopback alone (the runner comes through an SSH tunnel); the browse
    // listener on every address, for the computers' hosts.
    return [
      { internal: plan.gateway.port, external: plan.gateway.port, ip: "127.0.0.1" },
      { internal: GATEWAY_BROWSE_PORT, external: GATEWAY_BROWSE_PORT, ip: "0.0.0.0" },
    ];
  }
  return [{ internal: plan.gateway.port, ip: "127.0.0.1" }];
}

/** ec2 only: the site proxy's control port (log, CA, DevTools, token required), published on the computer VM for the gateway VM. */
export function proxyPublish(plan: Plan): { internal: number; external: number; ip: string }[] {
  if (plan.target === "docker") return [];
  return [{ internal: SITE_PROXY_CONTROL_PORT, external: SITE_PROXY_CONTROL_PORT, ip: "0.0.0.0" }];
}

/**
 * One line of JSON with a site's settings, secret values merged in. The caller marks the result secret whenever
 * `secretValues` is not empty, so the whole environment value is a Pulumi secret.
 */
export function websiteSettingsJson(settings: Record<string, unknown>, secretValues: Record<string, string>): string {
  return JSON.stringify({ ...settings, ...secretValues });
}

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
        { description: "the gateway browse listener", protocol: "tcp", fromPort: GATEWAY_BROWSE_PORT, toPort: GATEWAY_BROWSE_PORT, peer: "env" },
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
    'printf \'[Unit]\\nDescription=multienv lifetime fuse\\n[Timer]\\nOnCalendar=%s\\nPersistent=true\\n[Install]\\nWantedBy=timers.target\\n\' "$fuse_at" >/etc/systemd/system/multienv-fuse.timer',
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
 * User data: arm the lifetime fuse first (whatever fails later, the VM still ends), install the pinned host key
 * and sshd's limits, then make sure Docker is installed (an image other than the default may lack it; installing
 * then needs the web ports), running, and usable by the SSH user; the ECS agent of the default AMI is not used.
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
    "systemctl enable --now docker",
    `usermod -aG docker ${shellQuote(sshUser)}`,
    `touch ${EC2_READY_MARKER}`,
    "",
  ].join("\n");
}

/** The file user data creates last: an ec2 VM is ready only once it exists. */
export const EC2_READY_MARKER = "/var/lib/multienv-docker-ready";

/** `text` as one /bin/sh word. */
export function shellQuote(text: string): string {
  return `'${text.replace(/'/g, `'\\''`)}'`;
}

/**
 * The images a remote engine runs, all shipped in one `docker save` (shared layers once), compressed with zstd
 * (gzip where the host has no zstd), skipping those the host already has by id. Runs on the runner, with its
 * docker CLI and the host's shared SSH connection. Image ids, not tags: a rebuilt image is a new id, so it is
 * shipped again and the containers running it are replaced.
 */
export function shipImagesCommand(imageIds: string[], endpoint: SshEndpoint): string {
  const ids = [...new Set(imageIds)].sort();
  const probe = `for i in ${ids.map(shellQuote).join(" ")}; do docker image inspect -f . "$i" >/dev/null 2>&1 || echo "$i"; done`;
  return [
    "set -eu",
    sshSetup(endpoint),
    `missing=$(${sshRun(shellQuote(probe))})`,
    `if [ -z "$missing" ]; then echo "all ${ids.length} image(s) are there"; exit 0; fi`,
    'set --',
    'while IFS= read -r i; do if [ -n "$i" ]; then set -- "$@" "$i"; fi; done <<MULTIENV_MISSING\n$missing\nMULTIENV_MISSING',
    `if ${sshRun("'command -v zstd'")} >/dev/null 2>&1; then pack="zstd -q -T0 -3"; unpack="zstd -q -d"; else pack="gzip -1"; unpack="gzip -d"; fi`,
    "# One save of every missing image: layers they share travel once.",
    `docker save "$@" | $pack | ${sshRun('"$unpack | docker load"')}`,
    'echo "shipped $# image(s)"',
  ].join("\n");
}

/**
 * The readiness check run on the host over SSH. Exit 0: ready. 3: it will not get ready (cloud-init failed, user
 * data did not finish, the user is not in the docker group), with the tail of the cloud-init log. 4: the user is
 * in the docker group but this session's connection logged in before it was added: reconnect. Else: not yet.
 */
export function hostReadinessScript(options: { cloudInit: boolean }): string {
  const log = "/var/log/cloud-init-output.log";
  return [
    ...(options.cloudInit
      ? [
          `tail_log() { echo "the tail of ${log}:"; sudo -n tail -n 40 ${log} 2>/dev/null || tail -n 40 ${log} 2>/dev/null || echo "(not readable)"; }`,
          "if command -v cloud-init >/dev/null 2>&1; then",
          "  cloud-init status --wait >/dev/null 2>&1 || true",
          `  s=$(cloud-init status 2>/dev/null | sed -n "s/^status: //p")`,
          `  if [ "$s" != "done" ]; then echo "cloud-init finished with status \${s:-unknown}" >&2; tail_log >&2; exit 3; fi`,
          "fi",
          `if [ ! -e ${EC2_READY_MARKER} ]; then echo "user data did not finish (no ${EC2_READY_MARKER})" >&2; tail_log >&2; exit 3; fi`,
        ]
      : []),
    // root reaches the socket without the group.
    'if [ "$(id -u)" != 0 ] && ! id -nG | tr " " "\n" | grep -qx docker; then',
    '  if id -nG "$(id -un)" | tr " " "\n" | grep -qx docker; then exit 4; fi',
    '  echo "$(id -un) is not in the docker group, so it cannot reach Docker; add it (usermod -aG docker $(id -un))" >&2; ' + (options.cloudInit ? "tail_log >&2; " : "") + "exit 3",
    "fi",
    'if ! out=$(docker info --format "{{.ServerVersion}}" 2>&1); then echo "docker does not answer yet: $out" >&2; exit 5; fi',
  ].join("\n");
}

/**
 * Waits on the runner until the host is ready (`hostReadinessScript`), retrying the connection while it boots
 * (10 s apart, about 10 minutes), and stops at once, with what the host says, when it will not get ready.
 */
export function readinessCommand(endpoint: SshEndpoint, options: { cloudInit: boolean; attempts?: number; pauseSeconds?: number }): string {
  const where = `${endpoint.user}@${endpoint.host}`;
  const attempts = options.attempts ?? 60;
  return [
    sshSetup(endpoint),
    "i=0",
    "while :; do",
    `  ${sshRun(shellQuote(hostReadinessScript(options)))} && exit 0`,
    "  rc=$?",
    `  if [ $rc -eq 3 ]; then echo ${shellQuote(`${where} will not get ready (above)`)} >&2; exit 1; fi`,
    '  if [ $rc -eq 4 ]; then ssh -F "$cfg" -O exit "$alias" >/dev/null 2>&1 || true; fi',
    "  i=$((i + 1))",
    `  if [ $i -ge ${attempts} ]; then echo "${where}: Docker did not answer over SSH after ${attempts} attempts (last exit $rc)" >&2; exit 1; fi`,
    `  sleep ${options.pauseSeconds ?? 10}`,
    sshMasterLines(),
    "done",
  ].join("\n");
}

/**
 * Replaces the host of a service URL (a Docker name) with an address (ec2: the VM that publishes that port),
 * keeping scheme, port and path. String-based: the address may be a value not known until deploy.
 */
export function rehost(url: string, host: string): string {
  const match = /^([a-z][a-z0-9+.-]*:\/\/)(\[[^\]]*\]|[^/:?#]*)(.*)$/i.exec(url);
  if (match === null) throw new Error(`rehost: ${url} is not an absolute URL`);
  return `${match[1]}${host.includes(":") && !host.startsWith("[") ? `[${host}]` : host}${match[3]}`;
}

/** The gateway's URL as the runner reaches it: the published address and port. */
export function gatewayUrl(host: string, port: number | string): string {
  return `http://${host.includes(":") ? `[${host}]` : host}:${port}`;
}

/** A site's routes through the gateway (DESIGN "Gateway"): `/svc/<site>/` always, `/website/<site>/` synthetic only. */
export function siteUrls(gateway: string, site: Pick<PlannedWebsite, "name" | "live">): { svcUrl: string; browseUrl?: string } {
  const svcUrl = `${gateway}/svc/${encodeURIComponent(site.name)}/`;
  return site.live ? { svcUrl } : { svcUrl, browseUrl: `${gateway}/website/${encodeURIComponent(site.name)}/` };
}

/** A computer's Chrome DevTools endpoint through the gateway (control token required). */
export function computerCdpUrl(gateway: string, computer: string): string {
  return `${gateway}/computers/${encodeURIComponent(computer)}/cdp`;
}

/** The images a remote engine's containers run: the project's by role, the others by reference. */
export interface RemoteEngineImages {
  roles: ProjectImageRole[];
  refs: string[];
}

/**
 * What a remote engine runs (ec2 and hosts): the env's host the gateway (its capture sidecars use it too) and
 * every site image; a computer's host its proxy and its browser, the project's or its own.
 */
export function remoteEngineImages(plan: Plan, computer?: PlannedComputer): RemoteEngineImages {
  if (computer !== undefined) {
    return { roles: computer.image === undefined ? ["site-proxy", "browser"] : ["site-proxy"], refs: computer.image === undefined ? [] : [computer.image] };
  }
  const refs = plan.websites.flatMap((w) => [w.server.image, w.frontend?.image]).filter((i): i is string => i !== undefined);
  return { roles: ["gateway"], refs: [...new Set(refs)].sort() };
}

/**
 * The project images an engine builds: the gateway's where the gateway runs (capture sidecars use it too), and
 * the site proxy's and browser's where computers run, unless every browser there has an image of its own.
 */
export function projectImagesNeeded(gatewayHere: boolean, computers: PlannedComputer[]): ProjectImageRole[] {
  const roles = new Set<ProjectImageRole>();
  if (gatewayHere) roles.add("gateway").add(CAPTURE_IMAGE_ROLE);
  if (computers.length > 0) roles.add("site-proxy");
  if (computers.some((c) => c.image === undefined)) roles.add("browser");
  return [...roles];
}
