// `multienv reset --collect` and the request log, against a real site proxy behind the real gateway on loopback (the
// browser's operations answered by a stand-in, as a reset only asks them to close tabs, start over and open tabs):
// each reset moves the episode's request log into episodes/<n>/requests/<computer>.har, holding that episode's
// exchanges alone, and run.json lists it with its size and SHA-256.
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { Har } from "har-format";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BROWSER_OPERATION_PATHS } from "../../src/protocol/browser-config";
import { resetEnv, type ResetResult } from "../../src/runner/lifecycle/reset";
import type { RunRecord } from "../../src/runner/evidence/run-record";
import { harProblems } from "../helpers/har";
import { cleanup, tempDir } from "../helpers/processes";
import { startHttpServer } from "../helpers/servers";
import { until } from "../helpers/until";
import { curl, type ProxyProcess } from "../site-proxy/helpers";
import { deployedOutputs, sha256OfFile, startComputerBehindGateway } from "./helpers";

let proxy: ProxyProcess;
let artifactsDir: string;
let reset: () => Promise<ResetResult>;

beforeAll(async () => {
  const site = await startHttpServer((req) => `<html><head><title>Shop</title></head><body>${req.url}</body></html>`);
  // The browser launcher's operations, as a reset calls them through the gateway and the proxy's /cdp.
  let profile = 1;
  const browser = await startHttpServer((req, res) => {
    res.writeHead(200, { "Content-Type": "application/json" });
    if (req.url === BROWSER_OPERATION_PATHS.freshProfile) return JSON.stringify({ profile: ++profile, seconds: 0 });
    if (req.url === BROWSER_OPERATION_PATHS.startTabs) return JSON.stringify({ startTabs: 0 });
    return "{}";
  });
  const computer = await startComputerBehindGateway({ site: site.url, cdp: `127.0.0.1:${browser.port}` });
  proxy = computer.proxy;
  const gateway = computer.gateway;
  const map = deployedOutputs(gateway.url, {
    websites: {},
    computers: { agent: { network: "none", startTabs: [] } },
    live: false,
    liveWebsites: [],
    captureTraffic: false,
  });
  artifactsDir = join(tempDir("runner-artifacts-"), "artifacts", "task-h");
  reset = () =>
    resetEnv(
      { name: "task-h", outputs: async () => map, exportStack: async () => ({ deployment: { resources: [] } }) },
      { artifactsDir, collect: true },
    );
}, 60_000);
afterAll(cleanup);

const requestLines = () => proxy.records().filter((r) => r.event === "request").length;
const readHar = (file: string) => JSON.parse(readFileSync(join(artifactsDir, file), "utf8")) as Har;
const runJson = () => JSON.parse(readFileSync(join(artifactsDir, "run.json"), "utf8")) as RunRecord;

describe("reset --collect and the request log", () => {
  it("moves each episode's request log into episodes/<n>/requests/, its exchanges alone, listed in run.json", async () => {
    await curl(proxy.url, "http://shop.test/one");
    await curl(proxy.url, "http://shop.test/one.css");
    await until("episode 1's request lines", () => requestLines() === 2);
    expect((await reset()).episode).toBe(2);

    await curl(proxy.url, "http://shop.test/two");
    await until("episode 2's request line", () => requestLines() === 3);
    expect((await reset()).episode).toBe(3);

    const episodes = runJson().episodes!;
    expect(episodes.map((e) => e.episode)).toEqual([1, 2]);
    for (const [n, urls] of [
      [1, ["http://shop.test/one", "http://shop.test/one.css"]],
      [2, ["http://shop.test/two"]],
    ] as const) {
      const file = `episodes/${n}/requests/agent.har`;
      const har = readHar(file);
      expect(await harProblems(har)).toEqual([]);
      expect(har.log.entries.map((e) => e.request.url)).toEqual(urls);
      expect(episodes[n - 1]).toMatchObject({ episode: n, collected: true, dir: `episodes/${n}` });
      expect(episodes[n - 1].requests).toEqual({
        agent: {
          file,
          bytes: readFileSync(join(artifactsDir, file)).length,
          sha256: sha256OfFile(join(artifactsDir, file)),
          entries: urls.length,
        },
      });
    }
    // Nothing of a finished episode is left where the next one's goes.
    expect(existsSync(join(artifactsDir, "requests"))).toBe(false);
    expect(runJson().evidence).toEqual({});
  });
});
