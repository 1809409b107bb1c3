import { describe, expect, it } from "vitest";
import { configPath, formatProblem } from "../../src/plan/problems";

describe("problem paths and lines", () => {
  it("joins keys with dots and indexes in brackets", () => {
    expect(configPath(["websites", "github", "domains", 1])).toBe("websites.github.domains[1]");
    expect(configPath(["computers", "desk", "startTabs", 0])).toBe("computers.desk.startTabs[0]");
  });

  it("quotes a key that is not a plain identifier, so the path stays unambiguous", () => {
    expect(configPath(["websites", "my site", "domains"])).toBe('websites["my site"].domains');
    expect(configPath(["websites", "a.b"])).toBe('websites["a.b"]');
  });

  it("prints one line per problem under the multienv namespace", () => {
    expect(formatProblem({ path: "websites.github.domains[1]", message: '"140.82.112.3" is an address' })).toBe(
      'multienv:websites.github.domains[1]: "140.82.112.3" is an address',
    );
    expect(formatProblem({ path: "", message: "cannot read x" })).toBe("multienv: cannot read x");
  });
});
