// Runs the real program under Pulumi's mocks (src/runner/check/graph.ts) for a config given as plain data.
import { MockMonitor } from "@pulumi/pulumi/runtime/mocks";
import { renderGraph, type Graph, type GraphResource } from "../../src/runner/check/graph";

// @pulumi/docker's type tokens, as the state holds them (spelt out here, not read from src/protocol/resource-types.ts).
export const CONTAINER = "docker:index/container:Container";
export const NETWORK = "docker:index/network:Network";
export const VOLUME = "docker:index/volume:Volume";
export const IMAGE = "docker:index/remoteImage:RemoteImage";
export const DOCKER_PROVIDER = "pulumi:providers:docker";

/** Ids of the project's images, for components built outside the program (which reads them from the engine). */
export const PROJECT_IMAGE_IDS = {
  gateway: "sha256:gateway",
  "site-proxy": "sha256:site-proxy",
  browser: "sha256:browser",
  "replay-server": "sha256:replay-server",
};

/** Pulumi's string form of config values: structured values as JSON. */
export function rawConfig(
  config: Record<string, unknown>,
  secrets: Record<string, string> = {},
): { config: Record<string, string>; secretKeys: string[] } {
  const raw: Record<string, string> = {};
  for (const [key, value] of Object.entries(config))
    raw[`multienv:${key}`] = typeof value === "string" ? value : JSON.stringify(value);
  for (const [key, value] of Object.entries(secrets)) raw[`multienv:${key}`] = value;
  return { config: raw, secretKeys: Object.keys(secrets).map((k) => `multienv:${k}`) };
}

export async function graphOf(
  stack: string,
  config: Record<string, unknown>,
  secrets: Record<string, string> = {},
  revealSecrets = false,
): Promise<Graph> {
  return renderGraph({ stack, ...rawConfig(config, secrets), revealSecrets });
}

/**
 * The dependencies each registration names (dependsOn, expanded to a component's resources, and its inputs'
 * resources), which src/runner/check/graph.ts does not record: read off the mock monitor's requests, by URN, from
 * the call on until `stop()`.
 */
export function recordDependencies(): { dependencies: Map<string, string[]>; stop(): void } {
  const dependencies = new Map<string, string[]>();
  const original = MockMonitor.prototype.registerResource;
  MockMonitor.prototype.registerResource = function (this: any, req: any, callback: any) {
    dependencies.set(this.newUrn(req.getParent(), req.getType(), req.getName()), req.getDependenciesList());
    return original.call(this, req, callback);
  };
  return { dependencies, stop: () => (MockMonitor.prototype.registerResource = original) };
}

export function resource(graph: Graph, type: string, name: string): GraphResource {
  const found = graph.resources.find((r) => r.type === type && r.name === name);
  if (!found)
    throw new Error(
      `no ${type} ${name} in the graph; have: ${graph.resources.map((r) => `${r.type} ${r.name}`).join("\n")}`,
    );
  return found;
}

export function containers(graph: Graph): GraphResource[] {
  return graph.resources.filter((r) => r.type === CONTAINER);
}

/** A container's inputs by its Docker name. */
export function container(graph: Graph, name: string): Record<string, any> {
  return resource(graph, CONTAINER, name).inputs as Record<string, any>;
}

/** The docker resources of the graph: containers, networks, volumes and images. */
export function dockerResources(graph: Graph): GraphResource[] {
  return graph.resources.filter((r) => r.type.startsWith("docker:"));
}

/** The docker.Provider a resource is created with: the engine it is on. */
export function dockerProviderOf(graph: Graph, r: GraphResource): GraphResource {
  if (r.provider === undefined) throw new Error(`${r.type} ${r.name} names no provider`);
  return resource(graph, DOCKER_PROVIDER, r.provider);
}

/** Where a docker resource's engine is: its provider's `host` and `sshOpts` (the SDK sends the list as JSON). */
export function engineOf(graph: Graph, r: GraphResource): { host?: string; sshOpts?: string[] } {
  const inputs = dockerProviderOf(graph, r).inputs;
  return {
    ...(inputs.host === undefined ? {} : { host: inputs.host as string }),
    ...(inputs.sshOpts === undefined ? {} : { sshOpts: JSON.parse(inputs.sshOpts as string) as string[] }),
  };
}

/** `-o keyword=value` pairs of sshOpts as a map (each keyword once: ssh takes the first, so a repeat is a bug). */
export function sshOptions(sshOpts: string[]): Record<string, string> {
  const options: Record<string, string> = {};
  for (let i = 0; i < sshOpts.length; i += 2) {
    if (sshOpts[i] !== "-o") throw new Error(`sshOpts[${i}] is ${sshOpts[i]}, not -o`);
    const [keyword, ...value] = sshOpts[i + 1].split("=");
    if (keyword in options) throw new Error(`sshOpts set ${keyword} twice`);
    options[keyword] = value.join("=");
  }
  return options;
}

export function networksOf(inputs: Record<string, any>): string[] {
  return (inputs.networksAdvanced ?? []).map((n: { name: string }) => n.name);
}

export function mountsOf(inputs: Record<string, any>): string[] {
  return (inputs.mounts ?? []).map(
    (m: { source: string; target: string; readOnly?: boolean }) =>
      `${m.source}:${m.target}:${m.readOnly ? "ro" : "rw"}`,
  );
}

/** `NAME=value` entries of a container's env as a map (a revealed secret entry is unwrapped). */
export function envOf(inputs: Record<string, any>): Record<string, string> {
  const envs =
    inputs.envs && typeof inputs.envs === "object" && "[secret]" in inputs.envs ? inputs.envs["[secret]"] : inputs.envs;
  return Object.fromEntries((envs ?? []).map((e: string) => [e.slice(0, e.indexOf("=")), e.slice(e.indexOf("=") + 1)]));
}
