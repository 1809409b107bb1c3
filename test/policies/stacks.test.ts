// The whole pack over the graph of every stack in stacks/, rendered by the real program under Pulumi's mocks
// (src/runner/check/graph.ts): every one must pass, through runPolicies (what `multienv check` runs) and through the
// running CrossGuard pack (what `pulumi up --policy-pack policies` runs). Then deliberately broken graphs, each
// caught by the policy named for it and by no other.
import { readdirSync } from "node:fs";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runPolicies } from "../../policies/evaluate";
import { TYPES } from "../../policies/model";
import { readStackFile } from "../../src/config";
import { checkStack } from "../../src/runner/check/check";
import { renderGraph, type Graph } from "../../src/runner/check/graph";
import { engineResourcesOf, RunningPack } from "./crossguard";

const STACKS_DIR = path.resolve(__dirname, "../../stacks");
const STACK_FILES = readdirSync(STACKS_DIR).filter((f) => /^Pulumi\..+\.ya?ml$/.test(f));

const graphs = new Map<string, Graph>();
let pack: RunningPack;

beforeAll(async () => {
  pack = await RunningPack.start();
  // One render at a time: the Pulumi runtime's state is global.
  for (const file of STACK_FILES) {
    const stack = readStackFile(path.join(STACKS_DIR, file));
    graphs.set(
      stack.stack,
      await renderGraph({ stack: stack.stack, config: stack.rawConfig, secretKeys: stack.secretKeys }),
    );
  }
});
afterAll(() => pack?.stop());

function graph(stack: string): Graph {
  const found = graphs.get(stack);
  if (found === undefined) throw new Error(`stacks/ has no stack ${stack}`);
  return structuredClone(found);
}

/** The container named `name` (components share names with their containers, so the type matters). */
function container(g: Graph, name: string) {
  const found = g.resources.find((r) => r.type === TYPES.container && r.name === name);
  if (found === undefined) throw new Error(`the graph has no container ${name}`);
  return found;
}

const policiesOf = (violations: { policy: string }[]) => [...new Set(violations.map((v) => v.policy))];

describe("every stack in stacks/", () => {
  it("has stacks to check: a docker one and an ec2 one", () => {
    expect([...graphs.keys()].sort()).toEqual(expect.arrayContaining(["demo", "github-live"]));
  });

  it.each(STACK_FILES)("%s passes the whole pack under mocks", (file) => {
    const stack = file.replace(/^Pulumi\.|\.ya?ml$/g, "");
    expect(runPolicies(graph(stack))).toEqual([]);
  });

  it.each(STACK_FILES)("%s passes the running CrossGuard pack", async (file) => {
    const stack = file.replace(/^Pulumi\.|\.ya?ml$/g, "");
    expect(await pack.analyzeAll(engineResourcesOf(graph(stack)))).toEqual([]);
  });

  it("multienv check runs the pack: a stack that passes it is ok", async () => {
    const result = await checkStack("demo", { projectDir: path.resolve(__dirname, "../..") });
    expect(result.problems).toEqual([]);
    expect(result.ok).toBe(true);
  });
});

describe("broken graphs are caught by the policy named for them", () => {
  it("a capture sidecar missing", async () => {
    const g = graph("demo");
    g.resources = g.resources.filter((r) => r.name !== "demo-shop-server-capture");
    const found = runPolicies(g);
    expect(policiesOf(found)).toEqual(["capture-sidecar-per-website"]);
    expect(found.map((v) => v.message)).toContainEqual(
      expect.stringMatching(/"demo-shop-server" has no capture sidecar/),
    );
    expect(policiesOf(await pack.analyzeAll(engineResourcesOf(g)))).toEqual(["capture-sidecar-per-website"]);
  });

  it("a website container mounting the captures volume", async () => {
    const g = graph("demo");
    const server = container(g, "demo-shop-server");
    server.inputs.mounts = [{ type: "volume", source: "demo-captures", target: "/captures", readOnly: true }];
    const found = runPolicies(g);
    expect(policiesOf(found)).toEqual(["captures-volume-access"]);
    expect(found[0].message).toMatch(/"demo-shop-server" \(role server\) mounts the captures volume "demo-captures"/);
    expect(policiesOf(await pack.analyzeAll(engineResourcesOf(g)))).toEqual(["captures-volume-access"]);
  });

  it("an SSH rule open to the world", async () => {
    const g = graph("github-live");
    const ssh = g.resources.find((r) => r.type === TYPES.ingressRule && r.inputs.fromPort === 22);
    expect(ssh).toBeDefined();
    ssh!.inputs.cidrIpv4 = "0.0.0.0/0";
    const found = runPolicies(g);
    expect(policiesOf(found)).toEqual(["ec2-ingress-closed-to-world"]);
    expect(found[0].message).toMatch(/opens SSH \(22\) to 0.0.0.0\/0/);
    expect(policiesOf(await pack.analyzeAll(engineResourcesOf(g)))).toEqual(["ec2-ingress-closed-to-world"]);
  });

  it("a plaintext token", () => {
    const g = graph("demo");
    const gateway = container(g, "demo-gateway");
    gateway.inputs.envs = ["MULTIENV_GATEWAY_CONFIG={}", "MULTIENV_CONTROL_TOKEN=3f1c0ffee3f1c0ffee3f1c0ffee"];
    g.outputs.controlToken = "3f1c0ffee3f1c0ffee3f1c0ffee";
    const found = runPolicies(g);
    expect(policiesOf(found)).toEqual(["secrets-stay-secret"]);
    expect(found.map((v) => v.message)).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/"demo-gateway" sets MULTIENV_CONTROL_TOKEN in plaintext/),
        expect.stringMatching(/controlToken output is plaintext/),
      ]),
    );
  });

  it("a secret setting turned into plaintext on the way (the stack's secret config shows as [secret] under check)", () => {
    const g = graph("github-live");
    const server = container(g, "github-live-github-server");
    expect(server.inputs.envs).toBe("[secret]");
    server.inputs.envs = ['AGENTENV_WEBSITE_SETTINGS={"account":"alex","token":"[secret]"}'];
    expect(policiesOf(runPolicies(g))).toEqual(["secrets-stay-secret"]);
  });
});
