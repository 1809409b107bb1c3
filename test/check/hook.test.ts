// The graph-check hook the policy pack plugs into: every finding fails the check as one problem line.
import { resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { checkStack, GRAPH_CHECKS, type GraphCheck } from "../../src/runner/check/check";

const ROOT = resolve(__dirname, "..", "..");

describe("check's graph checks", () => {
  it("turns each finding into a problem line naming the policy and the resource, and fails the check", async () => {
    const seen: string[] = [];
    const sidecarsMustNotExist: GraphCheck = (graph, context) => {
      seen.push(context.stack);
      return graph.resources
        .filter((r) => r.name.endsWith("-capture") && r.type === "docker:index/container:Container")
        .map((r) => ({ policy: "no-sidecars", resource: r.name, message: "a sidecar exists" }));
    };
    const result = await checkStack("demo", { projectDir: ROOT, checks: [sidecarsMustNotExist] });
    expect(seen).toEqual(["demo"]);
    expect(result.ok).toBe(false);
    expect(result.problems).toContain("policy no-sidecars: demo-shop-server-capture: a sidecar exists");
    expect(result.problems).toHaveLength(5);
    expect(result.resources.length).toBeGreaterThan(0);
  });

  it("runs the policy pack by default, and the demo stack passes it", async () => {
    expect(GRAPH_CHECKS.length).toBeGreaterThan(0);
    const result = await checkStack("demo", { projectDir: ROOT });
    expect(result.problems).toEqual([]);
    expect(result.ok).toBe(true);
  });
});
