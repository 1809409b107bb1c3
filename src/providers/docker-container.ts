// Docker containers as a dynamic-provider resource kind. The inputs keep @pulumi/docker's Container names
// (so the policy pack reads one shape), and the table below maps each to its Docker Engine API field. An input
// the table does not know fails the check, naming it.
//
// | input                                   | Engine API                                                              |
// |-----------------------------------------|-------------------------------------------------------------------------|
// | name                                    | ?name=                                                                  |
// | image                                   | Image (an image id from the image resources, so a rebuilt image replaces
// it) | | entrypoints / command                   | Entrypoint / Cmd
// | | envs                                    | Env
// | | labels [{label, value}]                 | Labels
// | | hostname / user / workingDir            | Hostname / User / WorkingDir
// | | ports [{internal, external, ip, protocol}] | ExposedPorts + HostConfig.PortBindings (external unset: the engine
// picks; output publishedPorts) | | networkMode                             | HostConfig.NetworkMode (`container:<id>`)
// | | networksAdvanced [{name, aliases, ipv4Address}] | first: NetworkingConfig at create; the rest: POST
// /networks/{name}/connect | | mounts [{type, source, target, readOnly}] | HostConfig.Mounts
// | | capabilities {adds, drops}              | HostConfig.CapAdd / CapDrop
// | | privileged / readOnly / init            | HostConfig.Privileged / ReadonlyRootfs / Init
// | | restart                                 | HostConfig.RestartPolicy.Name
// | | dns / hosts [{host, ip}] / tmpfs        | HostConfig.Dns / ExtraHosts / Tmpfs
// | | shmSize / memory (MB)                   | HostConfig.ShmSize / Memory (bytes)
// | | sysctls / securityOpts / pidMode        | HostConfig.Sysctls / SecurityOpt / PidMode
// | | logDriver / logOpts                     | HostConfig.LogConfig
// | | healthcheck {tests, interval, timeout, startPeriod, retries} | Healthcheck (durations as Go strings, "2s")
// | | wait / waitTimeout (s, default 60)      | after start, run the health check (exec) until it passes, or the engine
// says healthy | | destroyGraceSeconds (default 2)         | delete: POST /containers/{id}/stop?t= before removing it
// | | engine {host, sshOptions}               | which engine (docker-api.ts)
// |
//
// The resource's id is the container's name (outputs: containerId, publishedPorts, networkDatas). A change of
// its name or engine replaces it; any other change updates it, which for Docker means the container is
// recreated under the same name, on the host ports it had, so an address a runner holds (the gateway's URL)
// outlives a change of the gateway's config. A recreated container has a new containerId, so a capture
// sidecar in its network namespace (networkMode container:<containerId>) is updated with it.
import { containerLogs, dockerApi, isNotFound, type DockerApi, type EngineTarget } from "./docker-api";
import { diffInputs, pick, type Operations } from "./operation";

const MB = 1024 * 1024;

export interface ContainerSpec {
  name: string;
  create: Record<string, any> & { HostConfig: Record<string, any> };
  /** Networks after the first, connected before start. */
  extraNetworks: { name: string; aliases: string[]; ipv4Address?: string }[];
  wait: boolean;
  waitTimeoutSeconds: number;
}

type Apply = (value: any, spec: ContainerSpec, where: string) => void;

export class ContainerInputError extends Error {}

/** Go duration strings as Docker's tools take them (`2s`, `1m30s`, `500ms`) -> nanoseconds. */
export function durationNs(value: string, where: string): number {
  const unit: Record<string, number> = { ns: 1, us: 1e3, µs: 1e3, ms: 1e6, s: 1e9, m: 60e9, h: 3600e9 };
  let total = 0;
  let consumed = 0;
  for (const m of value.matchAll(/(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)/g)) {
    total += Number(m[1]) * unit[m[2]];
    consumed += m[0].length;
  }
  if (consumed !== value.length || consumed === 0)
    throw new ContainerInputError(`${where}: "${value}" is not a duration like "2s" or "1m30s"`);
  return Math.round(total);
}

function labelsOf(value: { label: string; value: string }[] | undefined): Record<string, string> {
  return Object.fromEntries((value ?? []).map((l) => [l.label, l.value]));
}

const host =
  (field: string): Apply =>
  (v, s) => {
    s.create.HostConfig[field] = v;
  };
const top =
  (field: string): Apply =>
  (v, s) => {
    s.create[field] = v;
  };
function onlyKeys(value: object, keys: string[], where: string): void {
  for (const k of Object.keys(value))
    if (!keys.includes(k))
      throw new ContainerInputError(`${where}.${k}: not a known field (known: ${keys.join(", ")})`);
}

const CONTAINER_INPUTS: Record<string, Apply> = {
  name: () => undefined,
  engine: () => undefined,
  image: top("Image"),
  entrypoints: top("Entrypoint"),
  command: top("Cmd"),
  envs: top("Env"),
  labels: (v, s) => {
    s.create.Labels = labelsOf(v);
  },
  hostname: top("Hostname"),
  user: top("User"),
  workingDir: top("WorkingDir"),
  ports: (v: { internal: number; external?: number; ip?: string; protocol?: string }[], s, where) => {
    s.create.ExposedPorts = {};
    s.create.HostConfig.PortBindings = {};
    v.forEach((p, i) => {
      onlyKeys(p, ["internal", "external", "ip", "protocol"], `${where}.ports[${i}]`);
      const key = `${p.internal}/${p.protocol ?? "tcp"}`;
      s.create.ExposedPorts[key] = {};
      (s.create.HostConfig.PortBindings[key] ??= []).push({
        HostIp: p.ip ?? "0.0.0.0",
        HostPort: p.external ? String(p.external) : "",
      });
    });
  },
  networkMode: host("NetworkMode"),
  networksAdvanced: (v: { name: string; aliases?: string[]; ipv4Address?: string }[], s, where) => {
    v.forEach((n, i) => onlyKeys(n, ["name", "aliases", "ipv4Address"], `${where}.networksAdvanced[${i}]`));
    const [first, ...rest] = v;
    if (!first) return;
    s.create.HostConfig.NetworkMode ??= first.name;
    const ipam = first.ipv4Address ? { IPv4Address: first.ipv4Address } : undefined;
    s.create.NetworkingConfig = {
      EndpointsConfig: { [first.name]: { Aliases: first.aliases ?? [], IPAMConfig: ipam } },
    };
    s.extraNetworks = rest.map((n) => ({ name: n.name, aliases: n.aliases ?? [], ipv4Address: n.ipv4Address }));
  },
  mounts: (v: { type: string; source?: string; target: string; readOnly?: boolean }[], s, where) => {
    v.forEach((m, i) => onlyKeys(m, ["type", "source", "target", "readOnly"], `${where}.mounts[${i}]`));
    s.create.HostConfig.Mounts = v.map((m) => ({
      Type: m.type,
      Source: m.source,
      Target: m.target,
      ReadOnly: m.readOnly ?? false,
    }));
  },
  capabilities: (v: { adds?: string[]; drops?: string[] }, s, where) => {
    onlyKeys(v, ["adds", "drops"], `${where}.capabilities`);
    s.create.HostConfig.CapAdd = v.adds ?? [];
    s.create.HostConfig.CapDrop = v.drops ?? [];
  },
  privileged: host("Privileged"),
  readOnly: host("ReadonlyRootfs"),
  init: host("Init"),
  restart: (v, s) => {
    s.create.HostConfig.RestartPolicy = { Name: v };
  },
  dns: host("Dns"),
  hosts: (v: { host: string; ip: string }[], s) => {
    s.create.HostConfig.ExtraHosts = v.map((h) => `${h.host}:${h.ip}`);
  },
  tmpfs: host("Tmpfs"),
  shmSize: (v, s) => {
    s.create.HostConfig.ShmSize = v * MB;
  },
  memory: (v, s) => {
    s.create.HostConfig.Memory = v * MB;
  },
  sysctls: host("Sysctls"),
  securityOpts: host("SecurityOpt"),
  pidMode: host("PidMode"),
  logDriver: (v, s) => {
    s.create.HostConfig.LogConfig = { ...s.create.HostConfig.LogConfig, Type: v };
  },
  logOpts: (v, s) => {
    s.create.HostConfig.LogConfig = { Type: "json-file", ...s.create.HostConfig.LogConfig, Config: v };
  },
  healthcheck: (
    v: { tests: string[]; interval?: string; timeout?: string; startPeriod?: string; retries?: number },
    s,
    where,
  ) => {
    onlyKeys(v, ["tests", "interval", "timeout", "startPeriod", "retries"], `${where}.healthcheck`);
    s.create.Healthcheck = {
      Test: v.tests,
      Interval: v.interval ? durationNs(v.interval, `${where}.healthcheck.interval`) : 0,
      Timeout: v.timeout ? durationNs(v.timeout, `${where}.healthcheck.timeout`) : 0,
      StartPeriod: v.startPeriod ? durationNs(v.startPeriod, `${where}.healthcheck.startPeriod`) : 0,
      Retries: v.retries ?? 0,
    };
  },
  wait: (v, s) => {
    s.wait = v === true;
  },
  waitTimeout: (v, s) => {
    s.waitTimeoutSeconds = v;
  },
  destroyGraceSeconds: () => undefined,
};

/** The container kind's input names: every one replaces the container. */
export const CONTAINER_INPUT_KEYS = Object.keys(CONTAINER_INPUTS);

/** The Engine API create body of a container's inputs; an unknown or malformed input throws, naming it. */
export function containerSpec(inputs: Record<string, any>): ContainerSpec {
  const where = `container ${inputs.name ?? "(unnamed)"}`;
  if (typeof inputs.name !== "string" || inputs.name === "") throw new ContainerInputError(`${where}.name: required`);
  const spec: ContainerSpec = {
    name: inputs.name,
    create: { HostConfig: {}, Labels: {} },
    extraNetworks: [],
    wait: false,
    waitTimeoutSeconds: 60,
  };
  for (const [input, value] of Object.entries(inputs)) {
    if (value === undefined || value === null || input === "__provider") continue;
    const apply = CONTAINER_INPUTS[input];
    if (!apply)
      throw new ContainerInputError(
        `${where}.${input}: not an input of a container (known: ${CONTAINER_INPUT_KEYS.join(", ")})`,
      );
    apply(value, spec, where);
  }
  if (!spec.create.Image) throw new ContainerInputError(`${where}.image: required`);
  return spec;
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/**
 * What the engine reports about a running container, as the resource's outputs. Never under an input's name:
 * a diff compares the inputs with the old state, so an output there would read as a change.
 */
function observed(info: any, inputs: Record<string, any>): Record<string, any> {
  const bindings = info.NetworkSettings?.Ports ?? {};
  const ports = ((inputs.ports as { internal: number; protocol?: string; ip?: string }[] | undefined) ?? []).map(
    (p) => {
      const bound = bindings[`${p.internal}/${p.protocol ?? "tcp"}`]?.[0];
      return {
        internal: p.internal,
        external: bound ? Number(bound.HostPort) : undefined,
        ip: bound?.HostIp ?? p.ip,
        protocol: p.protocol ?? "tcp",
      };
    },
  );
  const networkDatas = Object.entries(info.NetworkSettings?.Networks ?? {}).map(([networkName, n]: [string, any]) => ({
    networkName,
    ipAddress: n.IPAddress,
    gateway: n.Gateway,
  }));
  return { containerId: info.Id, publishedPorts: ports, networkDatas };
}

/** Runs `cmd` in the container and returns its exit code (null when it could not run to the end in time). */
async function execExitCode(api: DockerApi, id: string, cmd: string[], timeoutMs: number): Promise<number | null> {
  const exec = await api.request<{ Id: string }>("POST", `/containers/${id}/exec`, {
    Cmd: cmd,
    AttachStdout: false,
    AttachStderr: false,
  });
  await api.request("POST", `/exec/${exec.Id}/start`, { Detach: true });
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const state = await api.request<{ Running: boolean; ExitCode: number | null }>("GET", `/exec/${exec.Id}/json`);
    if (!state.Running) return state.ExitCode;
    if (Date.now() > deadline) return null;
    await sleep(25);
  }
}

/** The health check's command as an exec runs it (`CMD` argv, or `CMD-SHELL` through /bin/sh). */
function healthCommand(tests: string[]): string[] | undefined {
  if (tests[0] === "CMD") return tests.slice(1);
  if (tests[0] === "CMD-SHELL") return ["/bin/sh", "-c", tests.slice(1).join(" ")];
  return undefined;
}

/**
 * Waits until the container is healthy. The deploy runs the container's own health check itself, back to back
 * (an exec each time), rather than waiting for the engine's schedule: the health check's interval can then be
 * long, so an idle env spends next to nothing on it, and a deploy still goes on the moment the check passes.
 */
async function waitHealthy(api: DockerApi, id: string, spec: ContainerSpec): Promise<void> {
  const deadline = Date.now() + spec.waitTimeoutSeconds * 1000;
  const check = healthCommand((spec.create.Healthcheck?.Test as string[] | undefined) ?? []);
  const timeoutMs = Math.max(1000, Math.round((spec.create.Healthcheck?.Timeout ?? 5e9) / 1e6));
  for (;;) {
    const info = await api.request("GET", `/containers/${id}/json`);
    const health = info.State?.Health;
    if (!health) throw new Error(`container ${spec.name}: wait is set but it has no health check`);
    if (health.Status === "healthy") return;
    if (!info.State.Running)
      throw new Error(
        `container ${spec.name} stopped while waiting for it to be healthy (exit ${info.State.ExitCode}); its log:\n${await containerLogs(api, id)}`,
      );
    if (check !== undefined && (await execExitCode(api, id, check, timeoutMs)) === 0) return;
    if (Date.now() > deadline) {
      const last = health.Log?.at(-1)?.Output?.trim() ?? "";
      throw new Error(
        `container ${spec.name}: not healthy after ${spec.waitTimeoutSeconds} s (last check: ${last}); its log:\n${await containerLogs(api, id)}`,
      );
    }
    await sleep(100);
  }
}

/**
 * The spec with each port the inputs leave to the engine pinned to the host port the container had before
 * (when it had one), so recreating a container keeps its published addresses.
 */
function keepingPorts(
  spec: ContainerSpec,
  before: { internal: number; external?: number; protocol?: string }[] | undefined,
): ContainerSpec {
  const bindings = spec.create.HostConfig.PortBindings as
    Record<string, { HostIp: string; HostPort: string }[]> | undefined;
  if (!bindings || !before) return spec;
  for (const old of before) {
    const binding = bindings[`${old.internal}/${old.protocol ?? "tcp"}`]?.[0];
    if (binding && binding.HostPort === "" && old.external) binding.HostPort = String(old.external);
  }
  return spec;
}

/** Creates, connects, starts and (with `wait`) waits for a container; removes it again when any step fails. */
async function run(api: DockerApi, spec: ContainerSpec, inputs: Record<string, any>): Promise<Record<string, any>> {
  let created: { Id: string };
  try {
    created = await api.request("POST", `/containers/create?name=${encodeURIComponent(spec.name)}`, spec.create);
  } catch (error) {
    if ((error as { status?: number }).status === 409) {
      throw new Error(
        `container ${spec.name}: a container of that name already exists on ${api.where} (a leftover, or another stack's); remove it with \`docker rm -f ${spec.name}\``,
        { cause: error },
      );
    }
    throw error;
  }
  try {
    for (const n of spec.extraNetworks) {
      const ipam = n.ipv4Address ? { IPv4Address: n.ipv4Address } : undefined;
      await api.request("POST", `/networks/${encodeURIComponent(n.name)}/connect`, {
        Container: created.Id,
        EndpointConfig: { Aliases: n.aliases, IPAMConfig: ipam },
      });
    }
    await api.request("POST", `/containers/${created.Id}/start`);
    const started = await api.request("GET", `/containers/${created.Id}/json`);
    if (!started.State.Running)
      throw new Error(
        `container ${spec.name} is not running after start (exit ${started.State.ExitCode}); its log:\n${await containerLogs(api, created.Id)}`,
      );
    if (spec.wait) await waitHealthy(api, created.Id, spec);
    const info = await api.request("GET", `/containers/${created.Id}/json`);
    return { ...pick(inputs, CONTAINER_INPUT_KEYS), ...observed(info, inputs) };
  } catch (error) {
    // A container that failed to come up is not left behind under its fixed name.
    await api.request("DELETE", `/containers/${created.Id}?force=1`).catch(() => undefined);
    throw error;
  }
}

/** Stops (with the grace the inputs give) and removes a container; one that is already gone is fine. */
async function remove(api: DockerApi, nameOrId: string, props: Record<string, any>): Promise<void> {
  const grace = typeof props.destroyGraceSeconds === "number" ? props.destroyGraceSeconds : 2;
  await api.request("POST", `/containers/${encodeURIComponent(nameOrId)}/stop?t=${grace}`).catch((e) => {
    if (!isNotFound(e) && (e as { status?: number }).status !== 304) throw e;
  });
  await api.request("DELETE", `/containers/${encodeURIComponent(nameOrId)}?force=1`).catch((e) => {
    if (!isNotFound(e)) throw e;
  });
}

async function withEngine<T>(engine: EngineTarget, work: (api: DockerApi) => Promise<T>): Promise<T> {
  const api = dockerApi(engine);
  try {
    return await work(api);
  } finally {
    api.close();
  }
}

export const container: Operations = {
  async check(_olds, news) {
    try {
      containerSpec(news);
    } catch (error) {
      if (error instanceof ContainerInputError)
        return { inputs: news, failures: [{ property: "", reason: error.message }] };
      throw error;
    }
    return { inputs: news };
  },
  async diff(_id, olds, news) {
    return diffInputs(olds, news, CONTAINER_INPUT_KEYS, { replaceOn: ["name", "engine"], deleteFirst: true });
  },
  async create(inputs) {
    const spec = containerSpec(inputs);
    return { id: spec.name, outs: await withEngine(inputs.engine, (api) => run(api, spec, inputs)) };
  },
  async update(id, olds, news) {
    const spec = keepingPorts(containerSpec(news), olds.publishedPorts);
    return {
      outs: await withEngine(news.engine, async (api) => {
        await remove(api, olds.containerId ?? id, olds);
        return run(api, spec, news);
      }),
    };
  },
  async read(id, props) {
    return withEngine(props.engine, async (api) => {
      try {
        const info = await api.request("GET", `/containers/${encodeURIComponent(id)}/json`);
        return { id, props: { ...props, ...observed(info, props) } };
      } catch (error) {
        if (isNotFound(error)) return {};
        throw error;
      }
    });
  },
  async delete(id, props) {
    await withEngine(props.engine, (api) => remove(api, props.containerId ?? id, props));
  },
};
