// A headful computer in the stack file: planned as asked (headless by default), written into its browser's config
// for the launcher, and refused in one line where its browser is not the project's image.
import { describe, expect, it } from "vitest";
import { parseBrowserConfig } from "../../src/browser/config";
import { browserServiceConfig, formatProblem, plan } from "../../src/plan";
import { stackConfig } from "./fixtures";

const websites = { shop: { domains: ["shop.test"] } };

describe("computers.<c>.headful", () => {
  it("is planned as asked, headless by default, and reaches the launcher's config only when headful", () => {
    const result = plan(
      stackConfig({
        websites,
        computers: { desk: { network: "none", headful: true }, plain: { network: "none" } },
      }),
      { stack: "demo" },
    );
    if (!result.ok) throw new Error(result.problems.map(formatProblem).join("\n"));
    const byName = Object.fromEntries(result.plan.computers.map((c) => [c.name, c]));
    expect(byName.desk.headful).toBe(true);
    expect(byName.plain.headful).toBe(false);
    expect(parseBrowserConfig(JSON.stringify(browserServiceConfig(result.plan, "desk"))).headful).toBe(true);
    // A headless computer's config is as it was: its container is not replaced by an update that adds the field.
    expect(browserServiceConfig(result.plan, "plain")).not.toHaveProperty("headful");
    expect(parseBrowserConfig(JSON.stringify(browserServiceConfig(result.plan, "plain"))).headful).toBe(false);
  });

  it("is refused in one line, naming the field and the fix, on a computer that runs its own image", () => {
    const result = plan(
      stackConfig({ websites, computers: { desk: { network: "none", image: "my/browser:1", headful: true } } }),
      { stack: "demo" },
    );
    expect(result.ok).toBe(false);
    expect(result.ok ? [] : result.problems.map(formatProblem)).toEqual([
      `multienv:computers.desk.headful: needs the project's browser image, which runs Chromium on a display of Xvfb, and computer desk runs its own (image: "my/browser:1"); remove image, or headful`,
    ]);
    // Its own image, headless: nothing to refuse.
    expect(
      plan(stackConfig({ websites, computers: { desk: { network: "none", image: "my/browser:1" } } }), {
        stack: "demo",
      }).ok,
    ).toBe(true);
  });

  it("is a boolean: anything else is one line naming it", () => {
    expect(() => stackConfig({ computers: { desk: { network: "none", headful: "yes" } } })).toThrow(/headful/);
  });
});
