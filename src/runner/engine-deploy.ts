// The e2e tier's deploy: what `pulumi up` with the docker provider would do, done through the
// Docker Engine API, because neither the Pulumi CLI nor its docker plugin can be installed here.
//
// The program runs under Pulumi's mocks (`pulumi.runtime.setMocks`) with THIS module as the mocks:
// each resource the program registers (the same graph `multienv check --json` prints) is created on
// the local engine as it is registered, and the mock answers with the real outputs (ids, published
// ports). So dependency order, `container:<id>` network modes and outputs such as `gatewayUrl` are
// the program's own, computed from what is running.
//
// The mapping from @pulumi/docker (v5) inputs to Engine API fields is the table below, one entry per
// input. It is exhaustive on purpose: an input it does not know fails the deploy, naming the
// resource and the input, so it can never drift silently from the program.
//
// | resource / input                  | Engine API                                                        |
// |-----------------------------------|-------------------------------------------------------------------|
// | docker:index/network:Network      | POST /networks/create                                             |
// |   name                            | Name                                                              |
// |   driver                          | Driver                                                            |
// |   internal                        | Internal                                                          |
// |   attachable / ingress / ipv6     | Attachable / Ingress / EnableIPv6                                 |
// |   options                         | Options                                                           |
// |   labels [{label, value}]         | Labels (plus multienv.stack, multienv.deployer)                   |
// |   ipamDriver / ipamConfigs        | IPAM.Driver / IPAM.Config [{Subnet, IPRange, Gateway, AuxiliaryAddresses}] |
// |   checkDuplicate                  | CheckDuplicate                                                    |
// | docker:index/volume:Volume        | POST /volumes/create                                              |
// |   name / driver / driverOpts      | Name / Driver / DriverOpts                                        |
// |   labels                          | Labels (plus the deployer's)                                      |
// | docker:index/image:Image          | GET /images/{imageName}/json: prebuilt by scripts/build-images.sh |
// |   build.args.BASE_IMAGE           | must equal the image's multienv.base-image label                  |
// |   imageName                       | the image that must exist                                         |
// |   build {context, dockerfile, args}, buildOnPreview, skipPush, registry | built by build-images.sh, never pushed |
// | docker:index/remoteImage:RemoteImage | GET /images/{name}/json (no pulls: nothing is reachable)       |
// |   name                            | the image that must exist; output imageId = its id                |
// |   keepLocally / forceRemove       | the deployer never removes images                                 |
// | docker:index/container:Container  | POST /containers/create, /networks/{n}/connect, /containers/{id}/start |
// |   name                            | ?name=                                                            |
// |   image                           | Image                                                             |
// |   entrypoints / command           | Entrypoint / Cmd                                                  |
// |   envs                            | Env                                                               |
// |   labels [{label, value}]         | Labels (plus the deployer's)                                      |
// |   hostname / domainname / user / workingDir | Hostname / Domainname / User / WorkingDir               |
// |   tty / stdinOpen                 | Tty / OpenStdin                                                   |
// |   stopSignal / stopTimeout        | StopSignal / StopTimeout                                          |
// |   ports [{internal, external, ip, protocol}] | ExposedPorts + HostConfig.PortBindings (external unset: the engine picks) |
// |   publishAllPorts                 | HostConfig.PublishAllPorts                                        |
// |   networkMode                     | HostConfig.NetworkMode (`container:<id>` is a real id: ids are the engine's) |
// |   networksAdvanced [{name, aliases, ipv4Address, ipv6Address}] | first: NetworkingConfig.EndpointsConfig at create; the rest: POST /networks/{name}/connect |
// |   mounts [{type, source, target, readOnly}] | HostConfig.Mounts [{Type, Source, Target, ReadOnly}]    |
// |   volumes [{volumeName|hostPath, containerPath, readOnly}] | HostConfig.Binds `src:dst[:ro]`         |
// |   capabilities {adds, drops}      | HostConfig.CapAdd / CapDrop                                       |
// |   privileged / readOnly / init    | HostConfig.Privileged / ReadonlyRootfs / Init                     |
// |   restart / maxRetryCount         | HostConfig.RestartPolicy {Name, MaximumRetryCount}                |
// |   dns / dnsOpts / dnsSearches     | HostConfig.Dns / DnsOptions / DnsSearch                           |
// |   hosts [{host, ip}]              | HostConfig.ExtraHosts `host:ip`                                   |
// |   tmpfs {path: options}           | HostConfig.Tmpfs                                                  |
// |   shmSize / memory / memorySwap (MB) | HostConfig.ShmSize / Memory / MemorySwap (bytes)               |
// |   sysctls / securityOpts / groupAdds | HostConfig.Sysctls / SecurityOpt / GroupAdd                    |
// |   pidMode / ipcMode               | HostConfig.PidMode / IpcMode                                      |
// |   logDriver / logOpts             | HostConfig.LogConfig {Type, Config}                               |
// |   ulimits [{name, soft, hard}]    | HostConfig.Ulimits [{Name, Soft, Hard}]                           |
// |   healthcheck {tests, interval, timeout, startPeriod, retries} | Healthcheck {Test, Interval, Timeout, StartPeriod (ns), Retries} |
// |   start (default true)            | POST /containers/{id}/start                                       |
// |   mustRun (default true)          | the container must be running after start (else: fail, with its logs) |
// |   wait / waitTimeout (s, def. 60) | poll GET /containers/{id}/json until State.Health.Status = healthy |
// |   destroyGraceSeconds             | teardown: POST /containers/{id}/stop?t=                           |
// |   rm / attach / logs / removeVolumes | must be false/unset (true would make it a one-shot run)        |
// | command:local:Command             | runs `create` with /bin/sh -c on this machine, like the command provider |
// |   create / environment / dir / logging | the command, its environment and directory; logging ignored |
// |   delete                          | run at teardown, last created first, before the containers go       |
// | pulumi:providers:docker           | host must be unset or the local socket                            |
// | pulumi:providers:command          | nothing to do                                                     |
// | any component (custom = false)    | nothing to create                                                 |
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import * as pulumi from "@pulumi/pulumi";
import { readStackFile } from "../config";
import { multienvProgram } from "../program";
import { containerLogs, DockerApiError, type DockerApi } from "./docker-api";

const execFileP = promisify(execFile);

/** Labels the deployer puts on everything it creates, so a sweep finds them after a failed run. */
export const STACK_LABEL = "multienv.stack";
export const DEPLOYER_LABEL = "multienv.deployer";
export const DEPLOYER_LABEL_VALUE = "engine-deploy";

/** Set by scripts/build-images.sh on each image: the BASE_IMAGE it was built from. */
export const BASE_IMAGE_LABEL = "multienv.base-image";

export class UnmappedInputError extends Error {}

/** The resource as the mocks see it: the same type, name and inputs `multienv check --json` prints. */
export interface RegisteredResource {
  type: string;
  name: string;
  custom: boolean;
  inputs: Record<string, any>;
  /** What was created on the engine: container/network id, volume or image name. */
  engineId?: string;
}

interface MockResourceArgs {
  type: string;
  name: string;
  inputs: any;
  provider?: string;
  id?: string;
  custom?: boolean;
}

// --- secrets and small helpers ----------------------------------------------------------------------

const SECRET_SIG_KEY = "4dabf18193072939515e22adb298388d";
const SECRET_SIG = "1b47061264138c4ac30d75fd1eb44270";

/** Inputs with Pulumi's secret wrappers removed: the engine gets the values, as the docker provider would. */
export function revealSecrets(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(revealSecrets);
  if (value && typeof value === "object") {
    const o = value as Record<string, unknown>;
    if (o[SECRET_SIG_KEY] === SECRET_SIG) return revealSecrets(o.value);
    return Object.fromEntries(Object.entries(o).map(([k, v]) => [k, revealSecrets(v)]));
  }
  return value;
}

function labelsOf(value: unknown): Record<string, string> {
  const out: Record<string, string> = {};
  for (const l of (value as { label: string; value: string }[] | undefined) ?? []) out[l.label] = l.value;
  return out;
}

/** Go duration strings as the docker provider takes them (`2s`, `1m30s`, `500ms`) -> nanoseconds. */
export function durationNs(value: string, where: string): number {
  const re = /(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)/g;
  const unit: Record<string, number> = { ns: 1, us: 1e3, µs: 1e3, ms: 1e6, s: 1e9, m: 60e9, h: 3600e9 };
  let total = 0;
  let consumed = 0;
  for (const m of value.matchAll(re)) {
    total += Number(m[1]) * unit[m[2]];
    consumed += m[0].length;
  }
  if (consumed !== value.length || consumed === 0) throw new UnmappedInputError(`${where}: "${value}" is not a duration like "2s" or "1m30s"`);
  return Math.round(total);
}

const MB = 1024 * 1024;

// --- the mapping tables -----------------------------------------------------------------------------

/** One entry per @pulumi/docker Container input: how it lands in the create body (see the table above). */
type Apply = (value: any, body: ContainerSpec, where: string) => void;

export interface ContainerSpec {
  name?: string;
  create: Record<string, any> & { HostConfig: Record<string, any> };
  /** Networks after the first, connected before start. */
  extraNetworks: { name: string; aliases: string[]; ipv4Address?: string; ipv6Address?: string }[];
  start: boolean;
  mustRun: boolean;
  wait: boolean;
  waitTimeoutSeconds: number;
  destroyGraceSeconds?: number;
}

const host = (field: string): Apply => (v, b) => {
  b.create.HostConfig[field] = v;
};
const top = (field: string): Apply => (v, b) => {
  b.create[field] = v;
};
const mustBeOff = (input: string): Apply => (v, _b, where) => {
  if (v) throw new UnmappedInputError(`${where}.${input}: true is not supported by the e2e deploy (it makes the container a one-shot run)`);
};

export const CONTAINER_INPUTS: Record<string, Apply> = {
  name: (v, b) => {
    b.name = v;
  },
  image: top("Image"),
  entrypoints: top("Entrypoint"),
  command: top("Cmd"),
  envs: top("Env"),
  labels: (v, b) => {
    b.create.Labels = { ...b.create.Labels, ...labelsOf(v) };
  },
  hostname: top("Hostname"),
  domainname: top("Domainname"),
  user: top("User"),
  workingDir: top("WorkingDir"),
  tty: top("Tty"),
  stdinOpen: top("OpenStdin"),
  stopSignal: top("StopSignal"),
  stopTimeout: top("StopTimeout"),
  ports: (v: { internal: number; external?: number; ip?: string; protocol?: string }[], b) => {
    b.create.ExposedPorts ??= {};
    b.create.HostConfig.PortBindings ??= {};
    for (const p of v) {
      const key = `${p.internal}/${p.protocol ?? "tcp"}`;
      b.create.ExposedPorts[key] = {};
      (b.create.HostConfig.PortBindings[key] ??= []).push({ HostIp: p.ip ?? "0.0.0.0", HostPort: p.external ? String(p.external) : "" });
    }
  },
  publishAllPorts: host("PublishAllPorts"),
  networkMode: host("NetworkMode"),
  networksAdvanced: (v: { name: string; aliases?: string[]; ipv4Address?: string; ipv6Address?: string }[], b, where) => {
    v.forEach((n, i) => {
      for (const k of Object.keys(n)) {
        if (!["name", "aliases", "ipv4Address", "ipv6Address"].includes(k)) throw new UnmappedInputError(`${where}.networksAdvanced[${i}].${k}: not mapped by the e2e deploy (src/runner/engine-deploy.ts)`);
      }
    });
    const [first, ...rest] = v;
    if (!first) return;
    b.create.HostConfig.NetworkMode ??= first.name;
    const ipam = first.ipv4Address || first.ipv6Address ? { IPv4Address: first.ipv4Address, IPv6Address: first.ipv6Address } : undefined;
    b.create.NetworkingConfig = { EndpointsConfig: { [first.name]: { Aliases: first.aliases ?? [], IPAMConfig: ipam } } };
    b.extraNetworks = rest.map((n) => ({ name: n.name, aliases: n.aliases ?? [], ipv4Address: n.ipv4Address, ipv6Address: n.ipv6Address }));
  },
  mounts: (v: { type: string; source?: string; target: string; readOnly?: boolean }[], b, where) => {
    v.forEach((m, i) => {
      for (const k of Object.keys(m)) {
        if (!["type", "source", "target", "readOnly"].includes(k)) throw new UnmappedInputError(`${where}.mounts[${i}].${k}: not mapped by the e2e deploy (src/runner/engine-deploy.ts)`);
      }
    });
    b.create.HostConfig.Mounts = v.map((m) => ({ Type: m.type, Source: m.source, Target: m.target, ReadOnly: m.readOnly ?? false }));
  },
  volumes: (v: { volumeName?: string; hostPath?: string; containerPath: string; readOnly?: boolean; fromContainer?: string }[], b, where) => {
    b.create.HostConfig.Binds = v.map((m, i) => {
      if (m.fromContainer) throw new UnmappedInputError(`${where}.volumes[${i}].fromContainer: not mapped by the e2e deploy`);
      const source = m.volumeName ?? m.hostPath;
      if (!source) throw new UnmappedInputError(`${where}.volumes[${i}]: needs volumeName or hostPath`);
      return `${source}:${m.containerPath}${m.readOnly ? ":ro" : ""}`;
    });
  },
  capabilities: (v: { adds?: string[]; drops?: string[] }, b) => {
    b.create.HostConfig.CapAdd = v.adds ?? [];
    b.create.HostConfig.CapDrop = v.drops ?? [];
  },
  privileged: host("Privileged"),
  readOnly: host("ReadonlyRootfs"),
  init: host("Init"),
  restart: (v, b) => {
    b.create.HostConfig.RestartPolicy = { ...b.create.HostConfig.RestartPolicy, Name: v };
  },
  maxRetryCount: (v, b) => {
    b.create.HostConfig.RestartPolicy = { ...b.create.HostConfig.RestartPolicy, MaximumRetryCount: v };
  },
  dns: host("Dns"),
  dnsOpts: host("DnsOptions"),
  dnsSearches: host("DnsSearch"),
  hosts: (v: { host: string; ip: string }[], b) => {
    b.create.HostConfig.ExtraHosts = v.map((h) => `${h.host}:${h.ip}`);
  },
  tmpfs: host("Tmpfs"),
  shmSize: (v, b) => {
    b.create.HostConfig.ShmSize = v * MB;
  },
  memory: (v, b) => {
    b.create.HostConfig.Memory = v * MB;
  },
  memorySwap: (v, b) => {
    b.create.HostConfig.MemorySwap = v < 0 ? v : v * MB;
  },
  sysctls: host("Sysctls"),
  securityOpts: host("SecurityOpt"),
  groupAdds: host("GroupAdd"),
  pidMode: host("PidMode"),
  ipcMode: host("IpcMode"),
  logDriver: (v, b) => {
    b.create.HostConfig.LogConfig = { ...b.create.HostConfig.LogConfig, Type: v };
  },
  logOpts: (v, b) => {
    b.create.HostConfig.LogConfig = { Type: "json-file", ...b.create.HostConfig.LogConfig, Config: v };
  },
  ulimits: (v: { name: string; soft: number; hard: number }[], b) => {
    b.create.HostConfig.Ulimits = v.map((u) => ({ Name: u.name, Soft: u.soft, Hard: u.hard }));
  },
  healthcheck: (v: { tests: string[]; interval?: string; timeout?: string; startPeriod?: string; retries?: number }, b, where) => {
    for (const k of Object.keys(v)) {
      if (!["tests", "interval", "timeout", "startPeriod", "retries"].includes(k)) throw new UnmappedInputError(`${where}.healthcheck.${k}: not mapped by the e2e deploy (src/runner/engine-deploy.ts)`);
    }
    b.create.Healthcheck = {
      Test: v.tests,
      Interval: v.interval ? durationNs(v.interval, `${where}.healthcheck.interval`) : 0,
      Timeout: v.timeout ? durationNs(v.timeout, `${where}.healthcheck.timeout`) : 0,
      StartPeriod: v.startPeriod ? durationNs(v.startPeriod, `${where}.healthcheck.startPeriod`) : 0,
      Retries: v.retries ?? 0,
    };
  },
  start: (v, b) => {
    b.start = v !== false;
  },
  mustRun: (v, b) => {
    b.mustRun = v !== false;
  },
  wait: (v, b) => {
    b.wait = v === true;
  },
  waitTimeout: (v, b) => {
    b.waitTimeoutSeconds = v;
  },
  destroyGraceSeconds: (v, b) => {
    b.destroyGraceSeconds = v;
  },
  rm: mustBeOff("rm"),
  attach: mustBeOff("attach"),
  logs: mustBeOff("logs"),
  removeVolumes: () => undefined,
};

/** The Engine API create body of a Container's inputs; an unknown input throws, naming it. */
export function containerSpec(resourceName: string, inputs: Record<string, unknown>, deployerLabels: Record<string, string>): ContainerSpec {
  const where = `docker.Container ${resourceName}`;
  const spec: ContainerSpec = { create: { HostConfig: {}, Labels: {} }, extraNetworks: [], start: true, mustRun: true, wait: false, waitTimeoutSeconds: 60 };
  for (const [input, value] of Object.entries(inputs)) {
    if (value === undefined || value === null) continue;
    const apply = CONTAINER_INPUTS[input];
    if (!apply) throw new UnmappedInputError(`${where}.${input}: not mapped to the Docker Engine API by the e2e deploy; add it to the table in src/runner/engine-deploy.ts`);
    apply(value, spec, where);
  }
  spec.create.Labels = { ...spec.create.Labels, ...deployerLabels };
  if (!spec.create.Image) throw new UnmappedInputError(`${where}.image: missing`);
  return spec;
}

const NETWORK_INPUTS: Record<string, (v: any, body: Record<string, any>) => void> = {
  name: (v, b) => (b.Name = v),
  driver: (v, b) => (b.Driver = v),
  internal: (v, b) => (b.Internal = v),
  attachable: (v, b) => (b.Attachable = v),
  ingress: (v, b) => (b.Ingress = v),
  ipv6: (v, b) => (b.EnableIPv6 = v),
  options: (v, b) => (b.Options = v),
  labels: (v, b) => (b.Labels = { ...b.Labels, ...labelsOf(v) }),
  checkDuplicate: (v, b) => (b.CheckDuplicate = v),
  ipamDriver: (v, b) => (b.IPAM = { ...b.IPAM, Driver: v }),
  ipamConfigs: (v: { subnet?: string; ipRange?: string; gateway?: string; auxAddress?: Record<string, string> }[], b) =>
    (b.IPAM = { ...b.IPAM, Config: v.map((c) => ({ Subnet: c.subnet, IPRange: c.ipRange, Gateway: c.gateway, AuxiliaryAddresses: c.auxAddress })) }),
};

const VOLUME_INPUTS: Record<string, (v: any, body: Record<string, any>) => void> = {
  name: (v, b) => (b.Name = v),
  driver: (v, b) => (b.Driver = v),
  driverOpts: (v, b) => (b.DriverOpts = v),
  labels: (v, b) => (b.Labels = { ...b.Labels, ...labelsOf(v) }),
};

function mapInputs(kind: string, resourceName: string, inputs: Record<string, unknown>, table: Record<string, (v: any, b: Record<string, any>) => void>): Record<string, any> {
  const body: Record<string, any> = {};
  for (const [input, value] of Object.entries(inputs)) {
    if (value === undefined || value === null) continue;
    const apply = table[input];
    if (!apply) throw new UnmappedInputError(`${kind} ${resourceName}.${input}: not mapped to the Docker Engine API by the e2e deploy; add it to the table in src/runner/engine-deploy.ts`);
    apply(value, body);
  }
  return body;
}

const IMAGE_INPUTS = new Set(["imageName", "build", "buildOnPreview", "skipPush", "registry"]);
const REMOTE_IMAGE_INPUTS = new Set(["name", "keepLocally", "forceRemove"]);
const COMMAND_INPUTS = new Set(["create", "delete", "environment", "dir", "logging"]);

// --- the deployer -------------------------------------------------------------------------------------

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

export interface EngineDeployerOptions {
  stack: string;
  api: DockerApi;
  /** Progress lines (resource created, waiting for health). */
  log?: (line: string) => void;
}

/**
 * Pulumi mocks that create what they are asked for on the local Docker engine. Pass it to
 * `pulumi.runtime.setMocks`; everything it created is in `resources` and goes with `teardown()`.
 */
export class EngineDeployer {
  readonly resources: RegisteredResource[] = [];
  /** Errors of failed creations, first first. */
  readonly errors: unknown[] = [];
  /** Commands' delete steps, last created first: teardown runs them before it removes anything. */
  readonly deleteSteps: { name: string; command: string; dir?: string; environment: Record<string, string> }[] = [];
  private failed?: (error: unknown) => void;
  private readonly inFlight = new Set<Promise<unknown>>();
  /** Rejects with the first failed creation: the program may wait for ever on a resource that failed. */
  readonly firstError: Promise<never> = new Promise((_, reject) => (this.failed = reject));
  private readonly labels: Record<string, string>;
  private readonly log: (line: string) => void;

  constructor(private readonly options: EngineDeployerOptions) {
    this.labels = { [STACK_LABEL]: options.stack, [DEPLOYER_LABEL]: DEPLOYER_LABEL_VALUE };
    this.log = options.log ?? (() => undefined);
  }

  async newResource(args: MockResourceArgs): Promise<{ id: string | undefined; state: Record<string, any> }> {
    const inputs = revealSecrets(args.inputs ?? {}) as Record<string, any>;
    const record: RegisteredResource = { type: args.type, name: args.name, custom: args.custom !== false, inputs };
    this.resources.push(record);
    if (args.custom === false) return { id: undefined, state: {} };
    // After a failure nothing more is created: the deploy is being rolled back.
    if (this.errors.length) throw new Error(`${args.type} ${args.name}: not created, the deploy failed`);
    let state: Record<string, any>;
    const creating = this.create(record);
    this.inFlight.add(creating);
    try {
      state = await creating;
    } catch (error) {
      // The mock monitor turns a rejection into a failed registration the program may never observe;
      // keep the first one so the deploy reports it.
      this.errors.push(error);
      this.failed?.(error);
      throw error;
    } finally {
      this.inFlight.delete(creating);
    }
    return { id: record.engineId ?? args.name, state: { ...args.inputs, ...state } };
  }

  async call(args: { token: string; inputs: any }): Promise<Record<string, any>> {
    throw new UnmappedInputError(`invoke ${args.token}: not supported by the e2e deploy (it deploys to the local Docker engine only)`);
  }

  private async create(r: RegisteredResource): Promise<Record<string, any>> {
    const api = this.options.api;
    switch (r.type) {
      case "docker:index/network:Network": {
        const body = mapInputs("docker.Network", r.name, r.inputs, NETWORK_INPUTS);
        body.Name ??= r.name;
        body.Labels = { ...body.Labels, ...this.labels };
        const created = await api.request<{ Id: string }>("POST", "/networks/create", body);
        r.engineId = created.Id;
        this.log(`network ${body.Name}${body.Internal ? " (internal)" : ""}`);
        return { name: body.Name };
      }
      case "docker:index/volume:Volume": {
        const body = mapInputs("docker.Volume", r.name, r.inputs, VOLUME_INPUTS);
        body.Name ??= r.name;
        body.Labels = { ...body.Labels, ...this.labels };
        const created = await api.request<{ Name: string; Mountpoint: string }>("POST", "/volumes/create", body);
        r.engineId = created.Name;
        this.log(`volume ${created.Name}`);
        return { name: created.Name, mountpoint: created.Mountpoint };
      }
      case "docker:index/image:Image": {
        for (const k of Object.keys(r.inputs)) if (!IMAGE_INPUTS.has(k)) throw new UnmappedInputError(`docker.Image ${r.name}.${k}: not mapped by the e2e deploy; add it to src/runner/engine-deploy.ts`);
        const image = await this.existingImage(`docker.Image ${r.name}`, r.inputs.imageName);
        // The prebuilt image must be what the program would build: the same Dockerfile base.
        const wanted = r.inputs.build?.args?.BASE_IMAGE;
        const built = image.Config?.Labels?.[BASE_IMAGE_LABEL];
        if (wanted !== undefined && built !== undefined && wanted !== built) {
          throw new Error(`docker.Image ${r.name}: ${r.inputs.imageName} was built FROM ${built} but the program builds it FROM ${wanted}; rebuild with \`npm run images\` or fix the program's BASE_IMAGE`);
        }
        r.engineId = r.inputs.imageName;
        return { imageName: r.inputs.imageName, repoDigest: image.Id, baseImageName: r.inputs.imageName };
      }
      case "docker:index/remoteImage:RemoteImage": {
        for (const k of Object.keys(r.inputs)) if (!REMOTE_IMAGE_INPUTS.has(k)) throw new UnmappedInputError(`docker.RemoteImage ${r.name}.${k}: not mapped by the e2e deploy; add it to src/runner/engine-deploy.ts`);
        const image = await this.existingImage(`docker.RemoteImage ${r.name}`, r.inputs.name);
        r.engineId = image.Id;
        return { imageId: image.Id, repoDigest: image.Id };
      }
      case "docker:index/container:Container":
        return this.createContainer(r);
      case "command:local:Command": {
        for (const k of Object.keys(r.inputs)) if (!COMMAND_INPUTS.has(k)) throw new UnmappedInputError(`command.local.Command ${r.name}.${k}: not mapped by the e2e deploy`);
        const { stdout, stderr } = await execFileP("/bin/sh", ["-c", r.inputs.create], {
          cwd: r.inputs.dir,
          env: { ...process.env, ...(r.inputs.environment ?? {}) },
        });
        if (r.inputs.delete) this.deleteSteps.unshift({ name: r.name, command: r.inputs.delete, dir: r.inputs.dir, environment: r.inputs.environment ?? {} });
        return { stdout: stdout.replace(/\n$/, ""), stderr };
      }
      case "pulumi:providers:docker": {
        const h = r.inputs.host;
        if (h !== undefined && h !== "unix:///var/run/docker.sock") throw new UnmappedInputError(`docker provider ${r.name}.host: "${h}": the e2e deploy reaches the local engine only`);
        return {};
      }
      case "pulumi:providers:command":
        return {};
      default:
        throw new UnmappedInputError(`${r.type} ${r.name}: resource type not supported by the e2e deploy (src/runner/engine-deploy.ts)`);
    }
  }

  private async existingImage(what: string, name: string): Promise<{ Id: string; Config?: { Labels?: Record<string, string> } }> {
    try {
      return await this.options.api.request("GET", `/images/${encodeURIComponent(name)}/json`);
    } catch (e) {
      if (e instanceof DockerApiError && e.status === 404) throw new Error(`${what}: image ${name} is not on the engine; build it with \`npm run images\` (nothing is pulled)`);
      throw e;
    }
  }

  private async createContainer(r: RegisteredResource): Promise<Record<string, any>> {
    const api = this.options.api;
    const spec = containerSpec(r.name, r.inputs, this.labels);
    const name = spec.name ?? r.name;
    const created = await api.request<{ Id: string }>("POST", `/containers/create?name=${encodeURIComponent(name)}`, spec.create);
    r.engineId = created.Id;
    for (const n of spec.extraNetworks) {
      const ipam = n.ipv4Address || n.ipv6Address ? { IPv4Address: n.ipv4Address, IPv6Address: n.ipv6Address } : undefined;
      await api.request("POST", `/networks/${encodeURIComponent(n.name)}/connect`, { Container: created.Id, EndpointConfig: { Aliases: n.aliases, IPAMConfig: ipam } });
    }
    if (spec.start) {
      await api.request("POST", `/containers/${created.Id}/start`);
      this.log(`container ${name} started`);
    }
    let info = await api.request("GET", `/containers/${created.Id}/json`);
    if (spec.start && spec.mustRun && !info.State.Running) {
      throw new Error(`docker.Container ${r.name}: ${name} is not running after start (exit ${info.State.ExitCode}); its log:\n${await containerLogs(api, created.Id)}`);
    }
    if (spec.wait) {
      const deadline = Date.now() + spec.waitTimeoutSeconds * 1000;
      this.log(`container ${name}: waiting for healthy`);
      while (info.State.Health?.Status !== "healthy") {
        if (!info.State.Health) throw new Error(`docker.Container ${r.name}: wait is set but ${name} has no health check`);
        if (Date.now() > deadline) {
          const last = info.State.Health.Log?.at(-1)?.Output?.trim() ?? "";
          throw new Error(`docker.Container ${r.name}: ${name} not healthy after ${spec.waitTimeoutSeconds} s (last check: ${last}); its log:\n${await containerLogs(api, created.Id)}`);
        }
        await sleep(250);
        info = await api.request("GET", `/containers/${created.Id}/json`);
      }
      this.log(`container ${name} healthy`);
    }
    // The provider's computed outputs: published ports as bound, and the networks the container joined.
    const bindings = info.NetworkSettings?.Ports ?? {};
    const ports = ((r.inputs.ports as { internal: number; protocol?: string; ip?: string }[] | undefined) ?? []).map((p) => {
      const bound = bindings[`${p.internal}/${p.protocol ?? "tcp"}`]?.[0];
      return { internal: p.internal, external: bound ? Number(bound.HostPort) : undefined, ip: bound?.HostIp ?? p.ip, protocol: p.protocol ?? "tcp" };
    });
    const networkDatas = Object.entries(info.NetworkSettings?.Networks ?? {}).map(([networkName, n]: [string, any]) => ({
      networkName,
      ipAddress: n.IPAddress,
      gateway: n.Gateway,
      macAddress: n.MacAddress,
    }));
    return { name, ports, networkDatas, hostname: info.Config?.Hostname };
  }

  /** Resolves once no creation is under way (a failed deploy waits for them before it removes what exists). */
  async settled(): Promise<void> {
    while (this.inFlight.size) await Promise.allSettled([...this.inFlight]);
  }

  /**
   * Runs the commands' delete steps (e.g. the capture collector's `multienv collect`), then removes everything
   * the stack holds on the engine (see `sweepStack`), also when a delete step failed; that failure is thrown after.
   */
  async teardown(): Promise<string[]> {
    const failures: string[] = [];
    for (const step of this.deleteSteps) {
      this.log(`command ${step.name}: delete step`);
      await execFileP("/bin/sh", ["-c", step.command], { cwd: step.dir, env: { ...process.env, ...step.environment } }).catch((e: Error & { stderr?: string }) => {
        failures.push(`command.local.Command ${step.name} delete step failed: ${(e.stderr || e.message).trim()}`);
      });
    }
    const removed = await sweepStack(this.options.api, this.options.stack);
    if (failures.length) throw new Error(failures.join("\n"));
    return removed;
  }
}

/**
 * Removes every container, network and volume labelled `multienv.stack=<stack>` by this deployer:
 * the teardown after a run, and the sweep before one (a failed run's leftovers). Returns what it removed.
 */
export async function sweepStack(api: DockerApi, stack: string): Promise<string[]> {
  const filters = (extra: Record<string, string[]> = {}) =>
    encodeURIComponent(JSON.stringify({ label: [`${STACK_LABEL}=${stack}`, `${DEPLOYER_LABEL}=${DEPLOYER_LABEL_VALUE}`], ...extra }));
  const removed: string[] = [];
  const containers: { Id: string; Names: string[] }[] = await api.request("GET", `/containers/json?all=1&filters=${filters()}`);
  await Promise.all(
    containers.map(async (c) => {
      await api.request("DELETE", `/containers/${c.Id}?force=1&v=1`).catch((e) => {
        if (!(e instanceof DockerApiError && e.status === 404)) throw e;
      });
      removed.push(`container ${c.Names[0]?.replace(/^\//, "")}`);
    }),
  );
  const networks: { Id: string; Name: string }[] = await api.request("GET", `/networks?filters=${filters()}`);
  for (const n of networks) {
    await api.request("DELETE", `/networks/${n.Id}`);
    removed.push(`network ${n.Name}`);
  }
  const volumes: { Volumes: { Name: string }[] | null } = await api.request("GET", `/volumes?filters=${filters()}`);
  for (const v of volumes.Volumes ?? []) {
    await api.request("DELETE", `/volumes/${encodeURIComponent(v.Name)}?force=1`);
    removed.push(`volume ${v.Name}`);
  }
  return removed;
}

// --- running the program with the deployer as its mocks ------------------------------------------------

export interface DeployOptions {
  /** Stack name: it prefixes every Docker name and labels everything created. */
  stack: string;
  /** `stacks/Pulumi.<x>.yaml` (or any stack file) whose config the program reads. */
  stackFile: string;
  api: DockerApi;
  log?: (line: string) => void;
}

export interface Deployment {
  stack: string;
  /** The program's outputs as computed from what is running, secrets revealed (the control token included). */
  outputs: Record<string, any>;
  /** Every resource the program registered, in registration order, with what it became on the engine. */
  resources: RegisteredResource[];
  /** Seconds from the program's start to the last resource created (healthy where `wait` is set). */
  seconds: number;
  teardown(): Promise<string[]>;
}

interface OutputInternals {
  promise(withUnknowns?: boolean): Promise<unknown>;
}

/** A stack output with every Output and Promise resolved and secrets revealed. */
async function resolveOutput(value: unknown): Promise<unknown> {
  if (value instanceof Promise) return resolveOutput(await value);
  if (value && typeof value === "object" && (value as { __pulumiOutput?: boolean }).__pulumiOutput) {
    return resolveOutput(await (value as unknown as OutputInternals).promise());
  }
  if (Array.isArray(value)) return Promise.all(value.map(resolveOutput));
  if (value && typeof value === "object") {
    const entries = await Promise.all(Object.entries(value).map(async ([k, v]) => [k, await resolveOutput(v)] as const));
    return Object.fromEntries(entries.filter(([, v]) => v !== undefined));
  }
  return value;
}

let deploying = false;

/**
 * Deploys a stack on the local engine: sweeps what an earlier run of the same stack left, then runs the
 * multienv program with an EngineDeployer as Pulumi's mocks. On failure everything created is removed
 * and the first error is thrown.
 */
export async function deployStack(options: DeployOptions): Promise<Deployment> {
  if (deploying) throw new Error("deployStack: one deploy at a time (the Pulumi runtime's state is global)");
  deploying = true;
  const { api, stack } = options;
  const swept = await sweepStack(api, stack);
  if (swept.length) options.log?.(`swept ${swept.length} leftovers of stack ${stack}`);
  const file = readStackFile(options.stackFile, stack);
  const deployer = new EngineDeployer({ stack, api, log: options.log });
  const failures: unknown[] = [];
  const onRejection = (reason: unknown) => failures.push(reason);
  process.on("unhandledRejection", onRejection);
  const started = Date.now();
  try {
    const runtime = pulumi.runtime as unknown as { waitForRPCs(): Promise<void> };
    pulumi.runtime.setAllConfig(file.rawConfig, file.secretKeys);
    await pulumi.runtime.setMocks(deployer, "multienv", stack, false);
    deployer.firstError.catch(() => undefined);
    let programOutputs: unknown;
    const run = async () => {
      await pulumi.runtime.runInPulumiStack(async () => {
        programOutputs = await multienvProgram();
        return {};
      });
      await runtime.waitForRPCs();
    };
    // Keeps node running while the program waits on a resource that failed (firstError ends the wait).
    const keepAlive = setInterval(() => undefined, 1000);
    try {
      await Promise.race([run(), deployer.firstError]);
    } finally {
      clearInterval(keepAlive);
    }
    if (deployer.errors.length) throw deployer.errors[0];
    if (failures.length) throw failures[0];
    const outputs = (await resolveOutput(programOutputs)) as Record<string, any>;
    const seconds = (Date.now() - started) / 1000;
    return { stack, outputs, resources: deployer.resources, seconds, teardown: () => deployer.teardown() };
  } catch (error) {
    await deployer.settled();
    await sweepStack(api, stack).catch(() => undefined);
    throw deployer.errors[0] ?? error;
  } finally {
    process.off("unhandledRejection", onRejection);
    deploying = false;
  }
}
