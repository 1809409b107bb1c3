// The route, decided once per request or tunnel (src/site-proxy/request-route.ts): a tunnel's name alone decides where
// its streams go, and the computer's control token never goes on as a credential to the next hop, whichever that is.
import * as http2 from "node:http2";
import { describe, expect, it } from "vitest";
import { secretTokens } from "../../src/protocol/auth";
import { readH2Request } from "../../src/site-proxy/h2";
import { Routes, type SyntheticTunnel } from "../../src/site-proxy/request-route";
import { createRouter } from "../../src/site-proxy/routing";

const TOKEN = "route-test-control-token-0123456789abcdef";
const router = createRouter({ shop: ["shop.test"], bank: ["bank.test"] }, ["live.example"], ["live.example"]);
const routes = new Routes(router, new URL("http://gateway.internal:8080/"), secretTokens([TOKEN]));

/** A stream's request as nghttp2 hands it to the proxy: pseudo-headers first, then the rest, in order. */
function stream(authority: string, path: string, headers: [string, string][] = []) {
  const raw = [":method", "GET", ":scheme", "https", ":authority", authority, ":path", path, ...headers.flat()];
  const parsed: http2.IncomingHttpHeaders = {};
  for (let i = 0; i < raw.length; i += 2) parsed[raw[i]] = raw[i + 1];
  return readH2Request(parsed, raw, http2.constants.NGHTTP2_FLAG_END_STREAM);
}

const shopTunnel: SyntheticTunnel = { site: "shop", host: "shop.test", port: 443, proto: "https" };
const liveTunnel: SyntheticTunnel = { site: undefined, host: "live.example", port: 443, proto: "https" };

describe("the route of a CONNECT", () => {
  it("terminates a synthetic name and a recorded live host, tunnels a reached host, refuses the rest", () => {
    expect(routes.forConnect({ host: "shop.test", port: 443 })).toEqual({ to: "terminate", site: "shop" });
    expect(routes.forConnect({ host: "live.example", port: 443 })).toEqual({ to: "terminate", site: undefined });
    const refused = routes.forConnect({ host: "elsewhere.example", port: 443 });
    expect(refused).toMatchObject({ to: "answer", failure: { status: 403, line: { event: "refused" } } });
  });
});

describe("the route of an HTTP/2 stream inside a tunnel", () => {
  it("is the tunnel's own site: another synthetic site's name on the same connection is misdirected", () => {
    const route = routes.forStream(stream("bank.test", "/transfer"), shopTunnel, {}, "127.0.0.1");
    expect(route).toMatchObject({
      to: "answer",
      failure: { status: 421, line: { event: "refused", host: "bank.test" } },
    });
    expect(routes.forStream(stream("shop.test", "/cart"), shopTunnel, {}, "127.0.0.1")).toMatchObject({
      to: "gateway",
      destination: { host: "gateway.internal", port: 8080, path: "/website/shop/cart" },
    });
  });

  it.each([
    ["a synthetic site's", shopTunnel, "shop.test"],
    ["a recorded live host's", liveTunnel, "live.example"],
  ])("never carries the control token as a credential on to %s next hop", (_, tunnel, authority) => {
    for (const credential of [`Bearer ${TOKEN}`, `Basic ${Buffer.from(`x:${TOKEN}`).toString("base64")}`]) {
      const route = routes.forStream(stream(authority, "/", [["authorization", credential]]), tunnel, {}, "127.0.0.1");
      if (route.to === "answer") throw new Error(`refused: ${route.failure.message}`);
      expect(route.destination.headers.join("\n"), credential).not.toContain(credential);
    }
    const own = routes.forStream(stream(authority, "/", [["authorization", "Bearer the-site-own"]]), tunnel, {}, "");
    expect(own.to !== "answer" && own.destination.headers).toContain("Bearer the-site-own");
  });
});
