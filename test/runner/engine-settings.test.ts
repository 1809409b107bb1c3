// The engine settings the runner gives every operation it starts, and the user's own taking their place.
import { describe, expect, it } from "vitest";
import { engineSettings } from "../../src/runner/stack/workspace";

describe("engineSettings", () => {
  it("runs more steps at once than the CLI's 4 per core, and diffs in parallel", () => {
    const settings = engineSettings({});
    expect(Number(settings.PULUMI_PARALLEL)).toBeGreaterThan(8);
    expect(settings.PULUMI_PARALLEL_DIFF).toBe("true");
  });

  it("leaves out what the user's environment sets, so the CLI reads the user's value", () => {
    expect(engineSettings({ PULUMI_PARALLEL: "1" })).toEqual({ PULUMI_PARALLEL_DIFF: "true" });
  });
});
