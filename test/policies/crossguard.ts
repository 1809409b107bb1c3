// Drives the real policy pack the way the Pulumi engine does: runs policies/index.ts as its own process
// (what `pulumi up --policy-pack policies` starts), reads the port it prints, and calls its Analyzer gRPC
// service on loopback with resources serialized as the engine sends them (secrets as Pulumi's secret marker).
import { spawn, type ChildProcess } from "node:child_process";
import * as path from "node:path";
import * as grpc from "@grpc/grpc-js";
import { Struct } from "google-protobuf/google/protobuf/struct_pb";
import { Empty } from "google-protobuf/google/protobuf/empty_pb";
import { AnalyzerClient } from "@pulumi/pulumi/proto/analyzer_grpc_pb";
import * as analyzer from "@pulumi/pulumi/proto/analyzer_pb";
import type { Graph } from "../../policies/evaluate";
import { TYPES } from "../../policies/model";

export const POLICIES_DIR = path.resolve(__dirname, "../../policies");

export interface EngineResource {
  type: string;
  name: string;
  urn?: string;
  /** Properties as the engine holds them; secrets as Pulumi's secret marker objects. */
  props: Record<string, unknown>;
  additionalSecretOutputs?: string[];
  parent?: string;
}

export interface Diagnostic {
  policy: string;
  urn: string;
  message: string;
  enforcementLevel: number;
}

export interface PolicyInfo {
  name: string;
  description: string;
  enforcementLevel: number;
}

export const MANDATORY = analyzer.EnforcementLevel.MANDATORY;

/**
 * A graph as the engine would hand it to the pack: the root Stack resource (its properties are the outputs),
 * then each resource with its properties, options and parent URN.
 */
export function engineResourcesOf(graph: Graph): EngineResource[] {
  const urnByTypeAndName = new Map(graph.resources.map((r) => [`${r.type}|${r.name}`, urnOf({ ...r, props: {} })]));
  return [
    { type: TYPES.stack, name: "multienv-stack", props: (graph.outputs ?? {}) as Record<string, unknown> },
    ...graph.resources.map((r) => ({
      type: r.type,
      name: r.name,
      urn: r.urn,
      props: r.inputs,
      additionalSecretOutputs: r.additionalSecretOutputs,
      parent: r.parentType !== undefined ? urnByTypeAndName.get(`${r.parentType}|${r.parent}`) : undefined,
    })),
  ];
}

export function urnOf(resource: EngineResource): string {
  return resource.urn ?? `urn:pulumi:test::multienv::${resource.type}::${resource.name}`;
}

function options(resource: EngineResource): analyzer.AnalyzerResourceOptions {
  const opts = new analyzer.AnalyzerResourceOptions();
  opts.setAdditionalsecretoutputsList(resource.additionalSecretOutputs ?? []);
  if (resource.parent) opts.setParent(resource.parent);
  return opts;
}

function diagnostics(response: analyzer.AnalyzeResponse): Diagnostic[] {
  return response.getDiagnosticsList().map((d) => ({
    policy: d.getPolicyname(),
    urn: d.getUrn(),
    message: d.getMessage(),
    enforcementLevel: d.getEnforcementlevel(),
  }));
}

function call<Req, Res>(
  fn: (req: Req, cb: (err: grpc.ServiceError | null, res: Res) => void) => unknown,
  req: Req,
): Promise<Res> {
  return new Promise((resolve, reject) => fn(req, (err, res) => (err ? reject(err) : resolve(res))));
}

export class RunningPack {
  private constructor(
    private readonly child: ChildProcess,
    private readonly client: AnalyzerClient,
  ) {}

  /**
   * Starts the pack as the Pulumi CLI does: @pulumi/pulumi's run-policy-pack in the pack's directory, which
   * compiles policies/index.ts (package.json `main`) with ts-node. The engine address it is given is unused
   * by a policy pack (it serves, the engine connects).
   */
  static async start(): Promise<RunningPack> {
    const launcher = require.resolve("@pulumi/pulumi/cmd/run-policy-pack");
    const child = spawn(process.execPath, [launcher, "127.0.0.1:0", "."], {
      cwd: POLICIES_DIR,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stderr = "";
    child.stderr!.on("data", (chunk) => (stderr += chunk));
    const port = await new Promise<number>((resolve, reject) => {
      let out = "";
      child.stdout!.on("data", (chunk) => {
        out += chunk;
        const line = /^(\d+)\s*$/m.exec(out);
        if (line) resolve(Number(line[1]));
      });
      child.on("exit", (code) => reject(new Error(`policy pack exited with ${code} before serving: ${stderr.trim()}`)));
    });
    const client = new AnalyzerClient(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
    return new RunningPack(child, client);
  }

  async info(): Promise<{ name: string; version: string; policies: PolicyInfo[] }> {
    const info = await call<Empty, analyzer.AnalyzerInfo>(this.client.getAnalyzerInfo.bind(this.client), new Empty());
    return {
      name: info.getName(),
      version: info.getVersion(),
      policies: info.getPoliciesList().map((p) => ({
        name: p.getName(),
        description: p.getDescription(),
        enforcementLevel: p.getEnforcementlevel(),
      })),
    };
  }

  /** `analyze`: one resource's inputs, as the engine sends them before creating or updating it. */
  async analyze(resource: EngineResource): Promise<Diagnostic[]> {
    const req = new analyzer.AnalyzeRequest();
    req.setType(resource.type);
    req.setName(resource.name);
    req.setUrn(urnOf(resource));
    req.setProperties(Struct.fromJavaScript(resource.props as Record<string, any>));
    req.setOptions(options(resource));
    return diagnostics(await call(this.client.analyze.bind(this.client), req));
  }

  /** `analyzeStack`: every resource of the stack (the root Stack resource's properties are the outputs). */
  async analyzeStack(resources: EngineResource[]): Promise<Diagnostic[]> {
    const req = new analyzer.AnalyzeStackRequest();
    req.setResourcesList(
      resources.map((resource) => {
        const r = new analyzer.AnalyzerResource();
        r.setType(resource.type);
        r.setName(resource.name);
        r.setUrn(urnOf(resource));
        r.setProperties(Struct.fromJavaScript(resource.props as Record<string, any>));
        r.setOptions(options(resource));
        if (resource.parent) r.setParent(resource.parent);
        return r;
      }),
    );
    return diagnostics(await call(this.client.analyzeStack.bind(this.client), req));
  }

  /** What the engine reports over a whole deployment: each resource analyzed, then the stack. */
  async analyzeAll(resources: EngineResource[]): Promise<Diagnostic[]> {
    const found: Diagnostic[] = [];
    for (const resource of resources) found.push(...(await this.analyze(resource)));
    found.push(...(await this.analyzeStack(resources)));
    return found;
  }

  stop(): void {
    this.client.close();
    this.child.kill();
  }
}
