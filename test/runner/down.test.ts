// `down`'s order and failure policy through the runner's seam over the Automation API stack: a test double
// stands in for the stack (it records calls, and at destroy time looks at what is already on disk), while the
// collection runs for real against the real gateway.
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { OutputMap } from "@pulumi/pulumi/automation";
import { afterEach, describe, expect, it } from "vitest";
import { collectThenDestroy, type StackSeam } from "../../src/runner/lifecycle/down";
import { RunnerError } from "../../src/runner/errors";
import { chromium } from "playwright-core";
import { cleanup, tempDir } from "../helpers/processes";
import { deployedOutputs, pcapBytes, startTestGateway, writeCaptures } from "./helpers";
import { freePort } from "../helpers/ports";
import { startChromium } from "../helpers/chromium";
import { startProxy } from "../site-proxy/helpers";
import { startTlsOrigin } from "../helpers/servers";
import { TOKEN } from "../gateway/helpers";
import { until } from "../helpers/until";
import { computerControlToken } from "../../src/protocol/auth";

/**
 * The computer's own token, as the gateway derives it from the control token (its proxy's control listener wants it).
 */
const AGENT_TOKEN = computerControlToken(TOKEN, "agent");

afterEach(cleanup);

/** A stack double: records every call in order; at destroy it notes which captures were already stored. */
class StackDouble implements StackSeam {
  readonly calls: string[] = [];
  storedAtDestroy: string[] | undefined;
  constructor(
    readonly name: string,
    private readonly map: OutputMap,
    private readonly artifactsDir: string,
  ) {}
  async outputs(): Promise<OutputMap> {
    this.calls.push("outputs");
    return this.map;
  }
  async destroy(): Promise<unknown> {
    this.calls.push("destroy");
    const traffic = join(this.artifactsDir, "traffic");
    this.storedAtDestroy = existsSync(traffic) ? readdirSync(traffic).sort() : [];
    return {};
  }
}

async function deployed(captureTraffic = true) {
  const capturesDir = tempDir("runner-captures-");
  writeCaptures(capturesDir, { "shop-server.pcap0": pcapBytes(3_000), "shop-frontend.pcap0": pcapBytes(1_000) });
  const gateway = await startTestGateway({ sites: { shop: { server: "http://127.0.0.1:9" } }, capturesDir });
  const projectDir = tempDir("runner-project-");
  const artifactsDir = join(projectDir, "artifacts", "task-9");
  const stack = new StackDouble(
    "task-9",
    deployedOutputs(gateway.url, { computers: {}, captureTraffic }),
    artifactsDir,
  );
  const lines: string[] = [];
  return { gateway, projectDir, artifactsDir, stack, lines, log: (line: string) => lines.push(line) };
}

describe("down", () => {
  it("collects every capture not yet collected, then destroys", async () => {
    const { projectDir, artifactsDir, stack, log } = await deployed();

    const result = await collectThenDestroy(stack, { projectDir, log });

    expect(stack.calls).toEqual(["outputs", "destroy"]);
    expect(stack.storedAtDestroy).toEqual(["shop-frontend.pcap0", "shop-server.pcap0"]);
    expect(result.collected?.downloaded.sort()).toEqual(["shop-frontend.pcap0", "shop-server.pcap0"]);
    const record = JSON.parse(readFileSync(join(artifactsDir, "run.json"), "utf8"));
    expect(record).toMatchObject({ stack: "task-9", live: true, reproducible: false });
    expect(record.captures).toHaveLength(2);
  });

  it("fetches nothing again when everything was collected already", async () => {
    const { projectDir, stack, log } = await deployed();
    await collectThenDestroy(stack, { projectDir, log });
    const second = await collectThenDestroy(stack, { projectDir, log });
    expect(second.collected?.downloaded).toEqual([]);
    expect(second.collected?.skipped).toHaveLength(2);
  });

  it("destroys anyway when collection fails, by default, with a warning", async () => {
    const { gateway, projectDir, stack, lines, log } = await deployed();
    await gateway.stop();

    await collectThenDestroy(stack, { projectDir, log });

    expect(stack.calls).toEqual(["outputs", "destroy"]);
    expect(lines.join("\n")).toMatch(
      /warning: stack task-9: captures not collected: the gateway did not list them \(listing traffic captures: cannot reach the gateway/,
    );
  });

  it("does not destroy when collection fails under --fail-on-capture-error, and says what to do", async () => {
    const { gateway, projectDir, stack, log } = await deployed();
    await gateway.stop();

    const down = collectThenDestroy(stack, { projectDir, failOnCaptureError: true, log });

    await expect(down).rejects.toBeInstanceOf(RunnerError);
    await expect(down).rejects.toThrow(
      /^stack task-9: captures not collected: the gateway did not list them .*; not destroyed, so nothing is lost: .*`multienv down task-9`/,
    );
    expect(stack.calls).toEqual(["outputs"]);
  });

  it("skips captures when capture is off, and still destroys", async () => {
    const { projectDir, artifactsDir, stack, log } = await deployed(false);
    const result = await collectThenDestroy(stack, { projectDir, failOnCaptureError: true, log });
    expect(stack.calls).toEqual(["outputs", "destroy"]);
    expect(stack.storedAtDestroy).toEqual([]);
    expect(result.collected?.downloaded).toEqual([]);
    expect(JSON.parse(readFileSync(join(artifactsDir, "run.json"), "utf8")).captureTraffic).toBe(false);
  });

  it("destroys a stack with nothing deployed without trying to collect", async () => {
    const projectDir = tempDir();
    const stack = new StackDouble("task-0", {}, join(projectDir, "artifacts", "task-0"));
    const lines: string[] = [];
    const result = await collectThenDestroy(stack, { projectDir, failOnCaptureError: true, log: (l) => lines.push(l) });
    expect(stack.calls).toEqual(["outputs", "destroy"]);
    expect(result.collected).toBeUndefined();
    expect(lines).toEqual(["stack task-0: nothing deployed to collect from"]);
  });
});

describe("down with a computer", () => {
  it("closes the computer's browser first, so a connection it still held open is in the evidence", async () => {
    const origin = await startTlsOrigin("example.com", "public");
    const gatewayPort = await freePort();
    const proxy = await startProxy(
      {
        gateway: `http://127.0.0.1:${gatewayPort}`,
        sites: {},
        reach: "allow-all",
        resolve: { "example.com": ["127.0.0.1"] },
        control: { host: "127.0.0.1", port: 0, cdp: "127.0.0.1:9" },
      },
      { token: AGENT_TOKEN },
    );
    // The computer's browser reaches everything through its site proxy, as in a deployed env.
    const browser = await startChromium([`--proxy-server=${proxy.url}`, "--ignore-certificate-errors"]);
    const gateway = await startTestGateway({
      listen: { host: "127.0.0.1", port: gatewayPort },
      sites: { shop: { server: "http://127.0.0.1:9" } },
      computers: { agent: { cdp: browser.cdp, proxyLog: `http://127.0.0.1:${proxy.startup.control!.port}/log` } },
    });
    const direct = await chromium.connectOverCDP(browser.cdp);
    const page = await direct.contexts()[0].newPage();
    await page.goto(`https://example.com:${origin.port}/`);
    expect(await page.title()).toBe("public");
    await direct.close();
    // The page holds a request open (as a long poll or WebSocket would); the proxy logs a connection only when it ends.
    const logged = () => proxy.records().filter((r) => r.event === "connection" && r.host === "example.com").length;
    await until("the page's held request", () => origin.held() > 0);
    expect(await origin.openConnections()).toBeGreaterThan(0);
    const loggedBefore = logged();

    const projectDir = tempDir("runner-project-");
    const artifactsDir = join(projectDir, "artifacts", "task-8");
    const map = deployedOutputs(gateway.url, {
      computers: { agent: {} },
      captureTraffic: false,
      live: false,
      liveWebsites: [],
      websites: {},
    });
    const stack = new StackDouble("task-8", map, artifactsDir);
    const result = await collectThenDestroy(stack, { projectDir });

    expect(stack.calls).toEqual(["outputs", "destroy"]);
    // The held connections ended and were logged before the collection read the log.
    expect(await origin.openConnections()).toBe(0);
    expect(logged()).toBeGreaterThan(loggedBefore);
    expect(result.collected?.record.evidence.agent.connections).toBeGreaterThanOrEqual(logged());
    expect(result.collected?.record.publicHostsContacted).toEqual(["example.com"]);
    expect(result.collected?.record.reproducible).toBe(false);
    await until("the browser to exit", () => browser.exited());
  });
});
