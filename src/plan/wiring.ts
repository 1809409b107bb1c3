// How a Plan's containers are wired on a Docker engine (docs/design.md "Topology"): the networks, mounts,
// capabilities, published ports, commands and health checks each gets. Pure data from the Plan; the components
// only turn these answers into resources, and the policy pack holds the rendered graph to the same promises.
import { CAPTURES_DIR, CA_DIR, GATEWAY_BROWSE_PORT, SITE_PROXY_CONTROL_PORT, networkAliases } from "./topology";
import type { Plan, PlannedCapture, PlannedComputer, PlannedWebsite } from "./types";

/**
 * Capabilities: capture sidecars alone hold NET_RAW/NET_ADMIN; every other container drops NET_RAW. Written as
 * Docker reports them (`CAP_` names): the docker provider compares what the engine reads back with these, and any
 * other spelling is a diff on every refresh and a replacement on the next `up`.
 */
export const CAPTURE_CAPABILITIES = { adds: ["CAP_NET_RAW", "CAP_NET_ADMIN"], drops: [] as string[] };

export const DEFAULT_CAPABILITIES = { adds: [] as string[], drops: ["CAP_NET_RAW"] };

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
export function gatewayNetworks(plan: Pick<Plan, "networks" | "target" | "computers">): NetworkAttachment[] {
  return [
    { network: plan.networks.env, aliases: [] },
    { network: plan.networks.ingress, aliases: [networkAliases.gatewayIngress] },
    ...(plan.target === "docker"
      ? plan.computers.map((c) => ({ network: c.linkNetworkName, aliases: [networkAliases.gatewayOnLink(c.name)] }))
      : []),
  ];
}

/** A site server: on the env network under its alias; a live site's server also on egress (it calls the real site). */
export function serverNetworks(plan: Pick<Plan, "networks">, site: PlannedWebsite): NetworkAttachment[] {
  const attachments = [{ network: plan.networks.env, aliases: site.server.alias ? [site.server.alias] : [] }];
  if (site.serverOnEgress) attachments.push({ network: plan.networks.egress, aliases: [] });
  return attachments;
}

/** A synthetic site's frontend: on the env network only. */
export function frontendNetworks(plan: Pick<Plan, "networks">, site: PlannedWebsite): NetworkAttachment[] {
  if (!site.frontend) return [];
  return [{ network: plan.networks.env, aliases: site.frontend.alias ? [site.frontend.alias] : [] }];
}

/** A replayed site's replay server: on the env network only (it answers from its recording, never the web). */
export function replayNetworks(plan: Pick<Plan, "networks">, site: PlannedWebsite): NetworkAttachment[] {
  if (!site.replay) return [];
  return [{ network: plan.networks.env, aliases: [site.replay.alias] }];
}

/**
 * A computer's site proxy: its computer's network (the browser's way out), its link network (the gateway's browse
 * listener, and its own control listener for the gateway), and an egress network of its own when the computer
 * reaches public hosts. Never the env network or another computer's: nothing but the gateway reaches it, and it
 * reaches no site container. ec2: the proxy runs on the computer's VM, which has no link network; its egress
 * network is how the gateway VM reaches its control port (published there), and the VM's security group is the
 * allowlist at network level (see `ec2SecurityRules`).
 */
export function proxyNetworks(plan: Pick<Plan, "target">, computer: PlannedComputer): NetworkAttachment[] {
  const own = { network: computer.networkName, aliases: [networkAliases.proxyOnComputerNet] };
  if (plan.target !== "docker")
    return [own, { network: computer.egressNetworkName, aliases: [networkAliases.proxyOnLink(computer.name)] }];
  const attachments = [
    own,
    { network: computer.linkNetworkName, aliases: [networkAliases.proxyOnLink(computer.name)] },
  ];
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

export function envEngineNetworks(plan: Pick<Plan, "networks" | "target" | "computers">): EngineNetworks {
  if (plan.target !== "docker")
    return { internal: [plan.networks.env], external: [plan.networks.egress, plan.networks.ingress] };
  return {
    internal: [plan.networks.env, ...plan.computers.flatMap((c) => [c.networkName, c.linkNetworkName])],
    external: [
      plan.networks.egress,
      plan.networks.ingress,
      ...plan.computers.filter((c) => c.reachesPublicHosts).map((c) => c.egressNetworkName),
    ],
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
export function captureSidecarMounts(plan: Pick<Plan, "capture">): VolumeMount[] {
  return [{ volume: plan.capture.volumeName, target: CAPTURES_DIR, readOnly: false }];
}

export function gatewayMounts(plan: Pick<Plan, "capture">): VolumeMount[] {
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
 * What a capture sidecar runs (`sh -c CAPTURE_SCRIPT capture <base> <fileSizeMb> <fileCount>`): tcpdump in the
 * website container's network namespace, every interface, packets written as they arrive (-U) so the gateway sees
 * a capture writing, rotating `-C fileSizeMb -W fileCount`, as root so it can write the volume (-Z root: no switch
 * to a tcpdump user the volume does not know).
 *
 * When Docker restarts the website container (a crash under its restart policy, `docker restart`), the container
 * gets a new network namespace and the sidecar is left in the old one with loopback alone, recording nothing. So
 * the script watches for that and exits; the sidecar's restart policy starts it again, in the new namespace. The
 * files of the run that ended keep their packets under a run number (`<site>-<role>.run<K>.pcap<N>`: tcpdump
 * would number its new files from 0 and overwrite them), so the listing shows the restart as a gap between runs.
 * Docker gives up for good on a sidecar whose restart cannot join its website container's namespace: while that
 * container is restarting, Docker still names the namespace by its dead process (`lstat /proc/<pid>/ns/net: no such
 * file`), so the script waits `CAPTURE_REJOIN_WAIT_SECONDS` before it exits. A container that takes longer to come
 * back leaves its sidecar stopped, which /healthz reports (its capture is not writing) until a `multienv reset` or a
 * redeploy starts it again. A reset starts a capture over in place (USR1 to the script, sent through the engine, and
 * CAPTURE_BEGAN_LINE read back from the sidecar's output; CAPTURE_START_OVER_COMMAND for a script that prints no such
 * line): no container restart, which on docker took seconds for a handful of sidecars, and no exec, five of which at
 * once took 0.7-1.3 s on two cores.
 */
export function captureCommand(plan: Pick<Plan, "capture">, sidecar: PlannedCapture, ownPort?: number): string[] {
  const base = `${CAPTURES_DIR}/${sidecar.filePrefix.replace(/\.pcap$/, "")}`;
  const args = [base, String(plan.capture.fileSizeMb), String(plan.capture.fileCount)];
  return ["sh", "-c", CAPTURE_SCRIPT, "capture", ...args, ...(ownPort !== undefined ? [String(ownPort)] : [])];
}

/**
 * Where a capture on a cluster reads its pod's own address (the downward API's `status.podIP`): the capture server
 * of the pod listens there, and its connections are left out of the capture by that address and port alone.
 */
export const CAPTURE_POD_IP_ENV = "MULTIENV_POD_IP";

/**
 * Seconds a capture sidecar that lost its website container's namespace waits before it exits to be started again in
 * the new one. Docker restarts a crashed container after 100 ms, but on a busy engine its start has taken over 3 s,
 * and a sidecar started before it is given up on; the cost is a capture gap this long after a crash, against losing
 * the rest of the episode's capture.
 */
export const CAPTURE_REJOIN_WAIT_SECONDS = 10;

/**
 * Where a capture sidecar's script keeps its pid, the times it started over in place and its files' base (under
 * TMPDIR, else /tmp: outside the captures volume).
 */
const CAPTURE_STATE = '"${TMPDIR:-/tmp}/multienv-capture-state"';

/** CAPTURE_START_OVER_COMMAND's exit when the sidecar's script cannot start over in place (one from before). */
export const CAPTURE_CANNOT_START_OVER = 3;

/**
 * What a reset runs in a capture sidecar (`sh -c`) to start its capture over in place, without a restart of the
 * container: the script's tcpdump ends (its files whole; the episode's were collected before), its files go, and a new
 * tcpdump begins; exits 0 once the new one has written its first file, CAPTURE_CANNOT_START_OVER when the script is
 * one that cannot, and 1 when it did not within 10 s (the reset then restarts the sidecar, as before).
 */
export const CAPTURE_START_OVER_COMMAND = [
  `read pid before base <${CAPTURE_STATE} 2>/dev/null || exit ${CAPTURE_CANNOT_START_OVER}`,
  'kill -USR1 "$pid" || exit 1',
  "for i in $(seq 200); do",
  `  read pid now base <${CAPTURE_STATE}`,
  '  [ "$now" != "$before" ] && ls "$base".pcap[0-9]* >/dev/null 2>&1 && exit 0',
  "  sleep 0.05",
  "done",
  "exit 1",
].join("\n");

/**
 * The capture sidecar's stop signal and restart policy, chosen so that a signal sent to it through the engine (the USR1
 * of a capture's start-over, `docker kill --signal`) leaves it under its restart policy. Docker 20.10 takes any signal
 * sent so as a stop by hand: it marks the container stopped by hand, which an `unless-stopped` policy then honours at
 * its next exit, and, when the container declares no stop signal of its own, it also cancels the restart at that exit
 * whatever the policy. The sidecar's script exits when its site's server crashes (to join the server's new namespace),
 * and relies on being started again: so it declares its stop signal (SIGTERM, Docker's default, which its script
 * traps) and restarts `always`. The other containers keep the stack's `unless-stopped`; nothing signals them.
 */
export const CAPTURE_STOP_SIGNAL = "SIGTERM";
export const CAPTURE_RESTART = "always";

/**
 * What a capture sidecar's script prints (then the number of times it started over in place, 0 at its start) once its
 * tcpdump writes: the last such line on the sidecar's output says which capture is the current one.
 */
export const CAPTURE_BEGAN_LINE = "multienv capture began";

/** The capture sidecar's script (see `captureCommand`); POSIX sh, builtins alone in its loop but `sleep`. */
export const CAPTURE_SCRIPT = [
  "base=$1 size=$2 count=$3 own=${4:-}",
  // $4, when given, is the port of the pod's own capture server (on a cluster, in the captured namespace): its
  // connections, those with the pod's own address and that port at one end, are left out (the network policy lets
  // the gateway alone reach that port). Every other packet is recorded, to or from that port elsewhere included.
  'filter=""',
  'if [ -n "$own" ]; then',
  `  ip=\${${CAPTURE_POD_IP_ENV}:-}`,
  `  [ -n "$ip" ] || { echo "capture: ${CAPTURE_POD_IP_ENV} (the pod's own address) is not set" >&2; exit 64; }`,
  '  filter="not (tcp and ((src host $ip and src port $own) or (dst host $ip and dst port $own)))"',
  "fi",
  'if ls "$base".pcap[0-9]* >/dev/null 2>&1; then',
  "  run=1",
  '  while ls "$base".run$run.pcap[0-9]* >/dev/null 2>&1; do run=$((run + 1)); done',
  '  for f in "$base".pcap[0-9]*; do mv -f "$f" "$base.run$run.${f##*.}"; done',
  "fi",
  'capture() { tcpdump -i any -n -U -w "$base.pcap" -C "$size" -W "$count" -Z root ${filter:+"$filter"} & pid=$!; }',
  "capture",
  "trap 'kill $pid 2>/dev/null; wait $pid; exit 0' TERM INT",
  // Started over in place (USR1, CAPTURE_START_OVER_COMMAND): tcpdump ends, which writes its files out whole, every
  // file of this capture goes, and a new tcpdump begins; the count kept in the state says it has.
  // Once the new tcpdump has written its first file (it records from then on), the count goes up and a line says so on
  // the sidecar's output (CAPTURE_BEGAN_LINE), which a reset reads through the engine, as it signals USR1 through it:
  // no process started in the container. A tcpdump that wrote no file within 10 s leaves both as they were.
  // (its first file: `.pcap0`, or `.pcap00` and so on when the count has more digits)
  'written() { set -- "$base".pcap[0-9]*; [ -e "$1" ]; }',
  // A tcpdump that ended (its namespace gone: the website container restarting) is not waited for: the script goes on
  // to its exit, and Docker starts it again at once, as before this wait existed.
  "began() { i=0; while ! written && kill -0 $pid 2>/dev/null && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done; written; }",
  `trap 'kill $pid 2>/dev/null; wait $pid; rm -f "$base".pcap* "$base".run*.pcap*; capture; began && { over=$((over + 1)); echo "$$ $over $base" >${CAPTURE_STATE}; echo "${CAPTURE_BEGAN_LINE} $over"; }' USR1`,
  `over=0; echo "$$ $over $base" >${CAPTURE_STATE}; began && echo "${CAPTURE_BEGAN_LINE} $over"`,
  // True while the namespace has an interface besides loopback (/proc/net/dev: two header lines, then one a device).
  'attached() { while read -r line; do case $line in *"|"*|lo:*) ;; *:*) return 0 ;; esac; done </proc/net/dev; return 1; }',
  "while kill -0 $pid 2>/dev/null; do",
  "  sleep 1 & wait $!",
  // Docker starts the sidecar again at once, and gives up for good if the website container has not started yet:
  // give a restarting container time first, sleeping in the background as the loop does (a foreground sleep would
  // hold the stop trap until it ends).
  `  attached || { kill $pid; wait $pid; sleep ${CAPTURE_REJOIN_WAIT_SECONDS} & wait $!; exit 75; }`,
  "done",
  "wait $pid",
].join("\n");

/** The docker network mode that puts a sidecar in its website container's network namespace. */
export function sharedNetworkMode(targetContainerId: string): string {
  return `container:${targetContainerId}`;
}

/**
 * Seconds the deploy waits for the gateway to turn healthy before it fails. The gateway is created beside its
 * websites' containers and its health check passes once they are up, so this covers their start as well as its
 * own, which takes longest when many stacks deploy on one engine at once.
 */
export const GATEWAY_START_SECONDS = 240;

/**
 * The gateway's health check: `/healthz` on its published listener answers 200 only when every site server is
 * ready and every capture is writing, and the gateway container is created with `wait`, so a deploy whose capture
 * is not running fails. node is in the gateway image (the gateway is a node service), so the check needs no curl.
 */
export function gatewayHealthcheck(plan: Pick<Plan, "gateway">): {
  tests: string[];
  interval: string;
  timeout: string;
  retries: number;
  startPeriod: string;
} {
  // The docker provider's `wait` waits for the engine to call the container healthy, and the engine first checks
  // one interval after the start (engines before 25 have no faster start interval), so the interval is short; the
  // check is bash's /dev/tcp, not a node process, so an idle env spends a millisecond a second on it.
  const request = `GET /healthz HTTP/1.0\r\nHost: ${networkAliases.gatewayIngress}\r\n\r\n`;
  const script = [
    `exec 3<>/dev/tcp/${networkAliases.gatewayIngress}/${plan.gateway.port}`,
    `printf '${request}' >&3`,
    "read -r status <&3",
    `[[ "$status" == "HTTP/1."?" 200 "* ]]`,
  ].join(" && ");
  // Failed checks count only after the start period, and the first check that passes ends it: as long as the
  // deploy's wait, so a gateway whose websites are still starting on a crowded engine is starting, not unhealthy
  // (which the provider's wait takes as a failed deploy).
  return {
    tests: ["CMD", "bash", "-c", script],
    interval: "1s",
    timeout: "5s",
    retries: 3,
    startPeriod: goDuration(GATEWAY_START_SECONDS),
  };
}

/**
 * Whole seconds as Go's `time.Duration` prints them (`30s`, `4m0s`, `1h0m0s`). The docker provider reads a health
 * check's durations back in that form, so any other spelling of the same time is a diff on every later deploy.
 */
export function goDuration(seconds: number): string {
  if (!Number.isSafeInteger(seconds) || seconds < 0) throw new Error(`goDuration: ${seconds} is not whole seconds`);
  const h = Math.floor(seconds / 3600);
  const m = Math.floor((seconds % 3600) / 60);
  const s = seconds % 60;
  if (h > 0) return `${h}h${m}m${s}s`;
  if (m > 0) return `${m}m${s}s`;
  return `${s}s`;
}

/**
 * Where the gateway's ports are published. docker: its published listener on loopback only, on a port the engine
 * chooses (two stacks never collide, and nothing outside the machine reaches it); the browse listener is reached
 * over the link networks, not published. ec2 and hosts: the published listener on the host's loopback (the
 * runner comes through an SSH tunnel), the browse listener on every address (the computers' security groups
 * reach it alone).
 */
export function gatewayPublish(
  plan: Pick<Plan, "target" | "gateway">,
): { internal: number; external?: number; ip: string }[] {
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

/**
 * ec2 only: the site proxy's control port (log, CA, DevTools, token required), published on the computer VM for the
 * gateway VM.
 */
export function proxyPublish(plan: Pick<Plan, "target">): { internal: number; external: number; ip: string }[] {
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
