// The project's own resources, for what no provider package serves: a shell step where Pulumi runs (the
// command provider cannot be built on this project's machines, so @pulumi/command is not used), a random
// secret (the packages the project uses have none), the deploy's self-test, an SSH host key pair, and the
// runner's SSH tunnel to a remote gateway. Every Docker network, volume, image and container is @pulumi/docker's.
// They are Pulumi dynamic resources: the engine runs their operations (operations.ts) in the Node.js
// dynamic-provider host.
//
// A dynamic resource carries its provider as code in its `__provider` input, which the host loads as a module
// whose `handler()` returns the provider. Pulumi's own dynamic.Resource writes that code by serializing a
// closure, which loads the TypeScript compiler into every program run (most of a second); here it is written
// out: a loader of operations.ts (relative to the project directory, where Pulumi runs both the program and the
// host) that names its kind, and nothing else, so the operations can change without a diff.
import path from "node:path";
import * as pulumi from "@pulumi/pulumi";
import type { SshEndpoint } from "../plan/targets/ssh";
import type { Kind } from "./operations";
import type { SelfTestCheck } from "../plan/types";
import type { SelfTestResults } from "../plan/stack-outputs";
import type { GatewayPortForward } from "../protocol/port-forward";
import { DYNAMIC_KINDS, RESOURCE_TYPES } from "../protocol/resource-types";
import type { CleanupLease } from "./site-cleanup";

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

const SOURCES = Object.fromEntries(DYNAMIC_KINDS.map((kind) => [kind, providerSource(kind)])) as Record<Kind, string>;

abstract class DynamicResource extends pulumi.CustomResource {
  constructor(kind: Kind, name: string, props: Record<string, unknown>, opts?: pulumi.CustomResourceOptions) {
    super(RESOURCE_TYPES[kind], name, { ...props, [PROVIDER_INPUT]: SOURCES[kind] }, opts);
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
  /** The engine ids of the containers (the uids of the pods) under test: one recreated runs the self-test again. */
  deployed: pulumi.Input<pulumi.Input<string>[]>;
  /** Kubernetes: the gateway's pod (`gatewayUrl` names it); each run opens a port-forward to it for its duration. */
  gatewayPortForward?: pulumi.Input<GatewayPortForward>;
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

/** One account of a pool leased to the stack (account-lease.ts): create leases, update extends, delete releases. */
export class AccountLease extends DynamicResource {
  /** The leased account's name. */
  declare readonly account: pulumi.Output<string>;
  /** The lease's own id, made once at create and kept in the state: it alone says the lease is this stack's. */
  declare readonly leaseId: pulumi.Output<string>;
  declare readonly since: pulumi.Output<string>;
  declare readonly until: pulumi.Output<string>;
  /** The pool's store URL (a secret), as the lease was made in it. */
  declare readonly store: pulumi.Output<string | undefined>;
  declare readonly sqliteFile: pulumi.Output<string>;
  declare readonly leaseHours: pulumi.Output<number>;
  constructor(
    name: string,
    args: {
      pool: string;
      holder: string;
      accounts: pulumi.Input<string[]>;
      leaseHours: pulumi.Input<number>;
      signInsPerMinute?: pulumi.Input<number | undefined>;
      store?: pulumi.Input<string | undefined>;
      sqliteFile: string;
      waitSeconds: number;
      requestedAt: string;
    },
    opts?: pulumi.CustomResourceOptions,
  ) {
    super(
      "accountLease",
      name,
      { ...args, account: undefined, leaseId: undefined, since: undefined, until: undefined },
      opts,
    );
  }
}

/** A live site's cleanup at destroy, through the gateway, before its account goes back (site-cleanup.ts). */
export class SiteCleanup extends DynamicResource {
  constructor(
    name: string,
    args: {
      gatewayUrl: pulumi.Input<string>;
      controlToken: pulumi.Input<string>;
      site: string;
      account: pulumi.Input<string>;
      gatewayPortForward?: pulumi.Input<GatewayPortForward>;
      /** The stack's lease of the account: the cleanup runs only while it still holds it. */
      lease?: pulumi.Input<CleanupLease>;
    },
    opts?: pulumi.CustomResourceOptions,
  ) {
    super("siteCleanup", name, args, opts);
  }
}
