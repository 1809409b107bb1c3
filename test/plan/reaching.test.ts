import { describe, expect, it } from "vitest";
import { formatProblem } from "../../src/plan/problems";
import { allowlistProblems, reachesPublicHosts, reaching } from "../../src/plan/reaching";

const live = ["*.github.com", "github.com"];

describe("reaching", () => {
  it("allow-all stays as it is", () => {
    expect(reaching("allow-all", live)).toBe("allow-all");
  });

  it("an allowlist gets the live hosts added, once each, after its own names", () => {
    expect(reaching(["pypi.org", "github.com"], live)).toEqual(["pypi.org", "github.com", "*.github.com"]);
  });

  it("an allowlist with no live hosts is itself", () => {
    expect(reaching(["pypi.org"], [])).toEqual(["pypi.org"]);
  });

  it("none reaches only synthetic sites, even with live sites in the env", () => {
    expect(reaching("none", live)).toBe("none");
  });

  it("an empty allowlist reaches the live hosts", () => {
    expect(reaching([], live)).toEqual(live);
  });
});

describe("reachesPublicHosts", () => {
  it("is true for allow-all and for a non-empty list", () => {
    expect(reachesPublicHosts("allow-all")).toBe(true);
    expect(reachesPublicHosts(["pypi.org"])).toBe(true);
  });
  it("is false for none and an empty list", () => {
    expect(reachesPublicHosts("none")).toBe(false);
    expect(reachesPublicHosts([])).toBe(false);
  });
});

describe("allowlist entries", () => {
  it("accept host names and wildcards", () => {
    expect(allowlistProblems("desk", ["pypi.org", "*.pythonhosted.org"])).toEqual([]);
    expect(allowlistProblems("desk", "allow-all")).toEqual([]);
  });

  it("refuse addresses, localhost names and bad names, naming each", () => {
    expect(allowlistProblems("desk", ["10.0.0.1", "localhost", "pypi.org/simple"]).map(formatProblem)).toEqual([
      `multienv:computers.desk.network[0]: "10.0.0.1" is an address; an allowlist holds host names (use network: allow-all to reach addresses)`,
      `multienv:computers.desk.network[1]: "localhost" is a localhost name, which the browser reaches without its proxy; remove it`,
      `multienv:computers.desk.network[2]: "pypi.org/simple" is not a host name (write only the name, without scheme, port or path)`,
    ]);
  });
});

describe("an allowlist's mistakes", () => {
  it('points ["*"] at allow-all, and gives a Unicode name its punycode form', () => {
    expect(allowlistProblems("desk", ["*", "müller.example"]).map(formatProblem)).toEqual([
      'multienv:computers.desk.network[0]: "*" would mean every host: write network: allow-all instead of an allowlist',
      'multienv:computers.desk.network[1]: "müller.example" has the label "müller"; labels are letters, digits and inner hyphens; a host name is written in ASCII: its punycode form is xn--mller-kva.example',
    ]);
  });
});
