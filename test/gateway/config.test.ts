// The gateway's entry point: a bad or missing config exits 2 with one line naming the problem.
import { describe, expect, it } from "vitest";
import { resolveBindings, resolveHost } from "../../src/gateway/bind";
import { parseGatewayConfig } from "../../src/gateway/config";
import { ServiceConfigError } from "../../src/protocol/service-config";
import { runGatewayExpectingExit, TOKEN } from "./helpers";

const good = { listen: { host: "127.0.0.1", port: 0 }, sites: { shop: { server: "http://shop-server:8000" } } };

describe("gateway config", () => {
  it.each([
    ["missing", undefined, /^multienv-gateway: MULTIENV_GATEWAY_CONFIG: is not set/],
    ["not JSON", "{nope", /^multienv-gateway: MULTIENV_GATEWAY_CONFIG: is not JSON/],
    [
      "a bad server URL",
      JSON.stringify({ ...good, sites: { shop: { server: "ftp://x" } } }),
      /^multienv-gateway: MULTIENV_GATEWAY_CONFIG\.sites\.shop\.server: expected an http:\/\/ URL/,
    ],
    [
      "a live site with a frontend",
      JSON.stringify({ ...good, sites: { gh: { server: "http://a", frontend: "http://b", live: true } } }),
      /MULTIENV_GATEWAY_CONFIG\.sites\.gh\.frontend: a live site has no frontend/,
    ],
    [
      "an unknown key",
      JSON.stringify({ ...good, capturedir: "/x" }),
      /MULTIENV_GATEWAY_CONFIG\.capturedir: unknown key; did you mean capturesDir\?/,
    ],
    ["a bad port", JSON.stringify({ ...good, listen: { port: 70000 } }), /MULTIENV_GATEWAY_CONFIG\.listen\.port: /],
    [
      "a browse listener without hosts",
      JSON.stringify({ ...good, browse: { hosts: [], port: 8081 } }),
      /MULTIENV_GATEWAY_CONFIG\.browse\.hosts: at least one host/,
    ],
    [
      "a browse host listed twice",
      JSON.stringify({ ...good, browse: { hosts: ["a", "a"], port: 8081 } }),
      /MULTIENV_GATEWAY_CONFIG\.browse\.hosts: a host listed twice/,
    ],
    [
      "a listen host that is no name",
      JSON.stringify({ ...good, listen: { host: "gw/x", port: 0 } }),
      /MULTIENV_GATEWAY_CONFIG\.listen\.host: a host name or an IP address/,
    ],
  ])("exits 2 on %s, with one line naming the field", async (_what, config, expected) => {
    const result = await runGatewayExpectingExit({ MULTIENV_GATEWAY_CONFIG: config, MULTIENV_CONTROL_TOKEN: TOKEN });
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(expected);
    expect(result.stderr.trim().split("\n")).toHaveLength(1);
    expect(result.stdout).toBe("");
  });

  it("exits 2 when the control token is missing", async () => {
    const result = await runGatewayExpectingExit({ MULTIENV_GATEWAY_CONFIG: JSON.stringify(good) });
    expect(result.code).toBe(2);
    expect(result.stderr.trim()).toBe(
      "multienv-gateway: MULTIENV_CONTROL_TOKEN: is not set; set it to the deploy's control token (at least 32 characters: letters, digits and - . _ ~ + /)",
    );
  });

  it.each([
    ["empty", "", "is not set"],
    ["all whitespace", " ".repeat(40), "is blank"],
    ["mostly whitespace", `  ${"k".repeat(6)}${" ".repeat(30)}`, "holds characters other than"],
    ["short", "0123456789abcdef", "is shorter than 32 characters"],
  ])(
    "exits 2 when the control token is %s, with one line naming MULTIENV_CONTROL_TOKEN",
    async (_what, token, problem) => {
      const result = await runGatewayExpectingExit({
        MULTIENV_GATEWAY_CONFIG: JSON.stringify(good),
        MULTIENV_CONTROL_TOKEN: token,
      });
      expect(result.code).toBe(2);
      expect(result.stderr.trim().split("\n")).toHaveLength(1);
      expect(result.stderr).toMatch(new RegExp(`^multienv-gateway: MULTIENV_CONTROL_TOKEN: ${problem}`));
      expect(result.stderr).not.toContain("k".repeat(6)); // the value itself is never printed
      expect(result.stdout).toBe("");
    },
  );

  it("resolves a listener's host name at start, retrying while the name does not resolve yet", async () => {
    let calls = 0;
    const lookup = async (host: string) => {
      if (++calls < 3) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: "ENOTFOUND" });
      return ["10.1.2.3", "10.1.2.3"];
    };
    expect(await resolveHost("MULTIENV_GATEWAY_CONFIG.listen.host", "gateway-ingress", 5_000, lookup)).toEqual([
      "10.1.2.3",
    ]);
    expect(calls).toBe(3);
    expect(await resolveHost("field", "127.0.0.1", 5_000, lookup)).toEqual(["127.0.0.1"]); // an address is not looked up
    expect(calls).toBe(3);
  });

  it("fails with one line naming the field when a host name never resolves", async () => {
    const never = async () => {
      throw Object.assign(new Error("nope"), { code: "ENOTFOUND" });
    };
    const config = parseGatewayConfig(
      JSON.stringify({ ...good, browse: { hosts: ["127.0.0.1", "gateway-agent"], port: 0 }, resolveTimeoutMs: 600 }),
    );
    const started = Date.now();
    const error = await resolveBindings(config, async (host) =>
      host === "gateway-agent" ? never() : ["127.0.0.1"],
    ).catch((e: Error) => e);
    expect(error).toBeInstanceOf(ServiceConfigError);
    expect((error as Error).message).toBe(
      'MULTIENV_GATEWAY_CONFIG.browse.hosts.1: cannot resolve "gateway-agent" (ENOTFOUND) after 600 ms; use a name that resolves inside the gateway, or an address',
    );
    expect(Date.now() - started).toBeGreaterThanOrEqual(300);
  });

  it("defaults the connect timeout to 10 s and the idle timeout to 60 s", () => {
    const config = parseGatewayConfig(JSON.stringify(good));
    expect(config.connectTimeoutMs).toBe(10_000);
    expect(config.idleTimeoutMs).toBe(60_000);
    expect(config.sites.shop.live).toBe(false);
    expect(config.headersTimeoutMs).toBe(20_000);
    expect(config.browse).toBeUndefined();
  });
});
