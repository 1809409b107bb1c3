// What the runner does on a Docker engine at run time (reset's restarts, reading container state, the tests'
// probes) goes through dockerode. A remote engine is reached as the docker provider reaches it: each connection is
// one `ssh <sshOpts> ... docker system dial-stdio` with the host and options the provider was given in the stack's
// state, so the pinned host key and the shared connection (src/plan/targets/ssh.ts) hold for the runner too.
import { spawn } from "node:child_process";
import http from "node:http";
import os from "node:os";
import { Duplex, PassThrough } from "node:stream";
import Docker from "dockerode";
import { LABELS } from "../protocol/labels";
import { BASE_IMAGE_LABEL, PROJECT_IMAGES, type FoundImage, type ProjectImageRole } from "../plan/images";
import { DOCKER_DEFAULT_ADDRESS_POOLS, type EngineMachine } from "../plan/services";
import { RESOURCE_TYPES } from "../protocol/resource-types";

/** Where an engine is, as the docker provider's config says: unset or `unix://` host for a local socket. */
export interface EngineTarget {
  /** `unix:///path` or `ssh://user@host[:port]`; unset: DOCKER_HOST, else the default socket. */
  host?: string;
  /** Arguments of every `ssh` to an ssh:// host (`-o keyword=value` pairs). */
  sshOpts?: string[];
}

export const DEFAULT_DOCKER_SOCKET = "/var/run/docker.sock";

/** `ssh` arguments that run `docker system dial-stdio` on an ssh:// host, as the docker provider runs them. */
export function dialStdioArgs(host: string, sshOpts: string[] = []): string[] {
  const url = new URL(host);
  if (url.protocol !== "ssh:" || !url.hostname) throw new Error(`engine host ${host}: expected ssh://user@host[:port]`);
  return [
    ...(url.username ? ["-l", decodeURIComponent(url.username)] : []),
    ...(url.port ? ["-p", url.port] : []),
    ...sshOpts,
    "-T",
    "--",
    url.hostname.replace(/^\[|\]$/g, ""),
    "docker",
    "system",
    "dial-stdio",
  ];
}

/** One connection to an ssh:// engine: the ssh process's stdout and stdin as a socket-like duplex. */
function sshConnection(host: string, sshOpts: string[] | undefined): Duplex {
  const child = spawn("ssh", dialStdioArgs(host, sshOpts), { stdio: ["pipe", "pipe", "pipe"] });
  let stderr = "";
  child.stderr.on("data", (c: Buffer) => (stderr = (stderr + c.toString("utf8")).slice(-2000)));
  // Both sides go through pass-throughs: ssh's own pipes closing (it exited) must not end the connection before
  // its exit code and message are known, so a refused host key ends it with ssh's own words.
  const readable = new PassThrough();
  child.stdout.pipe(readable, { end: false });
  const writable = new PassThrough();
  writable.pipe(child.stdin);
  const duplex = Duplex.from({ readable, writable });
  // Closing a connection ends its ssh process, which aborts the pipes' pending reads and writes: expected then.
  child.stdout.on("error", () => undefined);
  child.stdin.on("error", () => undefined);
  child.on("error", (e) => duplex.destroy(new Error(`ssh to ${host} did not start (${e.message}); is ssh installed?`)));
  child.on("close", (code) => {
    if (code !== 0 && code !== null)
      duplex.destroy(new Error(`ssh to ${host} exited ${code}: ${stderr.trim().split("\n").at(-1) ?? ""}`));
    else readable.end();
  });
  duplex.on("close", () => child.kill());
  duplex.on("error", () => undefined);
  // http.Agent treats its connections as sockets.
  Object.assign(duplex, {
    setKeepAlive: () => duplex,
    setNoDelay: () => duplex,
    setTimeout: () => duplex,
    unref: () => duplex,
    ref: () => duplex,
  });
  return duplex;
}

/**
 * A dockerode client of the engine. Its connections are not kept alive (a kept one, to the socket or an ssh
 * process, would keep the runner's process from exiting when its work is done), so a client needs no closing.
 */
export function engineClient(target: EngineTarget = {}): Docker {
  const host = target.host ?? process.env.DOCKER_HOST;
  if (host === undefined || host.startsWith("unix://"))
    return new Docker({
      socketPath: host ? host.slice("unix://".length) : DEFAULT_DOCKER_SOCKET,
      agent: new http.Agent({ keepAlive: false }),
    } as Docker.DockerOptions);
  if (!host.startsWith("ssh://")) throw new Error(`engine host ${host}: expected unix:///path or ssh://user@host`);
  const agent = new http.Agent({ keepAlive: false, maxSockets: 8 });
  (agent as unknown as { createConnection: () => Duplex }).createConnection = () => sshConnection(host, target.sshOpts);
  return new Docker({ protocol: "http", host: "docker", port: 80, agent } as Docker.DockerOptions);
}

/** The interfaces Docker makes per network and per container: they come and go as stacks deploy. */
const DOCKER_NETWORK_INTERFACE = /^(br-[0-9a-f]{12}|veth[0-9a-f]+)$/;

/** True when the target is an engine on this machine (its socket), not one reached over the network. */
export function isLocalEngine(target: EngineTarget = {}): boolean {
  const host = target.host ?? process.env.DOCKER_HOST;
  return host === undefined || host.startsWith("unix://");
}

/**
 * This machine as the host of its local engine: the addresses of its own interfaces that are up (Docker's
 * per-network bridges and veths left out: they change whenever a stack deploys, and their addresses are inside the
 * pools), the default bridge's gateway or subnet (its interface is down while no container uses it, and its address
 * may be set outside the pools), and the engine's address pools (`default-address-pools`, else Docker's own).
 */
export async function localEngineMachine(target: EngineTarget = {}): Promise<EngineMachine> {
  const engine = engineClient(target);
  const interfaces = Object.entries(os.networkInterfaces())
    .filter(([name]) => !DOCKER_NETWORK_INTERFACE.test(name))
    .flatMap(([, list]) => (list ?? []).map((i) => i.address.replace(/%.*$/, "")));
  const bridge = (await engine
    .getNetwork("bridge")
    .inspect()
    .catch(() => undefined)) as { IPAM?: { Config?: { Gateway?: string; Subnet?: string }[] } } | undefined;
  // The default bridge's inspect often names no gateway: then its whole subnet (no container of the env is on it).
  const bridgeGateways = (bridge?.IPAM?.Config ?? []).flatMap((c) =>
    c.Gateway ? [c.Gateway] : c.Subnet ? [c.Subnet] : [],
  );
  const info = (await engine.info()) as { DefaultAddressPools?: { Base: string }[] | null };
  const pools = (info.DefaultAddressPools ?? []).map((p) => p.Base);
  return {
    addresses: [...new Set([...interfaces, ...bridgeGateways])].sort(),
    addressPools: pools.length > 0 ? pools : DOCKER_DEFAULT_ADDRESS_POOLS,
  };
}

/**
 * What the engine has under the tag of each project image of `roles` (`docker image inspect`, all at once): its id
 * and the base it was built FROM; a tag it does not have is left out. A deploy runs these ids (src/program.ts).
 */
export async function projectImagesOn(
  roles: readonly ProjectImageRole[],
  target: EngineTarget = {},
): Promise<Partial<Record<ProjectImageRole, FoundImage>>> {
  const engine = engineClient(target);
  const found = await Promise.all(
    roles.map(async (role) => {
      try {
        const image = (await engine.getImage(PROJECT_IMAGES[role].imageName).inspect()) as {
          Id: string;
          Config?: { Labels?: Record<string, string> | null };
        };
        const baseImage = image.Config?.Labels?.[BASE_IMAGE_LABEL];
        return [[role, { id: image.Id, ...(baseImage === undefined ? {} : { baseImage }) }] as const];
      } catch (error) {
        if (isNotFound(error)) return [];
        throw error;
      }
    }),
  );
  return Object.fromEntries(found.flat());
}

/** True when `error` is the engine saying the object is not there. */
export function isNotFound(error: unknown): boolean {
  return (error as { statusCode?: number } | undefined)?.statusCode === 404;
}

/** A resource of an exported stack state, as far as the readers here look. */
export interface StateResource {
  urn?: string;
  id?: string;
  type: string;
  provider?: string;
  inputs?: Record<string, unknown>;
  outputs?: Record<string, unknown>;
}

/** A container of the stack: its Docker name, its labels' role, site or computer, and the engine it is on. */
export interface StackContainer {
  name: string;
  role?: string;
  site?: string;
  computer?: string;
  /** `<site>-<role>` for a capture sidecar: the prefix of its capture files. */
  captureOf?: string;
  /** The stop signal the container was declared with, when it was declared with one. */
  stopSignal?: string;
  /** The restart policy the container was declared with. */
  restart?: string;
  engine: EngineTarget;
}

/** A provider's list input as the state holds it: the SDK sends lists of provider config as JSON text. */
function listInput(value: unknown): string[] | undefined {
  if (Array.isArray(value)) return value.map(String);
  if (typeof value === "string" && value.startsWith("[")) return (JSON.parse(value) as unknown[]).map(String);
  return undefined;
}

/** The engine a resource is on, from the docker provider it names (`<provider URN>::<id>`). */
function engineOf(resource: StateResource, providers: Map<string, StateResource>): EngineTarget {
  const provider = resource.provider ? providers.get(resource.provider) : undefined;
  const inputs = provider?.inputs ?? {};
  const host = typeof inputs.host === "string" && inputs.host !== "" ? inputs.host : undefined;
  const sshOpts = listInput(inputs.sshOpts);
  return { ...(host ? { host } : {}), ...(sshOpts ? { sshOpts } : {}) };
}

/** Every container of a stack's state, with the engine each is on. */
export function stackContainers(resources: StateResource[]): StackContainer[] {
  const providers = new Map(
    resources.filter((r) => r.type === RESOURCE_TYPES.dockerProvider).map((r) => [`${r.urn}::${r.id}`, r]),
  );
  return resources
    .filter((r) => r.type === RESOURCE_TYPES.container && r.inputs)
    .map((r) => {
      const labels = Object.fromEntries(
        ((r.inputs!.labels ?? []) as { label: string; value: string }[]).map((l) => [l.label, l.value]),
      );
      return {
        name: String(r.inputs!.name),
        role: labels[LABELS.role],
        site: labels[LABELS.site],
        computer: labels[LABELS.computer],
        ...(labels[LABELS.captureSite]
          ? { captureOf: `${labels[LABELS.captureSite]}-${labels[LABELS.captureRole]}` }
          : {}),
        ...(typeof r.inputs!.stopSignal === "string" && r.inputs!.stopSignal !== ""
          ? { stopSignal: r.inputs!.stopSignal }
          : {}),
        ...(typeof r.inputs!.restart === "string" ? { restart: r.inputs!.restart } : {}),
        engine: engineOf(r, providers),
      };
    });
}
