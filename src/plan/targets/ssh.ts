// How the runner speaks SSH to a Docker host (a VM the deploy creates, or a host the config names): one ssh
// config file per host, written at run time next to a known_hosts file holding that host's one pinned key,
// and one shared connection per host (a ControlMaster started once, kept for two minutes after its last use),
// so a parallel `up` opens one TCP connection and one authentication per host, not one per resource.
// The same text serves the providers (node writes the files, then spawns `ssh -F`) and the shell commands
// (image loads, readiness), which write them with a here-document: both read `sshSetup`. Those commands are here
// too: what the hosts and ec2 targets run on any of their hosts.

/** A Docker host the runner reaches over SSH. */
export interface SshEndpoint {
  /** Address or DNS name. */
  host: string;
  user: string;
  port?: number;
  /** The host's public key, `ssh-ed25519 AAAA...`: the only key accepted for it. */
  hostKey: string;
  /** A private key file to log in with; unset: the runner's ssh-agent and default keys. */
  identityFile?: string;
}

/** The ssh-ed25519 (or other) public key line without a comment, or an error naming what is wrong. */
export function hostKeyLine(key: string): string {
  const match = /^(ssh-ed25519|ssh-rsa|ecdsa-sha2-nistp(?:256|384|521)) ([A-Za-z0-9+/]+={0,2})(?: .*)?$/.exec(
    key.trim(),
  );
  if (match === null)
    throw new Error(
      `host key ${JSON.stringify(key.slice(0, 40))}: expected a public key line such as "ssh-ed25519 AAAA..." (a line of ssh-keyscan, or /etc/ssh/ssh_host_ed25519_key.pub)`,
    );
  return `${match[1]} ${match[2]}`;
}

/** The name ssh knows the host by: per address, user, port and key, so a new key is a new name, never a clash. */
export function sshAlias(endpoint: SshEndpoint): string {
  const text = JSON.stringify([
    endpoint.host,
    endpoint.user,
    endpoint.port ?? 22,
    hostKeyLine(endpoint.hostKey),
    endpoint.identityFile ?? "",
  ]);
  return `multienv-${fnv1a(text, 0x811c9dc5)}${fnv1a(text, 0x01000193)}`;
}

/** 32-bit FNV-1a as 8 hex digits: a name, not a secret, so a small pure hash does (this module stays free of node). */
function fnv1a(text: string, seed: number): string {
  let hash = seed >>> 0;
  for (let i = 0; i < text.length; i++) hash = Math.imul(hash ^ text.charCodeAt(i), 0x01000193) >>> 0;
  return hash.toString(16).padStart(8, "0");
}

/** Seconds a shared connection outlives its last session. */
export const CONTROL_PERSIST_SECONDS = 120;

/**
 * The options every connection to the host is made with, as ssh_config keyword/value pairs; `dir` is a literal
 * directory, or `$d` inside a here-document. Host keys are checked strictly against the one pinned key (how it is
 * pinned is the caller's: a known_hosts file, or the key itself in the options); sessions go through the shared
 * connection when it is up and connect on their own otherwise (ControlMaster no: only `sshSetup` starts the master).
 */
function connectionOptions(endpoint: SshEndpoint, dir: string): [string, string][] {
  const alias = sshAlias(endpoint);
  return [
    ["HostKeyAlias", alias],
    ["HostKeyAlgorithms", hostKeyLine(endpoint.hostKey).split(" ")[0]],
    ["GlobalKnownHostsFile", "/dev/null"],
    ["StrictHostKeyChecking", "yes"],
    ["UpdateHostKeys", "no"],
    ["BatchMode", "yes"],
    ["ConnectTimeout", "10"],
    ["ServerAliveInterval", "15"],
    ["ServerAliveCountMax", "4"],
    ["ControlMaster", "no"],
    ["ControlPath", `${dir}/${alias}.sock`],
    ["ControlPersist", String(CONTROL_PERSIST_SECONDS)],
    ["LogLevel", "ERROR"],
    ...(endpoint.identityFile
      ? ([
          ["IdentityFile", endpoint.identityFile],
          ["IdentitiesOnly", "yes"],
        ] as [string, string][])
      : []),
  ];
}

/** The ssh config of one host, paths under `dir`: its known_hosts file holds the pinned key. */
export function sshConfigText(endpoint: SshEndpoint, dir: string): string {
  const alias = sshAlias(endpoint);
  return [
    `Host ${alias}`,
    `  HostName ${endpoint.host}`,
    `  User ${endpoint.user}`,
    `  Port ${endpoint.port ?? 22}`,
    `  UserKnownHostsFile ${dir}/${alias}.known_hosts`,
    ...connectionOptions(endpoint, dir).map(([keyword, value]) => `  ${keyword} ${value}`),
    "",
  ].join("\n");
}

/** A Docker engine on the host as @pulumi/docker's provider reaches it: its `host` and `sshOpts`. */
export interface EngineConnection {
  /** `ssh://user@host:port` */
  host: string;
  /** `-o keyword=value` arguments of every `ssh` the provider runs. */
  sshOpts: string[];
}

/**
 * How the docker provider reaches the host's engine: the same options as the ssh config, with the pinned key in
 * the options themselves (KnownHostsCommand prints the one known_hosts line), so a provider that runs in a new
 * shell, with no file of `sshSetup` there, still checks the key; `dir` is where a shared connection's socket is
 * (a literal directory: the provider runs no shell).
 */
export function engineConnection(endpoint: SshEndpoint, dir: string): EngineConnection {
  const alias = sshAlias(endpoint);
  const host = endpoint.host.includes(":") ? `[${endpoint.host}]` : endpoint.host;
  return {
    host: `ssh://${endpoint.user}@${host}:${endpoint.port ?? 22}`,
    sshOpts: [
      ["UserKnownHostsFile", "/dev/null"],
      ["KnownHostsCommand", `/bin/echo ${alias} ${hostKeyLine(endpoint.hostKey)}`],
      ...connectionOptions(endpoint, dir),
    ].flatMap(([keyword, value]) => ["-o", `${keyword}=${value}`]),
  };
}

/** The directory of the files, as /bin/sh computes it: per user, so two users on one runner never share it. */
export const SSH_DIR_SHELL = '"${TMPDIR:-/tmp}/multienv-ssh-$(id -u)"';

/**
 * Shell lines that write a host's config and known_hosts, and start its shared connection unless one is up
 * (under a lock: parallel steps start one master, not several). They leave `$cfg` and `$alias` set, so
 * `ssh -F "$cfg" "$alias" ...` reaches the host. A master that cannot start yet (the host still booting) is no
 * error here: the session after it connects on its own and reports what is wrong.
 */
export function sshSetup(endpoint: SshEndpoint): string {
  const alias = sshAlias(endpoint);
  return [
    `d=${SSH_DIR_SHELL}`,
    'mkdir -p -m 700 "$d"',
    `alias=${alias}`,
    'cfg="$d/$alias.conf"',
    `cat >"$cfg.$$" <<MULTIENV_SSH_CONFIG\n${sshConfigText(endpoint, "$d")}MULTIENV_SSH_CONFIG`,
    'mv -f "$cfg.$$" "$cfg"',
    `printf '%s\\n' '${alias} ${hostKeyLine(endpoint.hostKey)}' >"$d/$alias.known_hosts"`,
    sshMasterLines(),
  ].join("\n");
}

/**
 * Starts the shared connection of `$alias` (config `$cfg`) unless it is up; the lock is not inherited by the master.
 * The lock is held until `ssh -f` returns, once the master is authenticated and listening: the `true` after it keeps
 * the subshell (which holds the lock) alive, where a shell would otherwise exec the last command in its place, its
 * lock closed, and let the next step find no master yet and open a connection of its own.
 */
export function sshMasterLines(): string {
  return [
    '( flock 9; ssh -F "$cfg" -O check "$alias" >/dev/null 2>&1 || ssh -F "$cfg" -o ControlMaster=yes -f -N "$alias" 9>&- </dev/null >/dev/null 2>>"$d/$alias.log"; true ) 9>"$d/$alias.lock" || true',
  ].join("\n");
}

/** `ssh` through the shared connection of the host `sshSetup` prepared, with `command` as the remote command. */
export function sshRun(command: string): string {
  return `ssh -F "$cfg" "$alias" ${command}`;
}

/** The control socket of a host's gateway tunnel on local port `localPort` (after `sshSetup`). */
function tunnelSocket(localPort: number): string {
  return `"$d/$alias.tunnel-${localPort}.sock"`;
}

/**
 * Shell lines (after `sshSetup`) that make sure a tunnel from 127.0.0.1:`localPort` here to 127.0.0.1:`remotePort`
 * on the host is up: a connection of its own (its own control socket, so `-O check` finds it and `-O exit` ends
 * it), in the background, failing when the local port is taken.
 */
export function tunnelUpLines(localPort: number, remotePort: number): string {
  const socket = tunnelSocket(localPort);
  return [
    `if ! ssh -F "$cfg" -o ControlPath=${socket} -O check "$alias" >/dev/null 2>&1; then`,
    `  ssh -F "$cfg" -o ControlMaster=yes -o ControlPath=${socket} -o ControlPersist=no -o ExitOnForwardFailure=yes -f -N -L 127.0.0.1:${localPort}:127.0.0.1:${remotePort} "$alias" 9>&- </dev/null >/dev/null 2>>"$d/$alias.log" ||`,
    `    { echo "the tunnel to $alias (127.0.0.1:${localPort} -> ${remotePort}) did not start: $(tail -n 1 "$d/$alias.log")" >&2; exit 1; }`,
    "fi",
  ].join("\n");
}

/** Shell lines (after `sshSetup`) that end that tunnel, if it is up. */
export function tunnelDownLines(localPort: number): string {
  return `ssh -F "$cfg" -o ControlPath=${tunnelSocket(localPort)} -O exit "$alias" >/dev/null 2>&1 || true`;
}

/** Where a runner reaches a gateway on a remote host: through this tunnel, to the port published on its loopback. */
export interface GatewayTunnel {
  ssh: SshEndpoint;
  localPort: number;
  remotePort: number;
}

/** The whole script that brings a gateway tunnel up (the runner runs it before it uses the gateway). */
export function gatewayTunnelUp(tunnel: GatewayTunnel): string {
  return ["set -eu", sshSetup(tunnel.ssh), tunnelUpLines(tunnel.localPort, tunnel.remotePort)].join("\n");
}

/** The file ec2 user data creates last (ec2.ts `ec2UserData`): a VM this deploy booted is ready only once it exists. */
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
    "set --",
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
    '  echo "$(id -un) is not in the docker group, so it cannot reach Docker; add it (usermod -aG docker $(id -un))" >&2; ' +
      (options.cloudInit ? "tail_log >&2; " : "") +
      "exit 3",
    "fi",
    'if ! out=$(docker info --format "{{.ServerVersion}}" 2>&1); then echo "docker does not answer yet: $out" >&2; exit 5; fi',
  ].join("\n");
}

/**
 * Waits on the runner until the host is ready (`hostReadinessScript`), retrying the connection while it boots
 * (10 s apart, about 10 minutes), and stops at once, with what the host says, when it will not get ready.
 */
export function readinessCommand(
  endpoint: SshEndpoint,
  options: { cloudInit: boolean; attempts?: number; pauseSeconds?: number },
): string {
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
