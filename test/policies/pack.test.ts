// The CrossGuard pack as the Pulumi engine sees it: policies/index.ts runs as its own process and answers
// the Analyzer gRPC calls. Checks what only this path shows: the pack loads and constructs, every policy is
// registered mandatory with a how-to-comply description, type filtering works, secrets arrive unwrapped.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as aws from "@pulumi/aws";
import { RESOURCE_TYPES } from "../../src/protocol/resource-types";
import { TYPES } from "../../policies/model";
import { RULES } from "../../policies/rules";
import { engineResourcesOf, MANDATORY, RunningPack } from "./crossguard";
import { aws as awsResource, dockerGraph, ec2Resources, sidecar } from "./fixtures";

const compliant = dockerGraph;

let pack: RunningPack;
beforeAll(async () => {
  pack = await RunningPack.start();
});
afterAll(() => pack?.stop());

describe("the policy pack process", () => {
  it("serves every rule as a mandatory policy whose description says how to comply", async () => {
    const info = await pack.info();
    expect(info.name).toBe("multienv");
    expect(info.policies.map((p) => p.name)).toEqual(RULES.map((r) => r.name));
    for (const policy of info.policies) {
      expect(policy.enforcementLevel).toBe(MANDATORY);
      expect(policy.description).toMatch(/To comply: /);
    }
  });

  it("uses the SDK's own type tokens, and the project's dynamic resources' own", () => {
    expect(TYPES.container).toBe(RESOURCE_TYPES.container);
    expect(TYPES.network).toBe(RESOURCE_TYPES.network);
    expect(TYPES.volume).toBe(RESOURCE_TYPES.volume);
    expect(TYPES.securityGroup).toBe((aws.ec2.SecurityGroup as any).__pulumiType);
    expect(TYPES.securityGroupRule).toBe((aws.ec2.SecurityGroupRule as any).__pulumiType);
    expect(TYPES.ingressRule).toBe((aws.vpc.SecurityGroupIngressRule as any).__pulumiType);
    expect(TYPES.egressRule).toBe((aws.vpc.SecurityGroupEgressRule as any).__pulumiType);
    expect(TYPES.instance).toBe((aws.ec2.Instance as any).__pulumiType);
  });

  it("finds nothing in a compliant docker env or ec2 resources", async () => {
    expect(await pack.analyzeAll(engineResourcesOf(compliant()))).toEqual([]);
    expect(await pack.analyzeAll(engineResourcesOf({ resources: ec2Resources() }))).toEqual([]);
  });

  it("reports a resource violation as mandatory, the description (how to comply) above the finding", async () => {
    const bad = sidecar("shop", "server", { privileged: true });
    const found = await pack.analyze({ type: bad.type, name: bad.name, urn: bad.urn, props: bad.inputs });
    // The engine attaches a resource validation's diagnostic to the resource it asked about: no URN in it.
    expect(found).toEqual([
      {
        policy: "container-privileges",
        urn: "",
        message: expect.stringMatching(/To comply: [^\n]*\n"t-shop-server-capture" is privileged/),
        enforcementLevel: MANDATORY,
      },
    ]);
  });

  it("reports an SSH rule open to the world", async () => {
    const open = awsResource(TYPES.ingressRule, "ssh", {
      ipProtocol: "tcp",
      fromPort: 22,
      toPort: 22,
      cidrIpv4: "0.0.0.0/0",
    });
    const found = await pack.analyze({ type: open.type, name: open.name, props: open.inputs });
    expect(found.map((d) => [d.policy, d.message])).toEqual([
      ["ec2-ingress-closed-to-world", expect.stringMatching(/opens SSH \(22\) to 0.0.0.0\/0/)],
    ]);
  });

  it("reports stack violations against the resource at fault", async () => {
    const graph = compliant();
    graph.resources = graph.resources.filter((r) => r.name !== "t-shop-frontend-capture");
    const found = await pack.analyzeStack(engineResourcesOf(graph));
    expect(found.map((d) => d.policy)).toEqual(["capture-sidecar-per-website", "capture-sidecar-per-website"]);
    expect(found[1].urn).toContain("t-shop-frontend");
  });

  it("judges a preview, where inputs computed from new resources are unknown, without advisories", async () => {
    const UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"; // the engine's unknown string in a preview
    const graph = compliant();
    graph.resources = graph.resources.map((r) =>
      r.name.endsWith("-capture")
        ? { ...r, inputs: { ...r.inputs, networkMode: UNKNOWN } }
        : r.name === "t-gateway"
          ? { ...r, inputs: { ...r.inputs, envs: UNKNOWN } }
          : r,
    );
    expect(await pack.analyzeAll(engineResourcesOf(graph))).toEqual([]);
    // A value that is known is still judged.
    const bad = graph.resources.find((r) => r.name === "t-shop-server-capture")!;
    const found = await pack.analyze({ type: bad.type, name: bad.name, props: { ...bad.inputs, pidMode: "host" } });
    expect(found.map((d) => d.message)).toEqual([expect.stringMatching(/host's PID namespace/)]);
  });

  it('holds the control token\'s generator to additionalSecretOutputs: ["value"] through its parent', async () => {
    const graph = compliant();
    graph.resources = graph.resources.map((r) =>
      r.name === "t-control-token-generator" ? { ...r, additionalSecretOutputs: undefined } : r,
    );
    const found = await pack.analyzeStack(engineResourcesOf(graph));
    expect(found.map((d) => [d.policy, d.message])).toEqual([
      ["secrets-stay-secret", expect.stringMatching(/generates the control token but does not list "value"/)],
    ]);
  });

  it("sees no secret-ness (CrossGuard unwraps secrets), so requires additionalSecretOutputs on containers carrying one", async () => {
    const graph = dockerGraph();
    graph.resources = graph.resources.map((r) =>
      r.type === TYPES.container ? { ...r, additionalSecretOutputs: undefined } : r,
    );
    const found = await pack.analyzeStack(engineResourcesOf(graph));
    expect(found.map((d) => [d.policy, d.message])).toEqual([
      [
        "secrets-stay-secret",
        expect.stringMatching(
          /"t-gateway" carries MULTIENV_CONTROL_TOKEN but does not list "envs" in additionalSecretOutputs/,
        ),
      ],
      [
        "secrets-stay-secret",
        expect.stringMatching(/"t-github-server" carries AGENTENV_WEBSITE_SETTINGS but does not list "envs"/),
      ],
      [
        "secrets-stay-secret",
        expect.stringMatching(/"t-desktop-proxy" carries MULTIENV_SITE_PROXY_TOKEN but does not list "envs"/),
      ],
    ]);
  });
});
