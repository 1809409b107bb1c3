// Before a destroy: are the hosts whose engines it must ask reachable over SSH? On the hosts target the stack does
// not own the machines, so every container, network and volume there is deleted by asking the host's engine. With a
// host's SSH gone that delete cannot happen, and the state must go on saying those containers exist (they may
// well still run). Rather than let the engine try each resource, fail some and delete others, the runner checks
// each such host first (one bounded SSH session each, in parallel) and stops before anything is collected or
// deleted, naming the host by its role and address. Resources `deletedWith` a machine the stack owns (ec2) need
// no SSH to go: their hosts are not asked.
import { execFile } from "node:child_process";
import { sshRun, sshSetup, type SshEndpoint } from "../../../plan/targets/ssh";
import { RESOURCE_TYPES } from "../../../protocol/resource-types";

/** A resource of an exported deployment, as far as this check reads it. */
export interface StateResource {
  urn: string;
  id?: string;
  type?: string;
  parent?: string;
  /** `<provider URN>::<provider id>` of a custom resource. */
  provider?: string;
  deletedWith?: string;
  inputs?: Record<string, unknown>;
  outputs?: Record<string, unknown>;
}

/** A host the destroy must reach: how, and the role (env, or the computer's name) it serves. */
export interface HostToReach {
  role: string;
  ssh: SshEndpoint;
  /** How many resources of the state are on its engine. */
  resources: number;
}

/** The resource's name: the last part of its URN. */
function nameOf(urn: string): string {
  return urn.split("::").at(-1) ?? urn;
}

function endpointKey(ssh: SshEndpoint): string {
  return JSON.stringify([ssh.host, ssh.port ?? 22, ssh.user, ssh.hostKey]);
}

/**
 * The hosts whose engines hold resources of the state that are not deleted with a machine. A resource is on the
 * engine of its docker provider, a child of a DockerEngine; a remote DockerEngine's outputs hold the host's SSH
 * endpoint, and its name the role: `<prefix>-<role>-engine`, the prefix being the name of the RemoteEngines it is a
 * child of (or the stack's).
 */
export function hostsToReach(stack: string, resources: StateResource[]): HostToReach[] {
  const engines = new Map<string, { role: string; ssh: SshEndpoint }>();
  for (const r of resources) {
    const ssh = r.outputs?.ssh as SshEndpoint | undefined;
    if (r.type !== DOCKER_ENGINE_TYPE || ssh === undefined) continue;
    const name = nameOf(r.urn);
    const owner = r.parent === undefined ? undefined : nameOf(r.parent);
    const prefix = [owner, stack].find((p) => p !== undefined && name.startsWith(`${p}-`));
    const role =
      prefix !== undefined && name.endsWith("-engine") ? name.slice(prefix.length + 1, -"-engine".length) : "";
    engines.set(r.urn, { role, ssh });
  }
  const providerEngine = new Map<string, { role: string; ssh: SshEndpoint }>();
  for (const r of resources) {
    const engine = r.parent === undefined ? undefined : engines.get(r.parent);
    if (r.type === RESOURCE_TYPES.dockerProvider && engine !== undefined)
      providerEngine.set(`${r.urn}::${r.id}`, engine);
  }
  const hosts = new Map<string, HostToReach>();
  for (const r of resources) {
    const engine = r.provider === undefined ? undefined : providerEngine.get(r.provider);
    if (engine === undefined || r.deletedWith) continue;
    const key = endpointKey(engine.ssh);
    const host = hosts.get(key) ?? { role: engine.role, ssh: engine.ssh, resources: 0 };
    host.resources += 1;
    hosts.set(key, host);
  }
  return [...hosts.values()];
}

/** The type of the DockerEngine component (components/engine/engine.ts). */
const DOCKER_ENGINE_TYPE = "multienv:docker:DockerEngine";

/** How a host is named to the user: `the env host` or `computer <name>'s host`, and its address. */
export function describeHost(host: HostToReach): string {
  const who = host.role === "" ? "a host" : host.role === "env" ? "the env host" : `computer ${host.role}'s host`;
  return `${who} (${host.ssh.user}@${host.ssh.host}${host.ssh.port ? `:${host.ssh.port}` : ""})`;
}

/** Seconds one host's check may take: ssh's ConnectTimeout (10 s) and a session, with room to spare. */
export const REACH_TIMEOUT_SECONDS = 30;

/** Runs one `true` over SSH on the host; resolves to undefined when it answered, else ssh's last line. */
export function sshAnswers(ssh: SshEndpoint, timeoutSeconds = REACH_TIMEOUT_SECONDS): Promise<string | undefined> {
  const script = ["set -eu", sshSetup(ssh), sshRun("true")].join("\n");
  return new Promise((resolve) =>
    execFile("/bin/sh", ["-c", script], { timeout: timeoutSeconds * 1000 }, (error, _out, stderr) => {
      if (!error) return resolve(undefined);
      const killed = (error as { killed?: boolean }).killed === true;
      const last = String(stderr).trim().split("\n").at(-1);
      resolve(killed ? `no answer within ${timeoutSeconds} s` : last || error.message);
    }),
  );
}

/** The hosts of `hosts` that do not answer over SSH, with why, checked at once. */
export async function unreachableHosts(
  hosts: HostToReach[],
  answers: (ssh: SshEndpoint) => Promise<string | undefined> = sshAnswers,
): Promise<{ host: HostToReach; why: string }[]> {
  const results = await Promise.all(hosts.map(async (host) => ({ host, why: await answers(host.ssh) })));
  return results.filter((r): r is { host: HostToReach; why: string } => r.why !== undefined);
}

/** The one-line refusal of a destroy that would have to reach `down` hosts. */
export function unreachableMessage(stack: string, down: { host: HostToReach; why: string }[]): string {
  const named = down.map(({ host, why }) => `${describeHost(host)} does not answer over SSH (${why})`).join("; ");
  return `stack ${stack}: not destroyed, nothing collected or deleted: ${named}; what runs there is still in the state, so bring its SSH back and run \`multienv down ${stack}\` again (if the machine is gone for good, remove its containers yourself and then its resources with \`pulumi state delete\`)`;
}
