// The gateway's entry point: a bad or missing config exits 2 with one line naming the problem.
import { describe, expect, it } from "vitest";
import { parseGatewayConfig } from "../../src/gateway/config";
import { runGatewayExpectingExit, TOKEN } from "./helpers";

const good = { listen: { host: "127.0.0.1", port: 0 }, sites: { shop: { server: "http://shop-server:8000" } } };

describe("gateway config", () => {
  it.each([
    ["missing", undefined, /^multienv-gateway: MULTIENV_GATEWAY_CONFIG: missing/],
    ["not JSON", "{nope", /^multienv-gateway: MULTIENV_GATEWAY_CONFIG: not JSON/],
    ["a bad server URL", JSON.stringify({ ...good, sites: { shop: { server: "ftp://x" } } }), /^multienv-gateway: MULTIENV_GATEWAY_CONFIG\.sites\.shop\.server: expected an http:\/\/ URL/],
    ["a live site with a frontend", JSON.stringify({ ...good, sites: { gh: { server: "http://a", frontend: "http://b", live: true } } }), /MULTIENV_GATEWAY_CONFIG\.sites\.gh\.frontend: a live site has no frontend/],
    ["an unknown key", JSON.stringify({ ...good, capturedir: "/x" }), /MULTIENV_GATEWAY_CONFIG: .*capturedir/],
    ["a bad port", JSON.stringify({ ...good, listen: { port: 70000 } }), /MULTIENV_GATEWAY_CONFIG\.listen\.port: /],
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
    expect(result.stderr.trim()).toBe("multienv-gateway: MULTIENV_CONTROL_TOKEN: missing; set it to the deploy's control token");
  });

  it("defaults the connect timeout to 10 s and the idle timeout to 60 s", () => {
    const config = parseGatewayConfig(JSON.stringify(good));
    expect(config.connectTimeoutMs).toBe(10_000);
    expect(config.idleTimeoutMs).toBe(60_000);
    expect(config.sites.shop.live).toBe(false);
  });
});
