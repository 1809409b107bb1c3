// The self-test's start-tab check against the gateway's card, with a gateway on loopback: a site left out of the
// card for a moment (its server still starting) is waited for, and a name no site declares fails naming the sites
// the card has.
import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { checkStartTabs } from "../../src/providers/self-test";
import { GatewayClient } from "../../src/protocol/gateway-client";
import { WEBSITE_V1_URN } from "../../src/protocol/card";

const TOKEN = "self-test-token-0123456789abcdef0123";

function siteCard(domains: string[]): unknown {
  return {
    name: "shop",
    description: "a shop",
    version: "1",
    extensions: [{ uri: WEBSITE_V1_URN, params: { domains } }],
  };
}

let server: http.Server | undefined;
afterEach(() => server?.close());

/** A gateway whose card lists `shop` only from its `withShopFrom`-th answer on. */
async function gateway(withShopFrom: number): Promise<{ url: string; token: string; asked: () => number }> {
  let asked = 0;
  server = http.createServer((req, res) => {
    if (req.url !== "/.well-known/agent-env.json" || req.headers.authorization !== `Bearer ${TOKEN}`) {
      res.writeHead(404).end();
      return;
    }
    asked += 1;
    const sites = asked >= withShopFrom ? { shop: siteCard(["shop.test"]) } : {};
    res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ name: "g", sites }));
  });
  await new Promise<void>((resolve) => server!.listen(0, "127.0.0.1", resolve));
  return { url: `http://127.0.0.1:${(server!.address() as AddressInfo).port}`, token: TOKEN, asked: () => asked };
}

describe("the start-tab check", () => {
  it("waits for a site the gateway's card leaves out for a moment", async () => {
    const g = await gateway(3);
    const results = await checkStartTabs(new GatewayClient(g.url, g.token), { agent: ["https://shop.test/"] }, 4_000);
    expect(results.agent).toEqual([expect.objectContaining({ ok: true, detail: "site shop declares shop.test" })]);
    expect(g.asked()).toBe(3);
  });

  it("fails a tab at a name no site declares, naming the sites the card has", async () => {
    const g = await gateway(1);
    const results = await checkStartTabs(
      new GatewayClient(g.url, g.token),
      { agent: ["https://elsewhere.test/", "about:blank"] },
      500,
    );
    expect(results.agent[0]).toMatchObject({
      ok: false,
      detail:
        "no site's card declares elsewhere.test (the gateway's card has the sites shop; a site whose card did not answer is left out)",
    });
    expect(results.agent[1]).toMatchObject({ ok: true, detail: "not a web page" });
  });
});
