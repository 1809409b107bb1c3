// A stack file's config as the spec of another stack: what the e2e tier and the benchmarks deploy the demo with; and
// the target a stack file or spec names, read without the CLI.
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { specFromStackFile } from "../../src/runner";
import { configuredTarget } from "../../src/runner/stack/workspace";

const DEMO = path.join(__dirname, "../../stacks/Pulumi.demo.yaml");

describe("specFromStackFile", () => {
  it("takes the file's keys as it writes them, under the new name, overrides on top", () => {
    const spec = specFromStackFile(DEMO, "bench-1", { "multienv:selfTest": false });
    expect(spec.name).toBe("bench-1");
    expect(spec.config["multienv:target"]).toBe("docker");
    expect(Object.keys(spec.config["multienv:websites"] as object).sort()).toEqual(["gist", "github", "shop"]);
    expect(spec.config["multienv:selfTest"]).toBe(false);
  });

  it("fails naming the file when it is not there", () => {
    expect(() => specFromStackFile("/nonexistent/Pulumi.x.yaml", "x")).toThrow("/nonexistent/Pulumi.x.yaml");
  });
});

describe("configuredTarget", () => {
  const REPO = path.join(__dirname, "../..");

  it("reads the target off the stack file, as the CLI would, or off a spec, bare key or namespaced", () => {
    expect(configuredTarget(undefined, REPO, "demo")).toBe("docker");
    expect(configuredTarget(undefined, REPO, "demo-kubernetes")).toBe("kubernetes");
    expect(configuredTarget({ name: "s", config: { target: "kubernetes" } }, REPO, "s")).toBe("kubernetes");
    expect(configuredTarget({ name: "s", config: { "multienv:target": "ssh" } }, REPO, "s")).toBe("ssh");
  });

  it("names none for a stack without one, or a file that is missing or not YAML; a bare key is the namespace's", () => {
    expect(configuredTarget({ name: "s", config: {} }, REPO, "s")).toBeUndefined();
    expect(configuredTarget(undefined, REPO, "no-such-stack")).toBeUndefined();
    const dir = mkdtempSync(path.join(tmpdir(), "multienv-target-"));
    mkdirSync(path.join(dir, "stacks"));
    writeFileSync(path.join(dir, "stacks", "Pulumi.broken.yaml"), "config: [unclosed\n");
    expect(configuredTarget(undefined, dir, "broken")).toBeUndefined();
    // A bare key is the project's namespace to the CLI, and here too.
    writeFileSync(path.join(dir, "stacks", "Pulumi.bare.yaml"), "config:\n  target: kubernetes\n");
    expect(configuredTarget(undefined, dir, "bare")).toBe("kubernetes");
  });
});
