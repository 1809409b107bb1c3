// requests/v1 and binary bodies: a token among a binary body's bytes, glued to the bytes around it (`Q<token>Q`),
// reaches neither the proxy's log (its own token) nor what the gateway serves (the control token and the agent token,
// which only the gateway knows): both scrub the bytes of a body the log keeps in base64, not its base64 text alone.
import { randomBytes } from "node:crypto";
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { computerAgentToken, computerControlToken } from "../../src/protocol/auth";
import { parseRequestLog } from "../../src/protocol/request-log";
import { cleanup, tempDir } from "../helpers/processes";
import { startHttpServer } from "../helpers/servers";
import { until } from "../helpers/until";
import { curl, startProxy, type ProxyProcess } from "../site-proxy/helpers";
import { request, startGateway, TOKEN, type GatewayProcess } from "./helpers";

let proxy: ProxyProcess;
let gateway: GatewayProcess;
let logDir: string;

beforeAll(async () => {
  const site = await startHttpServer(() => "stored");
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
    computers: { agent: { cdp: `${control}/cdp`, proxyLog: `${control}/log`, requests: `${control}/requests` } },
  });
});
afterAll(async () => {
  await gateway?.stop();
  await cleanup();
});

describe("gateway requests/v1, a binary body", () => {
  it("serves no token glued into a binary body's bytes, and keeps the bytes around it", async () => {
    const tokens = [computerControlToken(TOKEN, "agent"), TOKEN, computerAgentToken(TOKEN, "agent")];
    const around = randomBytes(48);
    const body = Buffer.concat([
      around,
      ...tokens.flatMap((token) => [Buffer.from([0, 0x51]), Buffer.from(token), Buffer.from([0x51, 0xff])]),
      around,
    ]);
    const file = join(tempDir(), "body.bin");
    writeFileSync(file, body);
    await curl(proxy.url, "http://shop.test/upload", [
      "-H",
      "Content-Type: application/octet-stream",
      "--data-binary",
      `@${file}`,
    ]);
    const onDisk = await until("the upload's entry on disk", () =>
      readdirSync(logDir)
        .flatMap((name) => parseRequestLog(readFileSync(join(logDir, name), "utf8")))
        .find((e) => e.request.url.endsWith("/upload")),
    );
    // The proxy cut its own token out of the bytes; the gateway's it could not know are still in them ...
    const kept = Buffer.from(onDisk.request.postData!.text!, "base64");
    expect(kept.indexOf(tokens[0])).toBe(-1);
    expect(kept.indexOf(tokens[1])).toBeGreaterThan(-1);
    // ... and the gateway serves none of them, the rest of the bytes kept.
    const answer = await request(`${gateway.url}/requests/v1/computers/agent`);
    const entry = parseRequestLog(answer.body).find((e) => e.request.url.endsWith("/upload"))!;
    const served = Buffer.from(entry.request.postData!.text!, "base64");
    for (const token of tokens) {
      expect(served.indexOf(token)).toBe(-1);
      expect(answer.body).not.toContain(token);
    }
    expect(served.subarray(0, 48).equals(around)).toBe(true);
    expect(served.subarray(-48).equals(around)).toBe(true);
    expect(served.indexOf(Buffer.from("Q[redacted]Q"))).toBeGreaterThan(-1);
  });
});
