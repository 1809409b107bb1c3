// The resources the components declare for Docker engines and local steps. They are Pulumi dynamic resources:
// the engine runs their operations (operations.ts) in the Node.js dynamic-provider host, so a deploy needs no
// provider plugin beyond Pulumi's own Node.js runtime, and what the tests deploy is what users deploy.
//
// A dynamic resource carries its provider as code in its `__provider` input, which the host loads as a module
// whose `handler()` returns the provider. Pulumi's own dynamic.Resource writes that code by serializing a
// closure, which loads the TypeScript compiler into every program run (most of a second); here it is written
// out: a loader of operations.ts (relative to the project directory, where Pulumi runs both the program and the
// host) that names its kind, and nothing else, so the operations can change without a diff.
import path from "node:path";
import * as pulumi from "@pulumi/pulumi";
import type { EngineTarget } from "./docker-api";
import type { SshEndpoint } from "../plan/ssh";
import type { Kind } from "./operations";
import type { SelfTestCheck } from "../plan/self-test";
import type { SelfTestResults } from "../protocol/outputs";
import { RESOURCE_TYPES } from "./types";

const OPERATIONS_MODULE = path.relative(process.cwd(), path.join(__dirname, "operations.ts"));

/** The input a dynamic resource's provider code travels in, as the dynamic-provider host reads it. */
const PROVIDER_INPUT = "__provider";

/** The provider module of one kind, as the dynamic-provider host loads it. */
export function providerSource(kind: Kind, operationsModule = OPERATIONS_MODULE): string {
  return `exports.handler = function () {
  var kind = ${JSON.stringify(kind)};
  function operations() {
    require("tsx/cjs");
    return require(require("path").resolve(${JSON.stringify(operationsModule)})).OPERATIONS[kind];
  }
  return {
    check: function (olds, news) { var o = operations(); return o.check ? o.check(olds, news) : Promise.resolve({ inputs: news }); },
    diff: function (id, olds, news) { return operations().diff(id, olds, news); },
    create: function (inputs) { return operations().create(inputs); },
    read: function (id, props) { var o = operations(); return o.read ? o.read(id, props) : Promise.resolve({ id: id, props: props }); },
    update: function (id, olds, news) { return operations().update(id, olds, news); },
    delete: function (id, props) { var o = operations(); return o.delete ? o.delete(id, props) : Promise.resolve(); },
  };
};
`;
}

const SOURCES = Object.fromEntries(
  (Object.keys(RESOURCE_TYPES) as Kind[]).map((kind) => [kind, providerSource(kind)]),
) as Record<Kind, string>;

abstract class DynamicResource extends pulumi.CustomResource {
  constructor(kind: Kind, name: string, props: Record<string, unknown>, opts?: pulumi.CustomResourceOptions) {
    super(RESOURCE_TYPES[kind], name, { ...props, [PROVIDER_INPUT]: SOURCES[kind] }, opts);
  }
}

type Label = { label: string; value: string };

export interface DockerNetworkArgs {
  /** The engine the network is on. */
  engine: pulumi.Input<EngineTarget>;
  /** Its Docker name. */
  name: pulumi.Input<string>;
  /** No route out of the engine. */
  internal?: pulumi.Input<boolean>;
  driver?: pulumi.Input<string>;
  labels?: pulumi.Input<Label[]>;
}

export class DockerNetwork extends DynamicResource {
  declare readonly name: pulumi.Output<string>;
  /** The subnets the engine gave it. */
  declare readonly subnets: pulumi.Output<string[]>;
  constructor(name: string, args: DockerNetworkArgs, opts?: pulumi.CustomResourceOptions) {
    super("network", name, { ...args, subnets: undefined }, opts);
  }
}

export interface DockerVolumeArgs {
  engine: pulumi.Input<EngineTarget>;
  name: pulumi.Input<string>;
  labels?: pulumi.Input<Label[]>;
}

export class DockerVolume extends DynamicResource {
  declare readonly name: pulumi.Output<string>;
  constructor(name: string, args: DockerVolumeArgs, opts?: pulumi.CustomResourceOptions) {
    super("volume", name, { ...args }, opts);
  }
}

export interface DockerImageArgs {
  engine: pulumi.Input<EngineTarget>;
  /** The tag the built image gets. */
  imageName: pulumi.Input<string>;
  /** The directory the context's files are read from. */
  context: pulumi.Input<string>;
  /** The Dockerfile, relative to `context`. */
  dockerfile: pulumi.Input<string>;
  /** The other files the Dockerfile copies, relative to `context`: the whole build context. */
  files: pulumi.Input<string[]>;
  buildArgs?: pulumi.Input<Record<string, string>>;
  labels?: pulumi.Input<Record<string, string>>;
}

/** An image built on an engine; rebuilt when the context's files change. */
export class DockerImage extends DynamicResource {
  declare readonly imageName: pulumi.Output<string>;
  /** The built image's id: containers run this, so a rebuild replaces them. */
  declare readonly imageId: pulumi.Output<string>;
  constructor(name: string, args: DockerImageArgs, opts?: pulumi.CustomResourceOptions) {
    super("image", name, { ...args, imageId: undefined, contextDigest: undefined }, opts);
  }
}

export interface DockerImageRefArgs {
  engine: pulumi.Input<EngineTarget>;
  /** The image reference, e.g. `multienv/sample-shop-server` or `registry.example.com/site:1.2`. */
  name: pulumi.Input<string>;
}

/** An image given by reference: the engine's own, or pulled when the engine has none. */
export class DockerImageRef extends DynamicResource {
  /** The id of the image the engine has under that reference. */
  declare readonly imageId: pulumi.Output<string>;
  constructor(name: string, args: DockerImageRefArgs, opts?: pulumi.CustomResourceOptions) {
    super("imageRef", name, { ...args, imageId: undefined, engineImageId: undefined }, opts);
  }
}

/** @pulumi/docker's Container inputs that the multi env uses (see docker-container.ts for their meaning). */
export interface DockerContainerArgs {
  engine: pulumi.Input<EngineTarget>;
  name: pulumi.Input<string>;
  image: pulumi.Input<string>;
  entrypoints?: pulumi.Input<pulumi.Input<string>[]>;
  command?: pulumi.Input<pulumi.Input<string>[]>;
  envs?: pulumi.Input<pulumi.Input<string>[]>;
  labels?: pulumi.Input<pulumi.Input<Label>[]>;
  ports?: pulumi.Input<pulumi.Input<{ internal: number; external?: number; ip?: string; protocol?: string }>[]>;
  networkMode?: pulumi.Input<string>;
  networksAdvanced?: pulumi.Input<
    pulumi.Input<{ name: pulumi.Input<string>; aliases?: string[]; ipv4Address?: string }>[]
  >;
  mounts?: pulumi.Input<
    pulumi.Input<{ type: string; source?: pulumi.Input<string>; target: string; readOnly?: boolean }>[]
  >;
  capabilities?: pulumi.Input<{ adds?: string[]; drops?: string[] }>;
  restart?: pulumi.Input<string>;
  shmSize?: pulumi.Input<number>;
  healthcheck?: pulumi.Input<{
    tests: string[];
    interval?: string;
    timeout?: string;
    startPeriod?: string;
    retries?: number;
  }>;
  wait?: pulumi.Input<boolean>;
  waitTimeout?: pulumi.Input<number>;
  destroyGraceSeconds?: pulumi.Input<number>;
}

/** A container; its id is its Docker name (see docker-container.ts for what a change does). */
export class DockerContainer extends DynamicResource {
  declare readonly name: pulumi.Output<string>;
  /** The engine's id of the running container: new whenever the container is recreated. */
  declare readonly containerId: pulumi.Output<string>;
  /** The `ports` as the engine bound them (`external` is the host port it chose). */
  declare readonly publishedPorts: pulumi.Output<
    { internal: number; external?: number; ip?: string; protocol: string }[]
  >;
  declare readonly networkDatas: pulumi.Output<{ networkName: string; ipAddress: string; gateway: string }[]>;
  constructor(name: string, args: DockerContainerArgs, opts?: pulumi.CustomResourceOptions) {
    super(
      "container",
      name,
      { ...args, containerId: undefined, publishedPorts: undefined, networkDatas: undefined },
      opts,
    );
  }
}

export interface LocalCommandArgs {
  /** Run with /bin/sh -c on create (and when an input that replaces the resource changes). */
  create: pulumi.Input<string>;
  /** Run when an input that does not replace the resource changes. */
  update?: pulumi.Input<string>;
  /** Run on delete, with the same environment. */
  delete?: pulumi.Input<string>;
  environment?: pulumi.Input<Record<string, pulumi.Input<string>>>;
  dir?: pulumi.Input<string>;
  /** Values whose change re-runs `create`. */
  triggers?: pulumi.Input<unknown[]>;
}

/** A shell command run where Pulumi runs: on create, and its delete step on delete. */
export class LocalCommand extends DynamicResource {
  declare readonly stdout: pulumi.Output<string>;
  declare readonly stderr: pulumi.Output<string>;
  constructor(name: string, args: LocalCommandArgs, opts?: pulumi.CustomResourceOptions) {
    super("command", name, { ...args, stdout: undefined, stderr: undefined }, opts);
  }
}

/** An SSH host key pair (ed25519), made once: the VM presents it, the runner pins its public half. */
export class SshHostKey extends DynamicResource {
  /** `ssh-ed25519 AAAA... comment`. */
  declare readonly publicKey: pulumi.Output<string>;
  /** The OpenSSH private key file's text; a secret. */
  declare readonly privateKey: pulumi.Output<string>;
  constructor(name: string, args: { comment: string }, opts?: pulumi.CustomResourceOptions) {
    super(
      "sshHostKey",
      name,
      { comment: args.comment, publicKey: undefined, privateKey: undefined },
      { ...opts, additionalSecretOutputs: ["privateKey", ...(opts?.additionalSecretOutputs ?? [])] },
    );
  }
}

/** The runner's SSH tunnel to a gateway published on a remote host's loopback (tunnel.ts). */
export class GatewayTunnel extends DynamicResource {
  /** The local port: the gateway is at http://127.0.0.1:<localPort>. */
  declare readonly localPort: pulumi.Output<number>;
  constructor(
    name: string,
    args: { ssh: pulumi.Input<SshEndpoint>; remotePort: number },
    opts?: pulumi.CustomResourceOptions,
  ) {
    super("gatewayTunnel", name, { ...args, localPort: undefined }, opts);
  }
}

/** Random bytes (hex), made once; the value is a secret. */
export class RandomSecret extends DynamicResource {
  declare readonly value: pulumi.Output<string>;
  constructor(name: string, args: { bytes?: number }, opts?: pulumi.CustomResourceOptions) {
    super(
      "secret",
      name,
      { bytes: args.bytes ?? 32, value: undefined },
      { ...opts, additionalSecretOutputs: ["value", ...(opts?.additionalSecretOutputs ?? [])] },
    );
  }
}

export interface SelfTestArgs {
  /** The gateway as the runner reaches it. */
  gatewayUrl: pulumi.Input<string>;
  /** The env's control token (a secret). */
  controlToken: pulumi.Input<string>;
  /** Computer -> the checks its browser runs (src/plan/self-test.ts). */
  checks: pulumi.Input<Record<string, SelfTestCheck[]>>;
  /** Computer -> its start tabs, checked against the names the sites' cards declare. */
  startTabs: pulumi.Input<Record<string, string[]>>;
  /** The engine ids of the containers under test: one recreated runs the self-test again. */
  deployed: pulumi.Input<pulumi.Input<string>[]>;
}

/** The deploy's self-test (self-test.ts): created once the env is up; a failed check fails the deploy. */
export class SelfTest extends DynamicResource {
  declare readonly results: pulumi.Output<SelfTestResults>;
  constructor(name: string, args: SelfTestArgs, opts?: pulumi.CustomResourceOptions) {
    super(
      "selfTest",
      name,
      { ...args, results: undefined },
      { ...opts, additionalSecretOutputs: ["controlToken", ...(opts?.additionalSecretOutputs ?? [])] },
    );
  }
}
