import { describe, expect, it } from "vitest";
import {
  covers,
  domainPatternProblem,
  hostNameProblem,
  isAddress,
  isDomainPattern,
  isHostName,
  isLocalhostName,
  isWildcard,
  overlaps,
  resourceNameProblem,
} from "../../src/protocol/host-names";

describe("host names", () => {
  it.each(["shop.test", "github.com", "a-b.c-d.example", "x", "xn--bcher-kva.example", "a1.b2"])(
    "accepts %s",
    (name) => {
      expect(hostNameProblem(name)).toBeUndefined();
      expect(isHostName(name)).toBe(true);
    },
  );

  it.each([
    ["", /empty/],
    ["Shop.test", /upper case.*"shop.test"/],
    ["shop.test.", /ends with a dot/],
    ["a..b", /empty label/],
    [".a.b", /empty label/],
    ["-a.b", /label "-a"/],
    ["a-.b", /label "a-"/],
    ["a_b.c", /label "a_b"/],
    ["https://shop.test", /without scheme/],
    ["shop.test:8080", /without scheme, port/],
    ["shop.test/x", /without scheme/],
    ["a.*.b", /leading/],
    [`${"a".repeat(64)}.test`, /longer than 63/],
    [`${"a.".repeat(127)}ab`, /longer than 253/],
    ["foo.123", /numeric label/],
  ])("refuses %j", (name, message) => {
    expect(hostNameProblem(name)).toMatch(message);
    expect(isHostName(name)).toBe(false);
  });
});

describe("wildcards", () => {
  it("knows a wildcard by its leading *.", () => {
    expect(isWildcard("*.github.com")).toBe(true);
    expect(isWildcard("github.com")).toBe(false);
  });

  it("accepts *.suffix and host names as domain patterns", () => {
    expect(isDomainPattern("*.github.com")).toBe(true);
    expect(isDomainPattern("*.test")).toBe(true);
    expect(isDomainPattern("github.com")).toBe(true);
  });

  it.each([
    ["*", /bare "\*"/],
    ["*.", /suffix is empty/],
    ["**.a.b", /leading/],
    ["*a.b", /leading/],
    ["a.*", /leading/],
    ["*.*.b", /suffix has a \*/],
    ["*.Shop.test", /suffix has upper case/],
  ])("refuses %j", (pattern, message) => {
    expect(domainPatternProblem(pattern)).toMatch(message);
  });
});

describe("isAddress", () => {
  it.each(["140.82.112.3", "127.0.0.1", "::1", "[::1]", "2001:db8::1", "127.1", "0x7f.0.0.1", "10.1"])(
    "%s is an address",
    (host) => {
      expect(isAddress(host)).toBe(true);
    },
  );
  it.each(["github.com", "a.b.c.d", "abc", "1.2.3.4.example", "cafe.example", "face"])("%s is not", (host) => {
    expect(isAddress(host)).toBe(false);
  });
});

describe("isLocalhostName", () => {
  it.each(["localhost", "LOCALHOST", "localhost.", "app.localhost", "*.localhost", "a.b.localhost"])(
    "%s is a localhost name",
    (host) => {
      expect(isLocalhostName(host)).toBe(true);
    },
  );
  it.each(["localhost.test", "mylocalhost", "notlocalhost.com", "localhostx"])("%s is not", (host) => {
    expect(isLocalhostName(host)).toBe(false);
  });
});

describe("covers", () => {
  it("an exact name covers only itself", () => {
    expect(covers("github.com", "github.com")).toBe(true);
    expect(covers("github.com", "gist.github.com")).toBe(false);
    expect(covers("github.com", "*.github.com")).toBe(false);
  });

  it("*.s covers every name ending in .s at any depth", () => {
    expect(covers("*.github.com", "gist.github.com")).toBe(true);
    expect(covers("*.github.com", "a.b.c.github.com")).toBe(true);
  });

  it("*.s does not cover s itself, nor names that merely end in the same letters", () => {
    expect(covers("*.github.com", "github.com")).toBe(false);
    expect(covers("*.github.com", "notgithub.com")).toBe(false);
    expect(covers("*.github.com", "github.com.evil")).toBe(false);
  });

  it("a wildcard covers the narrower wildcards under it, and itself", () => {
    expect(covers("*.github.com", "*.gist.github.com")).toBe(true);
    expect(covers("*.github.com", "*.github.com")).toBe(true);
    expect(covers("*.gist.github.com", "*.github.com")).toBe(false);
    expect(covers("*.com", "*.github.com")).toBe(true);
  });

  it("overlaps is covers either way", () => {
    expect(overlaps("a.shop.test", "*.shop.test")).toBe(true);
    expect(overlaps("*.shop.test", "a.shop.test")).toBe(true);
    expect(overlaps("shop.test", "*.shop.test")).toBe(false);
  });
});

describe("site and computer names", () => {
  it.each(["shop", "github", "a", "desk-1", "x".repeat(63)])("accepts %s", (name) => {
    expect(resourceNameProblem(name)).toBeUndefined();
  });
  it.each(["", "Shop", "my_site", "my.site", "-a", "a-", "a b", "x".repeat(64)])("refuses %j", (name) => {
    expect(resourceNameProblem(name)).toBeDefined();
  });
});
