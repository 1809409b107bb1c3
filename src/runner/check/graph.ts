// Runs the multienv program under Pulumi's mocks (no engine, CLI, cloud or Docker) and returns the resource
// graph it would register: each resource's type, name, parent, provider and inputs, plus the stack outputs.
// Secret values are rendered as "[secret]" everywhere. Re-runnable in one process: each run resets the
// runtime's settings (setMocks) and config (setAllConfig) and waits for every registration to finish.
import * as pulumi from "@pulumi/pulumi";
import { multienvProgram } from "../../program";
import { RESOURCE_TYPES } from "../../protocol/resource-types";

/** The input a dynamic resource carries its provider's code in: not an input of the resource itself. */
const DYNAMIC_PROVIDER_INPUT = "__provider";

export const SECRET = "[secret]";
export const UNKNOWN = "[unknown]";

/** The project name of Pulumi.yaml: it is part of every URN. */
const PROJECT = "multienv";
const ROOT_STACK_TYPE = "pulumi:pulumi:Stack";

export interface GraphResource {
  /** Pulumi type token, e.g. `docker:index/container:Container`, `multienv:website:Website`. */
  type: string;
  name: string;
  /** The parent resource's name; undefined for children of the stack itself. */
  parent?: string;
  /** The parent resource's type. */
  parentType?: string;
  urn: string;
  /** True for custom (provider) resources, false for components. */
  custom: boolean;
  /** The name of the explicit provider resource the resource is created with (custom resources only). */
  provider?: string;
  /** The inputs as the provider would receive them, secrets as "[secret]". */
  inputs: Record<string, unknown>;
  /** Outputs the engine is told to keep secret (e.g. the control token's generator stdout). */
  additionalSecretOutputs?: string[];
  /** Inputs whose later changes the engine ignores (the `ignoreChanges` option). */
  ignoreChanges?: string[];
  /** The name of the resource whose deletion deletes this one with it (the `deletedWith` option). */
  deletedWith?: string;
}

export interface Graph {
  resources: GraphResource[];
  /** The stack outputs, secrets as "[secret]". */
  outputs: Record<string, unknown>;
  /** What the program logged with pulumi.log.warn (without an engine it would go to the console). */
  warnings: string[];
}

/** A program error that stopped the run (a RunError's message: one line per problem). */
export class GraphError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "GraphError";
  }
}

export interface GraphOptions {
  /** The stack name (it prefixes every Docker name). */
  stack: string;
  /** `namespace:key` -> value as Pulumi hands config to a program (structured values as JSON). */
  config: Record<string, string>;
  /** Full keys whose values are secrets. */
  secretKeys?: string[];
  /**
   * Tests only: render a secret as `{"[secret]": value}` instead of "[secret]", so a test can check both that a
   * value is secret and what it holds. `check` never sets it.
   */
  revealSecrets?: boolean;
  /** Tests only: another program to run in place of the multienv program (its result is the outputs). */
  program?: () => Promise<unknown>;
}

/**
 * Values the engine computes at deploy time, shown as what they stand for: the gateway's URL carries
 * "<port chosen by Docker>" rather than a made-up number.
 */
function computedState(type: string, name: string, inputs: Record<string, any>): Record<string, unknown> {
  switch (type) {
    case RESOURCE_TYPES.container:
      return {
        ...inputs,
        ports: (inputs.ports ?? []).map((p: Record<string, unknown>) => ({
          ...p,
          external: p.external ?? "<port chosen by Docker>",
        })),
      };
    case RESOURCE_TYPES.network:
      return { ...inputs, ipamConfigs: [{ subnet: `<subnet of ${inputs.name}>` }] };
    case RESOURCE_TYPES.image:
      return { ...inputs, imageId: `<id of ${inputs.name}${inputs.build ? " as built" : ""}>` };
    case RESOURCE_TYPES.command:
      return { ...inputs, stdout: `<stdout of ${name}>` };
    case RESOURCE_TYPES.secret:
      return { ...inputs, value: `<random ${inputs.bytes} bytes>` };
    case "pulumi:pulumi:StackReference":
      // A pool's stack, as its `up` exports it: its accounts are named only.
      return {
        ...inputs,
        outputs: {
          accountNames: [`<accounts of pool ${String(inputs.name).split("/").pop()}>`],
          accounts: {},
          leaseHours: 24,
        },
      };
    case RESOURCE_TYPES.accountLease:
      return { ...inputs, account: `<account leased from pool ${inputs.pool}>`, since: "<now>", until: "<until>" };
    case RESOURCE_TYPES.gatewayTunnel:
      return { ...inputs, localPort: "<local port of the tunnel>" };
    case RESOURCE_TYPES.sshHostKey:
      // A well-formed key line (the program reads it), whose key part names the resource.
      return {
        ...inputs,
        publicKey: `ssh-ed25519 AAAA${Buffer.from(name).toString("base64").replace(/=+$/, "")} ${inputs.comment}`,
        privateKey: `<private key of ${name}>`,
      };
    case "aws:ec2/instance:Instance":
      return { ...inputs, publicIp: `<public IP of ${name}>`, privateIp: `<private IP of ${name}>` };
    case "aws:ec2/keyPair:KeyPair":
      return { ...inputs, keyName: inputs.keyName ?? name };
    default:
      return inputs;
  }
}

/** The registration being made: the mock monitor calls newResource synchronously inside registerResource. */
let registering: Registration | undefined;

const mocks: pulumi.runtime.Mocks = {
  newResource(args) {
    // Reuse the inputs the mock monitor already deserialized for us rather than decoding them a second time.
    if (registering !== undefined) registering.inputs = args.inputs;
    return { id: `${args.name}-id`, state: computedState(args.type, args.name, args.inputs) };
  },
  call(args) {
    if (args.token === "aws:ssm/getParameter:getParameter")
      return { ...args.inputs, value: `<value of SSM parameter ${args.inputs.name}>` };
    if (args.token === "aws:ec2/getSubnet:getSubnet") return { ...args.inputs, vpcId: `<VPC of ${args.inputs.id}>` };
    return args.inputs;
  },
};

/** Replaces secrets by "[secret]" (or `{"[secret]": value}` when revealing) and Pulumi's other markers, recursively. */
export function renderValue(value: unknown, reveal = false): unknown {
  const rpc = pulumi.runtime as unknown as { specialSigKey: string; specialSecretSig: string; unknownValue: string };
  if (value === rpc.unknownValue) return UNKNOWN;
  if (Array.isArray(value)) return value.map((v) => renderValue(v, reveal));
  if (value !== null && typeof value === "object") {
    const record = value as Record<string, unknown>;
    if (record[rpc.specialSigKey] === rpc.specialSecretSig)
      return reveal ? { [SECRET]: renderValue(record.value, reveal) } : SECRET;
    if (rpc.specialSigKey in record) return `[${String(record[rpc.specialSigKey])}]`;
    return Object.fromEntries(Object.entries(record).map(([k, v]) => [k, renderValue(v, reveal)]));
  }
  return value;
}

interface OutputInternals {
  promise(withUnknowns?: boolean): Promise<unknown>;
  isKnown: Promise<boolean>;
  isSecret: Promise<boolean>;
}

/** Resolves a stack output value, rendering secret Outputs as "[secret]". */
async function renderOutput(value: unknown, reveal: boolean): Promise<unknown> {
  if (pulumi.Output.isInstance(value)) {
    const output = value as unknown as OutputInternals;
    const [known, secret] = await Promise.all([output.isKnown, output.isSecret]);
    if (!known) return UNKNOWN;
    if (secret) return reveal ? { [SECRET]: await renderOutput(await output.promise(), reveal) } : SECRET;
    return renderOutput(await output.promise(), reveal);
  }
  if (value instanceof Promise) return renderOutput(await value, reveal);
  if (Array.isArray(value)) return Promise.all(value.map((v) => renderOutput(v, reveal)));
  if (value !== null && typeof value === "object") {
    const entries = await Promise.all(
      Object.entries(value).map(async ([k, v]) => [k, await renderOutput(v, reveal)] as const),
    );
    return Object.fromEntries(entries.filter(([, v]) => v !== undefined));
  }
  return value;
}

interface RegisterRequest {
  getType(): string;
  getName(): string;
  getParent(): string;
  getCustom(): boolean;
  getProvider(): string;
  getObject(): unknown;
  getAdditionalsecretoutputsList(): string[];
  getIgnorechangesList(): string[];
  getDeletedwith(): string;
}

interface MockMonitorInternals {
  registerResource(req: RegisterRequest, callback: (err: unknown, resp: unknown) => void): Promise<void>;
  newUrn(parent: string, type: string, name: string): string;
}

let running = false;

/** Runs the program for one stack under mocks and returns its graph. Throws GraphError when the program refuses. */
export async function renderGraph(options: GraphOptions): Promise<Graph> {
  if (running) throw new Error("renderGraph: one run at a time (the Pulumi runtime's state is global)");
  running = true;
  const runtime = pulumi.runtime as unknown as {
    getMonitor(): MockMonitorInternals;
    waitForRPCs(): Promise<void>;
  };
  const registered: Registration[] = [];
  const failures: unknown[] = [];
  const onRejection = (reason: unknown) => failures.push(reason);
  process.on("unhandledRejection", onRejection);
  // The runtime stamps a stack trace on every promise it tracks (new Error().stack), and with source maps
  // on (tsx) each costs a source-map lookup per frame: most of a large graph's time. Nothing here reads
  // them, so traces are off for the run; errors are reported by message only.
  const stackTraceLimit = Error.stackTraceLimit;
  const prepareStackTrace = Error.prepareStackTrace;
  Error.stackTraceLimit = 0;
  Error.prepareStackTrace = (error: Error) => `${error.name}: ${error.message}`;
  // Without an engine, pulumi.log.warn writes `warning: [runtime] <msg>` to console.warn; keep those as data.
  const warnings: string[] = [];
  const consoleWarn = console.warn;
  console.warn = (...args: unknown[]) => {
    const line = args.map(String).join(" ");
    const match = /^warning: \[runtime\] ([\s\S]*)$/.exec(line);
    if (match) warnings.push(match[1]);
    else consoleWarn(...args);
  };
  try {
    pulumi.runtime.setAllConfig(options.config, options.secretKeys ?? []);
    await pulumi.runtime.setMocks(mocks, PROJECT, options.stack, false, "organization");
    const monitor = runtime.getMonitor();
    const register = monitor.registerResource.bind(monitor);
    monitor.registerResource = (req, callback) => {
      const parentUrn = req.getParent();
      const registration: Registration = {
        type: req.getType(),
        name: req.getName(),
        parentUrn,
        urn: monitor.newUrn(parentUrn, req.getType(), req.getName()),
        custom: req.getCustom(),
        providerRef: req.getProvider(),
        inputs: {},
        additionalSecretOutputs: req.getAdditionalsecretoutputsList(),
        ignoreChanges: req.getIgnorechangesList(),
        deletedWith: req.getDeletedwith(),
      };
      registered.push(registration);
      registering = registration;
      try {
        return register(req, callback);
      } finally {
        registering = undefined;
      }
    };

    // The program's own outputs object is rendered (not the stack resource's copy) so secrets stay secrets.
    let programOutputs: unknown;
    try {
      await pulumi.runtime.runInPulumiStack(async () => {
        programOutputs = await (
          options.program ??
          (() => multienvProgram({ writeRecordingContexts: false, probeEngine: false, waitForAccounts: false }))
        )();
        return {};
      });
      await runtime.waitForRPCs();
    } catch (error) {
      // The stack resource's own copy of the failure rejects a few ticks later; let it land in our handler.
      await runtime.waitForRPCs().catch(() => undefined);
      for (let tick = 0; tick < 3; tick++) await new Promise((done) => setImmediate(done));
      throw new GraphError(error instanceof Error ? error.message : String(error));
    }
    if (failures.length > 0) {
      const first = failures[0];
      throw new GraphError(first instanceof Error ? first.message : String(first));
    }
    // The engine refuses two resources of one URN (same type chain and name); say so here, before any deploy.
    const seen = new Set<string>();
    for (const { urn } of registered) {
      if (seen.has(urn))
        throw new GraphError(`two resources have the URN ${urn}; give each component instance its own name`);
      seen.add(urn);
    }
    const outputs = (await renderOutput(programOutputs, options.revealSecrets === true)) as Record<string, unknown>;
    return { resources: toGraphResources(registered, options.revealSecrets === true), outputs, warnings };
  } finally {
    process.off("unhandledRejection", onRejection);
    console.warn = consoleWarn;
    Error.stackTraceLimit = stackTraceLimit;
    Error.prepareStackTrace = prepareStackTrace;
    running = false;
  }
}

interface Registration {
  type: string;
  name: string;
  parentUrn: string;
  urn: string;
  custom: boolean;
  providerRef: string;
  inputs: Record<string, unknown>;
  additionalSecretOutputs: string[];
  ignoreChanges: string[];
  deletedWith: string;
}

function withoutProviderCode(inputs: Record<string, unknown>): Record<string, unknown> {
  if (!(DYNAMIC_PROVIDER_INPUT in inputs)) return inputs;
  const { [DYNAMIC_PROVIDER_INPUT]: _code, ...rest } = inputs;
  return rest;
}

function toGraphResources(registered: Registration[], reveal: boolean): GraphResource[] {
  const byUrn = new Map(registered.map((r) => [r.urn, r]));
  return registered
    .filter((r) => r.type !== ROOT_STACK_TYPE)
    .map((r) => {
      const parent = byUrn.get(r.parentUrn);
      const providerUrn = r.providerRef ? r.providerRef.split("::").slice(0, -1).join("::") : "";
      const provider = providerUrn ? byUrn.get(providerUrn) : undefined;
      const resource: GraphResource = {
        type: r.type,
        name: r.name,
        urn: r.urn,
        custom: r.custom,
        inputs: renderValue(withoutProviderCode(r.inputs), reveal) as Record<string, unknown>,
      };
      if (parent && parent.type !== ROOT_STACK_TYPE) {
        resource.parent = parent.name;
        resource.parentType = parent.type;
      }
      if (provider) resource.provider = provider.name;
      if (r.additionalSecretOutputs.length > 0) resource.additionalSecretOutputs = [...r.additionalSecretOutputs];
      if (r.ignoreChanges.length > 0) resource.ignoreChanges = [...r.ignoreChanges];
      const deletedWith = r.deletedWith ? byUrn.get(r.deletedWith) : undefined;
      if (deletedWith) resource.deletedWith = deletedWith.name;
      return resource;
    });
}
