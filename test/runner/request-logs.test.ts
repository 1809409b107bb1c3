// Collecting the request logs against a real site proxy behind the real gateway: each computer's exchanges stored as
// one complete HAR 1.2 document, requests/<computer>.har, an episode's exchanges alone (split where the proxy log's
// episode marks split it), its size and SHA-256 in run.json.
import { readFileSync } from "node:fs";
import type * as http from "node:http";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
import type { Har } from "har-format";
import { afterEach, describe, expect, it } from "vitest";
import { collectRun } from "../../src/runner/evidence/collect";
import { endProxyConnections } from "../../src/runner/evidence/proxy-logs";
import type { RunRecord } from "../../src/runner/evidence/run-record";
import { harProblems } from "../helpers/har";
import { TOKEN } from "../gateway/helpers";
import { cleanup, onCleanup, tempDir } from "../helpers/processes";
import { startHttpServer } from "../helpers/servers";
import { until } from "../helpers/until";
import { curl } from "../site-proxy/helpers";
import { agentCollectOptions, sha256OfFile, startComputerBehindGateway } from "./helpers";
import { startReplayServer } from "../replay-server/helpers";
import { request } from "undici";

afterEach(cleanup);

const page = (req: http.IncomingMessage) => `<html><head><title>Shop</title></head><body>${req.url}</body></html>`;

async function env(
  requestLog: boolean | { fileBytes: number; files: number },
  site: Parameters<typeof startHttpServer>[0] = page,
) {
  const origin = await startHttpServer(site);
  const { proxy, gateway } = await startComputerBehindGateway({ site: origin.url, requestLog });
  const artifactsDir = join(tempDir("runner-artifacts-"), "artifacts", "task-1");
  const options = agentCollectOptions(gateway.url, artifactsDir);
  return { proxy, gateway, artifactsDir, options };
}

const readHar = (path: string) => JSON.parse(readFileSync(path, "utf8")) as Har;
const runJson = (artifactsDir: string) => JSON.parse(readFileSync(join(artifactsDir, "run.json"), "utf8")) as RunRecord;

describe("collecting the request logs", () => {
  it("stores each episode's exchanges alone as a valid HAR document, listed with its size and SHA-256", async () => {
    const { proxy, gateway, artifactsDir, options } = await env(true);
    await curl(proxy.url, "http://shop.test/one", ["-H", "Sec-Fetch-Dest: document", "-H", "Sec-Fetch-Mode: navigate"]);
    await curl(proxy.url, "http://shop.test/one.css", ["-H", "Referer: http://shop.test/one"]);
    // A reset's end of the episode: every connection ended, and the mark where episode 2 begins.
    await endProxyConnections(gateway.url, TOKEN, "agent", { episode: 2 });
    await curl(proxy.url, "http://shop.test/two");
    await until("the three request lines", () => proxy.records().filter((r) => r.event === "request").length === 3);

    await collectRun({ ...options, episode: 1 });
    const first = readHar(join(artifactsDir, "requests", "agent.har"));
    expect(await harProblems(first)).toEqual([]);
    expect(first.log.version).toBe("1.2");
    expect(first.log.creator.name).toBe("multienv");
    expect(first.log.entries.map((e) => e.request.url)).toEqual(["http://shop.test/one", "http://shop.test/one.css"]);
    // The navigation is a page, and what it loaded is on it.
    expect(first.log.pages).toEqual([expect.objectContaining({ id: "page_1", title: "http://shop.test/one" })]);
    expect(first.log.entries.map((e) => e.pageref)).toEqual(["page_1", "page_1"]);
    const record = runJson(artifactsDir).evidence.agent.requests!;
    expect(record).toEqual({
      file: "requests/agent.har",
      bytes: readFileSync(join(artifactsDir, "requests", "agent.har")).length,
      sha256: sha256OfFile(join(artifactsDir, "requests", "agent.har")),
      entries: 2,
    });

    await collectRun(options);
    const second = readHar(join(artifactsDir, "requests", "agent.har"));
    expect(await harProblems(second)).toEqual([]);
    expect(second.log.entries.map((e) => e.request.url)).toEqual(["http://shop.test/two"]);
    expect(runJson(artifactsDir).evidence.agent.requests!.entries).toBe(1);
  });

  it("stores a recording the replay server serves back: the collected HAR replays its own exchanges exactly", async () => {
    const { proxy, artifactsDir, options } = await env(true);
    await curl(proxy.url, "http://shop.test/one", ["-H", "Sec-Fetch-Dest: document", "-H", "Sec-Fetch-Mode: navigate"]);
    await curl(proxy.url, "http://shop.test/form", ["--data", "sku=mug&qty=2"]);
    await until("the two request lines", () => proxy.records().filter((r) => r.event === "request").length === 2);
    await collectRun(options);

    const replay = await startReplayServer(join(artifactsDir, "requests", "agent.har"));
    onCleanup(replay.stop);
    const page = await request(`${replay.url}/one`, { headers: { host: "shop.test" } });
    expect(page.statusCode).toBe(200);
    expect(page.headers["x-agentenv-replay"]).toBe("exact");
    expect(await page.body.text()).toMatch(/<title>Shop<\/title>.*\/one/s);
    const posted = await request(`${replay.url}/form`, {
      method: "POST",
      headers: { host: "shop.test", "content-type": "application/x-www-form-urlencoded" },
      body: "sku=mug&qty=2",
    });
    expect(posted.headers["x-agentenv-replay"]).toBe("exact");
    expect(await posted.body.text()).toMatch(/\/form/);
    const missing = await request(`${replay.url}/never`, { headers: { host: "shop.test" } });
    await missing.body.dump();
    expect([missing.statusCode, missing.headers["x-agentenv-replay"]]).toEqual([404, "miss"]);
  });

  it("stores a gzip page the replay server serves back readable, as the site meant it", async () => {
    const { proxy, artifactsDir, options } = await env(true, (req, res) => {
      res.writeHead(200, { "Content-Type": "text/html; charset=utf-8", "Content-Encoding": "gzip" });
      res.end(gzipSync(page(req)));
      return "";
    });
    const fetched = await curl(proxy.url, "http://shop.test/zipped", ["--compressed"]);
    expect(fetched.headers["content-encoding"]).toBe("gzip");
    await until("the request line", () => proxy.records().some((r) => r.event === "request"));
    await collectRun(options);

    const replay = await startReplayServer(join(artifactsDir, "requests", "agent.har"));
    onCleanup(replay.stop);
    const replayed = await request(`${replay.url}/zipped`, { headers: { host: "shop.test" } });
    expect(replayed.statusCode).toBe(200);
    expect(replayed.headers["x-agentenv-replay"]).toBe("exact");
    // The page as the site meant it, with the script of the replay's determinism in its head and nothing else added.
    expect((await replayed.body.text()).replace(/<script>[\s\S]*?<\/script>/, "")).toBe(fetched.body);
    expect(fetched.body).toBe(page({ url: "/website/shop/zipped" } as http.IncomingMessage));
  });

  it("says in the HAR and in run.json how many of the episode's exchanges the rotation removed, and fails collect", async () => {
    // Files of 4 KiB, two kept: each entry is about 1 KiB, so the first exchanges are rotated away long before the end.
    const { proxy, artifactsDir, options } = await env({ fileBytes: 4096, files: 2 });
    const exchanges = 30;
    for (let i = 0; i < exchanges; i++) await curl(proxy.url, `http://shop.test/page-${i}`);
    await until("every request line", () => proxy.records().filter((r) => r.event === "request").length === exchanges);
    const lines: string[] = [];
    const result = await collectRun({ ...options, log: (line) => lines.push(line) });

    const har = readHar(join(artifactsDir, "requests", "agent.har"));
    expect(await harProblems(har)).toEqual([]);
    const kept = har.log.entries.length;
    const missing = exchanges - kept;
    expect(kept).toBeGreaterThan(0);
    expect(missing).toBeGreaterThan(0);
    // The newest are the ones kept, and the HAR names how many are missing.
    expect(har.log.entries.at(-1)!.request.url).toBe(`http://shop.test/page-${exchanges - 1}`);
    expect(har.log.comment).toBe(
      `${missing} of this episode's exchanges are missing: the site proxy's request log rotated their entries away before they were collected`,
    );
    expect((har.log as unknown as { _multienv: unknown })._multienv).toEqual({ missingEntries: missing });
    expect(runJson(artifactsDir).evidence.agent.requests).toMatchObject({ entries: kept, missing });
    // One line says it, and the collect command fails with it.
    expect(result.evidenceLost).toEqual([
      `stack task-1: the request log of computer agent lost ${missing} of this episode's exchanges before they were collected (the site proxy's rotation removed them; requests/agent.har holds the other ${kept}): collect more often, as each reset does`,
    ]);
    expect(lines).toContain(`warning: ${result.evidenceLost[0]}`);
  });

  it("says nothing is missing when the rotation removed only earlier episodes' exchanges", async () => {
    const { proxy, gateway, artifactsDir, options } = await env({ fileBytes: 4096, files: 2 });
    for (let i = 0; i < 20; i++) await curl(proxy.url, `http://shop.test/old-${i}`);
    await endProxyConnections(gateway.url, TOKEN, "agent", { episode: 2 });
    await curl(proxy.url, "http://shop.test/new");
    await until("every request line", () => proxy.records().filter((r) => r.event === "request").length === 21);
    expect(proxy.records().some((r) => r.event === "request-log-evicted")).toBe(true);
    const result = await collectRun(options);
    const har = readHar(join(artifactsDir, "requests", "agent.har"));
    expect(har.log.entries.map((e) => e.request.url)).toEqual(["http://shop.test/new"]);
    expect(har.log).not.toHaveProperty("comment");
    expect(runJson(artifactsDir).evidence.agent.requests).not.toHaveProperty("missing");
    expect(result.evidenceLost).toEqual([]);
  });

  it("stores no request log, and says nothing of one, for an env that keeps none", async () => {
    const { proxy, artifactsDir, options } = await env(false);
    await curl(proxy.url, "http://shop.test/one");
    const lines: string[] = [];
    await collectRun({ ...options, log: (line) => lines.push(line) });
    const evidence = runJson(artifactsDir).evidence.agent;
    expect(evidence.log).toBe("proxy-logs/agent.jsonl");
    expect(evidence).not.toHaveProperty("requests");
    expect(evidence).not.toHaveProperty("requestsError");
    expect(lines.filter((l) => l.startsWith("warning"))).toEqual([]);
  });
});
