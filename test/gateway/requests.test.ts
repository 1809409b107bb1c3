// requests/v1: the gateway serves each computer's request log from the computer's real site proxy (its control
// listener, with the computer's token), behind the control token, declared in the card; and what it serves holds no
// token the gateway knows, even one the proxy could not know to scrub (the control token, another computer's).
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { computerAgentToken, computerControlToken } from "../../src/protocol/auth";
import { parseRequestLog, REQUESTS_V1_URN } from "../../src/protocol/request-log";
import { cleanup, tempDir } from "../helpers/processes";
import { startHttpServer } from "../helpers/servers";
import { curl, startProxy, type ProxyProcess } from "../site-proxy/helpers";
import { request, startGateway, TOKEN, type GatewayProcess } from "./helpers";

let proxy: ProxyProcess;
let gateway: GatewayProcess;
let logDir: string;

beforeAll(async () => {
  const site = await startHttpServer((req) => `page ${req.url}`);
  logDir = `${tempDir()}/requests`;
  proxy = await startProxy(
    {
      gateway: site.url,
      sites: { shop: ["shop.test"] },
      control: { host: "127.0.0.1", port: 0, cdp: "127.0.0.1:9" },
      requestLog: { dir: logDir, computer: "agent" },
    },
    { token: computerControlToken(TOKEN, "agent") },
  );
  const control = `http://127.0.0.1:${proxy.startup.control!.port}`;
  gateway = await startGateway({
    sites: {},
    computers: {
      agent: { cdp: `${control}/cdp`, proxyLog: `${control}/log`, requests: `${control}/requests` },
      other: { cdp: `${control}/cdp` },
    },
  });
});
afterAll(async () => {
  await gateway?.stop();
  await cleanup();
});

describe("gateway requests/v1", () => {
  it("is declared in the card, lists the computers with a request log, and serves one's entries", async () => {
    const card = JSON.parse((await request(`${gateway.url}/.well-known/agent-env.json`)).body);
    expect(card.extensions).toContainEqual(
      expect.objectContaining({
        uri: REQUESTS_V1_URN,
        paths: { list: "/requests/v1/computers", get: "/requests/v1/computers/{computer}" },
      }),
    );
    const listing = JSON.parse((await request(`${gateway.url}/requests/v1/computers`)).body);
    expect(listing).toEqual({ computers: [{ name: "agent", path: "/requests/v1/computers/agent" }] });

    await curl(proxy.url, "http://shop.test/a?x=1");
    const answer = await request(`${gateway.url}/requests/v1/computers/agent`);
    expect(answer.status).toBe(200);
    expect(answer.headers["content-type"]).toBe("application/x-ndjson");
    const entries = parseRequestLog(answer.body);
    expect(entries.map((e) => e.request.url)).toContain("http://shop.test/a?x=1");
    expect(entries.find((e) => e.request.url === "http://shop.test/a?x=1")!.response.content.text).toBe(
      "page /website/shop/a?x=1",
    );
  });

  it("refuses without the control token, and with an agent token", async () => {
    expect((await request(`${gateway.url}/requests/v1/computers/agent`, { control: false })).status).toBe(401);
    const agent = computerAgentToken(TOKEN, "agent");
    const refused = await request(`${gateway.url}/requests/v1/computers/agent`, {
      control: false,
      headers: { authorization: `Bearer ${agent}` },
    });
    expect(refused.status).toBe(401);
    expect((await request(`${gateway.url}/requests/v1/computers`, { control: false })).status).toBe(401);
  });

  it("answers 404 for a computer without a request log, and 400 for a name with a slash in it", async () => {
    expect((await request(`${gateway.url}/requests/v1/computers/other`)).status).toBe(404);
    expect((await request(`${gateway.url}/requests/v1/computers/nobody`)).status).toBe(404);
    expect((await request(`${gateway.url}/requests/v1/computers/a%2Fb`)).status).toBe(400);
  });

  it("keeps out every token the gateway knows, which the proxy could not know to scrub", async () => {
    const secrets = [TOKEN, computerAgentToken(TOKEN, "agent"), computerControlToken(TOKEN, "other")];
    for (const secret of secrets)
      await curl(proxy.url, `http://shop.test/t?v=${Buffer.from(secret).toString("base64")}`, [
        "--data-binary",
        `token=${secret}`,
        "-H",
        `X-Other: ${secret}`,
      ]);
    // The proxy keeps what it could not know was a token (the control token) ...
    const onDisk = readdirSync(logDir)
      .map((file) => readFileSync(join(logDir, file), "utf8"))
      .join("");
    expect(onDisk).toContain(`token=${TOKEN}`);
    const answer = await request(`${gateway.url}/requests/v1/computers/agent`);
    const entries = parseRequestLog(answer.body).filter((e) => e.request.url.includes("/t?"));
    expect(entries).toHaveLength(secrets.length);
    // ... and the gateway serves none of it, in any form.
    for (const secret of secrets) {
      expect(answer.body).not.toContain(secret);
      expect(answer.body).not.toContain(Buffer.from(secret).toString("base64"));
    }
    for (const entry of entries) {
      expect(entry.request.postData!.text).toBe("token=[redacted]");
      expect(entry.request.headers).toContainEqual({ name: "X-Other", value: "[redacted]" });
    }
  });
});
