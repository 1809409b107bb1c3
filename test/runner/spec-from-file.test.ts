// A stack file's config as the spec of another stack: what the e2e tier and the benchmarks deploy the demo with.
import path from "node:path";
import { describe, expect, it } from "vitest";
import { specFromStackFile } from "../../src/runner";

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
