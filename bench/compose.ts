// The same containers as a deployed stack, as a docker-compose file: what the benches run beside a deploy, so
// the engine's own tool starts exactly what the Pulumi engine did (images by id, env, networks and aliases,
// network_mode service:<target> for the capture sidecars, capabilities, mounts, ports, health checks, and the
// deploy's order: the gateway beside its sites, the proxies after a healthy gateway, each browser after its proxy).
import YAML from "yaml";
import { engineClient } from "../src/engines/docker";
import { GatewayClient } from "../src/protocol/gateway-client";

const api = engineClient();

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

interface Inspected {
  Name: string;
  Id: string;
  Config: {
    Image: string;
    Env: string[];
    Cmd: string[] | null;
    Entrypoint: string[] | null;
    Labels: Record<string, string>;
    Healthcheck?: { Test: string[]; Interval?: number; Timeout?: number; Retries?: number; StartPeriod?: number };
  };
  HostConfig: {
    NetworkMode: string;
    CapAdd: string[] | null;
    CapDrop: string[] | null;
    ShmSize: number;
    RestartPolicy: { Name: string };
    PortBindings: Record<string, { HostIp: string; HostPort: string }[]> | null;
    Mounts?: { Type: string; Source: string; Target: string; ReadOnly: boolean }[];
  };
  NetworkSettings: { Networks: Record<string, { Aliases: string[] | null }> };
}

const seconds = (ns?: number) => (ns ? `${ns / 1e9}s` : undefined);

/** A value compose takes as written: it interpolates `$name` (the capture sidecars' script has shell variables). */
function literal(value: string): string {
  return value.replace(/\$/g, "$$$$");
}

/** The compose file of the stack's containers, read back from the engine. */
export async function composeFileOf(stack: string): Promise<string> {
  const list = await api.listContainers({ filters: { label: [`multienv.stack=${stack}`] } });
  const containers = await Promise.all(
    list.map((c) => api.getContainer(c.Id).inspect() as unknown as Promise<Inspected>),
  );
  const serviceOf = new Map(containers.map((c) => [c.Id, c.Name.slice(1)]));
  const networks: Record<string, { internal: boolean; name: string }> = {};
  const volumes: Record<string, { name: string }> = {};
  const services: Record<string, unknown> = {};
  for (const c of containers) {
    const name = c.Name.slice(1);
    const role = c.Config.Labels["multienv.role"];
    const mode = c.HostConfig.NetworkMode;
    const service: Record<string, unknown> = {
      image: c.Config.Image,
      container_name: name,
      environment: c.Config.Env.map(literal),
      ...(c.Config.Entrypoint ? { entrypoint: c.Config.Entrypoint.map(literal) } : {}),
      ...(c.Config.Cmd ? { command: c.Config.Cmd.map(literal) } : {}),
      cap_add: c.HostConfig.CapAdd ?? [],
      cap_drop: c.HostConfig.CapDrop ?? [],
      restart: c.HostConfig.RestartPolicy.Name || "no",
      labels: { "multienv.role": role ?? "" },
      ...(c.HostConfig.ShmSize ? { shm_size: c.HostConfig.ShmSize } : {}),
    };
    if (mode.startsWith("container:")) {
      service.network_mode = `service:${serviceOf.get(mode.slice("container:".length))}`;
      service.depends_on = [serviceOf.get(mode.slice("container:".length))];
    } else {
      service.networks = Object.fromEntries(
        Object.entries(c.NetworkSettings.Networks).map(([network, n]) => {
          const info = networks[network];
          if (!info) networks[network] = { internal: false, name: network };
          return [network, { aliases: (n.Aliases ?? []).filter((a) => !c.Id.startsWith(a)) }];
        }),
      );
    }
    const ports = Object.entries(c.HostConfig.PortBindings ?? {}).map(
      ([port, [binding]]) => `${binding.HostIp}::${port.split("/")[0]}`,
    );
    if (ports.length) service.ports = ports;
    const mounts = (c.HostConfig.Mounts ?? []).filter((m) => m.Type === "volume");
    if (mounts.length) {
      service.volumes = mounts.map((m) => `${m.Source}:${m.Target}${m.ReadOnly ? ":ro" : ""}`);
      for (const m of mounts) volumes[m.Source] = { name: m.Source };
    }
    const hc = c.Config.Healthcheck;
    if (hc?.Test)
      service.healthcheck = {
        test: hc.Test.map(literal),
        interval: seconds(hc.Interval),
        timeout: seconds(hc.Timeout),
        retries: hc.Retries,
        start_period: seconds(hc.StartPeriod),
      };
    services[name] = service;
  }
  for (const network of Object.keys(networks))
    networks[network].internal = (await api.getNetwork(network).inspect()).Internal === true;
  // The deploy's order: the gateway beside its sites and captures (its health check's start period covers their
  // start, so compose waits for it rather than giving up on it), each proxy after a healthy gateway, each browser
  // after its proxy.
  const byRole = (role: string) =>
    containers.filter((c) => c.Config.Labels["multienv.role"] === role).map((c) => c.Name.slice(1));
  const gateway = byRole("gateway")[0];
  for (const proxy of byRole("site-proxy"))
    (services[proxy] as Record<string, unknown>).depends_on = { [gateway]: { condition: "service_healthy" } };
  for (const browser of byRole("browser")) {
    const computer = containers.find((c) => c.Name.slice(1) === browser)!.Config.Labels["multienv.computer"];
    (services[browser] as Record<string, unknown>).depends_on = byRole("site-proxy").filter((p) =>
      p.endsWith(`-${computer}-proxy`),
    );
  }
  return YAML.stringify({ version: "2.4", services, networks, volumes });
}

/** Polls the gateway's /healthz on its published port, as the deploy's wait runs the gateway's health check. */
export async function gatewayHealthy(name: string, timeoutMs = 120_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const info = await api
      .getContainer(name)
      .inspect()
      .catch(() => undefined);
    const port = info?.NetworkSettings?.Ports?.["8080/tcp"]?.[0]?.HostPort;
    if (
      port &&
      (await new GatewayClient(`http://127.0.0.1:${port}`, "").health().then(
        (health) => health.ok,
        () => false,
      ))
    )
      return;
    if (Date.now() > deadline) throw new Error(`${name} not healthy after ${timeoutMs / 1000} s`);
    await sleep(100);
  }
}

/** Closes the engine connections the helpers hold. */
export function closeComposeApi(): void {
  (api.modem as { agent?: { destroy(): void } }).agent?.destroy();
}
