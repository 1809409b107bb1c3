import { describe, expect, it } from "vitest";
import { formatProblem } from "../../src/plan/problems";
import { namingProblems, RESERVED_NAMES, stackNameProblem } from "../../src/plan/reserved";
import { stackConfig } from "./fixtures";

function problemsOf(input: Record<string, unknown>, stack = "demo"): string[] {
  return namingProblems(stackConfig(input), stack).map(formatProblem);
}

describe("site and computer names", () => {
  it("accepts lowercase DNS labels", () => {
    expect(
      problemsOf({
        websites: { shop: { domains: [] }, "my-shop2": { domains: [] } },
        computers: { desk: { network: "none" } },
      }),
    ).toEqual([]);
  });

  it("refuses names that are not lowercase DNS labels", () => {
    expect(problemsOf({ websites: { Shop: { domains: [] } }, computers: { my_desk: { network: "none" } } })).toEqual([
      `multienv:websites.Shop: site name "Shop" must be a lowercase DNS label (a-z, 0-9 and inner hyphens, at most 63 characters), since it becomes container names and URL path segments`,
      `multienv:computers.my_desk: computer name "my_desk" must be a lowercase DNS label (a-z, 0-9 and inner hyphens, at most 63 characters), since it becomes container names and URL path segments`,
    ]);
  });

  it.each(RESERVED_NAMES)("refuses the reserved name %s for a site and a computer", (name) => {
    expect(problemsOf({ websites: { [name]: { domains: [] } } })).toEqual([
      `multienv:websites.${name}: site name "${name}" is reserved for the env's own parts; choose another name`,
    ]);
    expect(problemsOf({ computers: { [name]: { network: "none" } } })).toEqual([
      `multienv:computers.${name}: computer name "${name}" is reserved for the env's own parts; choose another name`,
    ]);
  });

  it.each(["shop-server", "shop-frontend", "shop-capture", "desk-proxy", "desk-browser"])(
    "refuses %s, which ends in a role suffix",
    (name) => {
      expect(problemsOf({ websites: { [name]: { domains: [] } } })[0]).toMatch(
        /ends in "-[a-z]+", which container names use for roles/,
      );
    },
  );

  it("refuses a site name starting with the stack name, whose alias would be another site's container name", () => {
    expect(problemsOf({ websites: { "demo-shop": { domains: [] }, shop: { domains: [] } } })).toEqual([
      `multienv:websites.demo-shop: site name "demo-shop" starts with the stack name "demo-", so its network alias would be another site's container name; choose another name`,
    ]);
    expect(problemsOf({ websites: { "demo-shop": { domains: [] } } }, "prod")).toEqual([]);
  });

  it("refuses a computer and a site sharing a name", () => {
    expect(problemsOf({ websites: { shop: { domains: [] } }, computers: { shop: { network: "none" } } })).toEqual([
      `multienv:computers.shop: computer "shop" has the name of a website; a site and a computer each need their own name`,
    ]);
  });

  it("refuses a name whose container name would not fit in a DNS label", () => {
    const long = "s".repeat(50);
    expect(problemsOf({ websites: { [long]: { domains: [] } } })).toEqual([
      `multienv:websites.${long}: site name "${long}" makes the container name "demo-${long}-frontend", longer than the 63 characters of a DNS label; shorten the site or stack name`,
    ]);
  });
});

describe("stack names", () => {
  it("accept lowercase labels", () => {
    expect(stackNameProblem("demo")).toBeUndefined();
    expect(stackNameProblem("github-live")).toBeUndefined();
  });
  it.each(["Demo", "my_stack", "a.b", "-a", "", "x".repeat(41)])("refuse %j", (stack) => {
    expect(stackNameProblem(stack)).toMatch(/stack name must be lowercase/);
  });
});
