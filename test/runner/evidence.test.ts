// Evidence-based reproducibility: a computer's real site proxy logs its connections, the real gateway serves
// that log, and the collection lists every public host contacted; any one makes the run not reproducible,
// even with no live site deployed.
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { collectRun } from "../../src/runner/evidence/collect";
import { isNonPublicAddress, isPublicHost, publicHostsInLog } from "../../src/runner/evidence/proxy-logs";
import type { RunRecord } from "../../src/runner/evidence/run-record";
import { cleanup, tempDir } from "../helpers/processes";
import { curl, startProxy } from "../site-proxy/helpers";
import { freePort } from "../helpers/ports";
import { startHttpServer } from "../helpers/servers";
import { startTestGateway } from "./helpers";
import { TOKEN } from "../gateway/helpers";
import { computerControlToken } from "../../src/protocol/auth";

/**
 * The computer's own token, as the gateway derives it from the control token (its proxy's control listener wants it).
 */
const AGENT_TOKEN = computerControlToken(TOKEN, "agent");

afterEach(cleanup);
const caDir = mkdtempSync(join(tmpdir(), "runner-ca-"));
afterAll(() => rmSync(caDir, { recursive: true, force: true }));

const NOT_LIVE = { live: false, liveWebsites: [], captureTraffic: false };

/**
 * A computer's site proxy (allow-all) whose log the real gateway serves, with a synthetic site `shop` behind the
 * gateway.
 */
async function computerEnv() {
  const frontend = await startHttpServer(() => "<html><title>shop</title></html>");
  // The "public" site: a loopback server the proxy reaches at the name example.com (static answer, no DNS).
  const origin = await startHttpServer(() => "the public web");
  const gatewayPort = await freePort();
  // The site proxy reaches the gateway's browse listener, as a computer's does (the published one wants the token).
  const browsePort = await freePort();
  const proxy = await startProxy(
    {
      gateway: `http://127.0.0.1:${browsePort}`,
      sites: { shop: ["shop.test"] },
      reach: "allow-all",
      resolve: { "example.com": ["127.0.0.1"], "cdn.example.net": ["127.0.0.1"] },
      control: { host: "127.0.0.1", port: 0, cdp: "127.0.0.1:9" },
      // One CA for every test here: generating its key is most of a proxy's start-up time.
      ca: { cert: join(caDir, "ca.pem"), key: join(caDir, "ca-key.pem") },
    },
    { token: AGENT_TOKEN },
  );
  const gateway = await startTestGateway({
    listen: { host: "127.0.0.1", port: gatewayPort },
    browse: { hosts: ["127.0.0.1"], port: browsePort },
    sites: { shop: { server: frontend.url, frontend: frontend.url } },
    computers: {
      agent: { cdp: "http://127.0.0.1:9", proxyLog: `http://127.0.0.1:${proxy.startup.control!.port}/log` },
    },
  });
  const artifactsDir = join(tempDir(), "task-3");
  const collect = (computers = ["agent"]) =>
    collectRun({
      stack: "task-3",
      access: { gatewayUrl: gateway.url, controlToken: TOKEN },
      artifactsDir,
      marks: NOT_LIVE,
      captureTraffic: false,
      computers,
      syntheticDomains: ["shop.test"],
    });
  return { proxy, origin, gateway, artifactsDir, collect, browsePort };
}

describe("public hosts contacted", () => {
  it("lists a public host a computer reached, and marks the run not reproducible though no live site was deployed", async () => {
    const { proxy, origin, artifactsDir, collect } = await computerEnv();
    expect((await curl(proxy.url, "http://shop.test/")).status).toBe(200);
    // Through CONNECT tunnels, as a browser reaches https sites: each is logged when the tunnel closes.
    expect((await curl(proxy.url, `http://example.com:${origin.port}/`, ["-p"])).body).toBe("the public web");
    expect((await curl(proxy.url, `http://cdn.example.net:${origin.port}/x`, ["-p"])).status).toBe(200);
    expect((await curl(proxy.url, `http://127.0.0.1:${origin.port}/`, ["-p"])).status).toBe(200);
    await proxy.waitForRecord(
      "three connections",
      () => proxy.records().filter((r) => r.event === "connection").length >= 3,
    );

    const { record } = await collect();

    expect(record.publicHostsContacted).toEqual(["cdn.example.net", "example.com"]);
    expect(record.live).toBe(false);
    expect(record.reproducible).toBe(false);
    expect(record.notReproducibleBecause).toContain("a computer contacted the public host example.com");
    expect(record.evidence.agent).toMatchObject({
      connections: 3,
      publicHosts: ["cdn.example.net", "example.com"],
      log: "proxy-logs/agent.jsonl",
    });
    const onDisk = JSON.parse(readFileSync(join(artifactsDir, "run.json"), "utf8")) as RunRecord;
    expect(onDisk.publicHostsContacted).toEqual(["cdn.example.net", "example.com"]);
    // The log itself is kept as the evidence.
    expect(readFileSync(join(artifactsDir, "proxy-logs/agent.jsonl"), "utf8")).toContain('"host":"example.com"');
  });

  it("keeps a run with only synthetic and loopback traffic reproducible", async () => {
    const { proxy, origin, collect } = await computerEnv();
    expect((await curl(proxy.url, "http://shop.test/a")).status).toBe(200);
    expect((await curl(proxy.url, `http://127.0.0.1:${origin.port}/`, ["-p"])).status).toBe(200);
    expect((await curl(proxy.url, `http://127.0.0.1:${origin.port}/again`, ["-p"])).status).toBe(200);
    await proxy.waitForRecord(
      "two connections",
      () => proxy.records().filter((r) => r.event === "connection").length >= 2,
    );

    const { record } = await collect();

    expect(record.evidence.agent.connections).toBe(2);
    expect(record.publicHostsContacted).toEqual([]);
    expect(record).toMatchObject({ reproducible: true, notReproducibleBecause: [] });
  });

  it("keeps what an earlier collection saw when a replaced proxy's log starts over", async () => {
    const { proxy, origin, artifactsDir, collect, browsePort } = await computerEnv();
    await curl(proxy.url, `http://example.com:${origin.port}/`, ["-p"]);
    await proxy.waitForRecord("a connection", (r) => r.event === "connection");
    await collect();

    await proxy.stop();
    const replaced = await startProxy(
      {
        gateway: `http://127.0.0.1:${browsePort}`,
        sites: { shop: ["shop.test"] },
        reach: "allow-all",
        control: { host: "127.0.0.1", port: proxy.startup.control!.port, cdp: "127.0.0.1:9" },
        ca: { cert: join(caDir, "ca.pem"), key: join(caDir, "ca-key.pem") },
      },
      { token: AGENT_TOKEN },
    );
    await curl(replaced.url, `http://127.0.0.1:${origin.port}/`, ["-p"]);
    await replaced.waitForRecord("a connection", (r) => r.event === "connection");
    const { record } = await collect();

    expect(record.evidence.agent.connections).toBe(1);
    expect(record.publicHostsContacted).toEqual(["example.com"]);
    expect(record.reproducible).toBe(false);
    const logs = readdirSync(join(artifactsDir, "proxy-logs")).sort();
    expect(logs).toHaveLength(2);
    expect(logs[0]).toBe("agent.jsonl");
    expect(readFileSync(join(artifactsDir, "proxy-logs", logs[1]), "utf8")).toContain('"host":"example.com"');
  });

  it("does not claim reproducible when a computer's log cannot be read", async () => {
    const { collect } = await computerEnv();
    const { record } = await collect(["agent", "ghost"]);
    expect(record.evidence.ghost.error).toMatch(/HTTP 404/);
    expect(record.reproducible).toBe(false);
    expect(record.notReproducibleBecause.join("\n")).toMatch(/site-proxy log of computer ghost could not be read/);
  });
});

describe("which hosts are public", () => {
  it("excludes synthetic names, localhost names and non-public addresses", () => {
    for (const host of [
      "shop.test",
      "api.shop.test",
      "localhost",
      "app.localhost",
      "127.0.0.1",
      "10.1.2.3",
      "172.20.0.5",
      "192.168.1.1",
      "169.254.1.1",
      "100.64.0.1",
      "::1",
      "fd00::1",
      "fe80::1",
      "[::1]",
      "::ffff:10.0.0.1",
    ]) {
      expect(isPublicHost(host, ["*.shop.test", "shop.test"]), host).toBe(false);
    }
    for (const host of ["github.com", "8.8.8.8", "172.32.0.1", "2001:4860::8888", "shop.test.evil.com"]) {
      expect(isPublicHost(host, ["*.shop.test", "shop.test"]), host).toBe(true);
    }
    expect(isNonPublicAddress("github.com")).toBe(false);
  });

  it("counts only connection records, skips records the proxy marked synthetic, and tolerates a torn last line", () => {
    const log = [
      { event: "startup", time: "t" },
      { event: "connection", host: "github.com", port: 443, address: "140.82.1.1", site: undefined },
      { event: "connection", host: "other.test", port: 80, address: "10.0.0.2", site: "docs" },
      { event: "refused", host: "evil.com", port: 443 },
      { event: "failed", host: "nowhere.example", port: 443 },
    ]
      .map((r) => JSON.stringify(r))
      .join("\n");
    expect(publicHostsInLog(`${log}\n{"event":"connection","host":"torn`, [])).toEqual({
      connections: 2,
      publicHosts: ["github.com"],
    });
  });
});
