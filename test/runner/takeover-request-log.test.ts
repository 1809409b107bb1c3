// What a person does while holding a computer is theirs in the evidence: the exchanges that begin during a takeover
// carry `_multienv.human: true` in the stored HAR, and what the person sent (a form's password, a typed search) is in
// no log, neither the HAR nor the site proxy's own request log. A take the site proxy cannot be told of is refused,
// so no exchange of a person's goes unmarked. Against a real site proxy behind the real gateway, on loopback.
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { Har } from "har-format";
import { request } from "undici";
import { afterEach, describe, expect, it } from "vitest";
import { PERSON_WITHHELD, type RequestLogEntry } from "../../src/protocol/request-log";
import { takeoverPath } from "../../src/protocol/takeover";
import { collectRun } from "../../src/runner/evidence/collect";
import { TOKEN } from "../gateway/helpers";
import { harProblems } from "../helpers/har";
import { closedPort } from "../helpers/ports";
import { cleanup, tempDir } from "../helpers/processes";
import { startHttpServer } from "../helpers/servers";
import { until } from "../helpers/until";
import { curl } from "../site-proxy/helpers";
import { agentCollectOptions, startComputerBehindGateway, startTestGateway } from "./helpers";

afterEach(cleanup);

const PASSWORD = "s3cret-typed-by-person";
const control = { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" };

async function take(gatewayUrl: string): Promise<number> {
  const answer = await request(gatewayUrl + takeoverPath("agent"), {
    method: "POST",
    headers: control,
    body: JSON.stringify({ operator: "olivia" }),
  });
  await answer.body.text();
  return answer.statusCode;
}

async function handBack(gatewayUrl: string): Promise<number> {
  const answer = await request(gatewayUrl + takeoverPath("agent"), { method: "DELETE", headers: control });
  await answer.body.text();
  return answer.statusCode;
}

describe("a person's exchanges in the request log", () => {
  it("are marked human, keep nothing the person sent, and leave the agent's before and after as they were", async () => {
    // The site echoes no query: what the person typed could only reach the log through what was sent.
    const site = await startHttpServer((req) => `<title>${req.method} ${req.url!.split("?")[0]}</title>`);
    const { proxy, gateway, requestLogDir } = await startComputerBehindGateway({ site: site.url });
    await curl(proxy.url, "http://shop.test/before?q=agent-words");

    expect(await take(gateway.url)).toBe(200);
    await curl(proxy.url, "http://shop.test/login", ["--data", `name=ada&pw=${PASSWORD}`]);
    await curl(proxy.url, `http://shop.test/search?q=${PASSWORD}&page=2`);
    expect(await handBack(gateway.url)).toBe(200);

    await curl(proxy.url, "http://shop.test/after", ["--data", "agent=typed"]);
    await until("four request lines", () => proxy.records().filter((r) => r.event === "request").length === 4);

    const artifactsDir = join(tempDir("runner-artifacts-"), "artifacts", "task-1");
    await collectRun(agentCollectOptions(gateway.url, artifactsDir));
    const harText = readFileSync(join(artifactsDir, "requests", "agent.har"), "utf8");
    const har = JSON.parse(harText) as Har;
    expect(await harProblems(har)).toEqual([]);
    const entries = har.log.entries as RequestLogEntry[];
    expect(entries.map((e) => [e.request.method, e.request.url.split("?")[0], e._multienv.human])).toEqual([
      ["GET", "http://shop.test/before", undefined],
      ["POST", "http://shop.test/login", true],
      ["GET", "http://shop.test/search", true],
      ["POST", "http://shop.test/after", undefined],
    ]);
    const [before, login, search, after] = entries;
    // The agent's own exchanges keep what they sent.
    expect(before.request.queryString).toEqual([{ name: "q", value: "agent-words" }]);
    expect(after.request.postData?.text).toBe("agent=typed");
    expect(after._multienv.request.sha256).toMatch(/^[0-9a-f]{64}$/);
    // The person's keep its size and the site's answer, and nothing of what was sent, not even a hash to guess from.
    expect(login.request.postData?.text).toBe(PERSON_WITHHELD);
    expect(login.request.postData).not.toHaveProperty("params");
    expect(login._multienv.request).toEqual({ bytes: `name=ada&pw=${PASSWORD}`.length, cut: false });
    expect(login.response.content.text).toBe("<title>POST /website/shop/login</title>");
    expect(search.request.queryString).toEqual([
      { name: "q", value: PERSON_WITHHELD },
      { name: "page", value: PERSON_WITHHELD },
    ]);
    expect(search.request.url).toBe(
      `http://shop.test/search?q=${encodeURIComponent(PERSON_WITHHELD)}&page=${encodeURIComponent(PERSON_WITHHELD)}`,
    );
    // In no log: the stored HAR, the proxy's own request log files, the proxy log.
    expect(harText).not.toContain(PASSWORD);
    for (const file of readdirSync(requestLogDir))
      expect(readFileSync(join(requestLogDir, file), "utf8")).not.toContain(PASSWORD);
    expect(JSON.stringify(proxy.records())).not.toContain(PASSWORD);
    expect(proxy.records().map((r) => r.event)).toEqual(expect.arrayContaining(["person-holds", "person-handed-back"]));
  });

  it("refuses a take the computer's site proxy cannot be told of, and the agent keeps its computer", async () => {
    const deadUrl = `http://127.0.0.1:${await closedPort()}`;
    const gateway = await startTestGateway({
      sites: {},
      computers: { agent: { cdp: `${deadUrl}/cdp`, requests: `${deadUrl}/requests`, person: `${deadUrl}/person` } },
    });
    const answer = await request(gateway.url + takeoverPath("agent"), {
      method: "POST",
      headers: control,
      body: JSON.stringify({ operator: "olivia" }),
    });
    expect(answer.statusCode).toBe(502);
    expect(((await answer.body.json()) as { error: string }).error).toBe(
      "the computer's site proxy could not be told that a person holds it; nothing was taken",
    );
    const state = await request(gateway.url + takeoverPath("agent"), { headers: control });
    expect(await state.body.json()).toEqual({});
  });
});
