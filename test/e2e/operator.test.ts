// The operator's commands (`ls`, `status`, `outputs`, `screenshot`, `watch`) as a user runs them (bin/multienv.js as
// a process) against a small env on the real engine: one synthetic shop, one computer, no capture, no live site.
// Their JSON forms have the documented shape, a screenshot is a PNG of the page the computer shows, and the watch
// page shows the computer's screen change as it navigates, behind its secret.
import { spawn, type ChildProcess, execFile } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import type { Browser, Page } from "playwright-core";
import { chromiumDirect } from "../helpers/chromium";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WebSocket } from "ws";
import { computerAgentToken } from "../../src/protocol/auth";
import { deployStack, type StackSpec } from "../../src/runner";
import { deployEnv, e2eStack, killChromium, REPO, type DeployedEnv, SAMPLE_SHOP } from "./helpers/env";
import { until } from "../helpers/until";

const STACK = e2eStack("e2e-ops");
const ARTIFACTS = path.join(REPO, "artifacts", STACK);
const CLI = path.join(REPO, "bin", "multienv.js");
const COMPUTER = "desktop";
const SPEC: StackSpec = {
  name: STACK,
  config: {
    target: "docker",
    websites: {
      shop: SAMPLE_SHOP,
    },
    computers: { [COMPUTER]: { network: "none", startTabs: ["https://shop.test/"] } },
  },
};

let env: DeployedEnv;
let local: Browser;
const children: ChildProcess[] = [];
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "multienv-ops-"));

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** The CLI as a process, on this run's state backend and passphrase (test/e2e/setup.ts). */
function cli(args: string[]): Promise<Run> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [CLI, ...args],
      { cwd: REPO, env: process.env, timeout: 120_000 },
      (error, stdout, stderr) =>
        resolve({ code: error ? Number((error as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

/** The computer's visible tab, over DevTools through the gateway (the test's own connection, as an agent's). */
async function withComputerPage<T>(use: (page: Page) => Promise<T>): Promise<T> {
  const browser = await env.connect(COMPUTER);
  try {
    const page = browser.contexts()[0].pages()[0];
    return await use(page);
  } finally {
    await browser.close();
  }
}

/** A page of the test's own Chromium, loaded with `load` and retried: Docker changing interfaces drops a load. */
async function localPage(load: (page: Page) => Promise<unknown>): Promise<Page> {
  const page = await local.newPage();
  for (let attempt = 1; ; attempt++) {
    try {
      await load(page);
      return page;
    } catch (error) {
      if (attempt >= 4 || !/ERR_NETWORK_CHANGED/.test(String(error))) throw error;
    }
  }
}

/** The RGB of the pixel at the middle of a PNG, decoded by the test's own browser. */
async function middlePixel(png: Buffer): Promise<number[]> {
  const page = await localPage((p) =>
    p.setContent(`<img id="shot" src="data:image/png;base64,${png.toString("base64")}">`),
  );
  try {
    return await page.evaluate(async () => {
      const doc = (globalThis as any).document;
      const img = doc.getElementById("shot");
      await img.decode();
      const canvas = doc.createElement("canvas");
      canvas.width = img.naturalWidth;
      canvas.height = img.naturalHeight;
      const g = canvas.getContext("2d");
      g.drawImage(img, 0, 0);
      return Array.from(g.getImageData(img.naturalWidth >> 1, img.naturalHeight >> 1, 1, 1).data).slice(
        0,
        3,
      ) as number[];
    });
  } finally {
    await page.close();
  }
}

beforeAll(async () => {
  fs.rmSync(ARTIFACTS, { recursive: true, force: true });
  env = await deployEnv(STACK, { spec: SPEC, standin: false });
  // The self-test (the first deploy skips it): it needs nothing outside, so status has a real result to show.
  env.outputs = (await deployStack(SPEC)).outputs;
  // The sample sites' images check their health every 30 s: until the engine's first check they are `starting`, which
  // ls and status count as not healthy (yet).
  await until(
    "every container healthy by its healthcheck",
    async () => {
      const listed = await env.api.listContainers({ filters: { label: [`multienv.stack=${STACK}`] } });
      return (
        listed.length === 5 &&
        listed.every((c) => c.State === "running" && !/\((health: starting|unhealthy)\)/.test(c.Status))
      );
    },
    90_000,
    1_000,
  );
  local = await chromiumDirect();
}, 420_000);

afterAll(async () => {
  for (const child of children) if (child.exitCode === null) child.kill("SIGINT");
  await local?.close().catch(() => undefined);
  await env?.teardown();
  fs.rmSync(ARTIFACTS, { recursive: true, force: true });
  fs.rmSync(tmp, { recursive: true, force: true });
}, 180_000);

describe("ls, status and outputs", () => {
  it("ls --json lists the stack, deployed, its containers all running and healthy, in episode 1", async () => {
    const run = await cli(["ls", "--json"]);
    expect(run.code, run.stderr).toBe(0);
    const list = JSON.parse(run.stdout) as { stacks: any[] };
    const mine = list.stacks.find((s) => s.stack === STACK);
    expect(mine).toEqual({
      stack: STACK,
      target: "docker",
      deployed: true,
      lastUpdated: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
      // gateway, shop's server and frontend, the computer's browser and site proxy
      containers: { total: 5, running: 5, healthy: 5 },
      episodes: 1,
      // No site of the demo leases an account from a pool.
      accounts: {},
      // Its one computer reaches synthetic sites alone: nothing of the env is live.
      live: false,
      liveReasons: [],
      reproducible: true,
      // Its gateway was asked: no person holds its computer, and its agent asks for none.
      persons: {},
    });
    expect(Date.now() - Date.parse(mine.lastUpdated)).toBeLessThan(30 * 60_000);
    const text = await cli(["ls"]);
    expect(text.stdout).toMatch(
      new RegExp(`^${STACK}\\s+docker\\s+yes\\s+\\S+\\s+5/5\\s+5/5\\s+1\\s+yes\\s+-\\s+-$`, "m"),
    );
  });

  it("status --json: every part healthy, the computer's start tab open, the self-test passed, the proxy log", async () => {
    const run = await cli(["status", STACK, "--json"]);
    expect(run.code, run.stderr).toBe(0);
    const status = JSON.parse(run.stdout);
    expect(Object.keys(status)).toEqual([
      "stack",
      "healthy",
      "problems",
      "containers",
      "gateway",
      "computers",
      "selfTest",
      "evidence",
    ]);
    expect(status).toMatchObject({ stack: STACK, healthy: true, problems: [] });
    expect(status.containers).toHaveLength(5);
    for (const c of status.containers) {
      expect(c).toMatchObject({
        name: expect.stringMatching(new RegExp(`^${STACK}-`)),
        engine: "local",
        state: "running",
      });
      expect(["healthy", undefined]).toContain(c.health);
    }
    expect(status.containers.map((c: any) => c.role).sort()).toEqual([
      "browser",
      "frontend",
      "gateway",
      "server",
      "site-proxy",
    ]);
    expect(status.gateway).toEqual({ url: env.gatewayUrl, healthz: { ok: true, status: 200 } });
    expect(status.computers[COMPUTER].tabs).toContainEqual({ url: "https://shop.test/", title: "Synthetic shop" });
    expect(status.selfTest).toEqual({ passed: true, finishedAt: expect.any(String), failed: [] });
    expect(status.evidence.captureTraffic).toBe(false);
    expect(status.evidence.captures).toBeUndefined();
    expect(status.evidence.proxyLogs[COMPUTER]).toEqual({
      bytes: expect.any(Number),
      lines: expect.any(Number),
      requests: expect.any(Number),
      refused: expect.any(Number),
    });
    expect(status.evidence.proxyLogs[COMPUTER].bytes).toBeGreaterThan(0);
  });

  it("status exits 1 naming a container that stopped", async () => {
    const frontend = `${STACK}-shop-frontend`;
    await env.api.getContainer(frontend).stop({ t: 1 });
    try {
      const run = await cli(["status", STACK]);
      expect(run.code).toBe(1);
      expect(run.stdout).toContain("NOT healthy");
      expect(run.stderr.trim().split("\n")).toEqual([
        expect.stringContaining(`multienv status: stack ${STACK} is not healthy: container ${frontend}: exited`),
      ]);
    } finally {
      await env.api.getContainer(frontend).start();
      await until(
        `${frontend} healthy again`,
        async () => {
          const info = await env.api.getContainer(frontend).inspect();
          return info.State.Health?.Status === "healthy";
        },
        90_000,
        250,
      );
    }
  });

  it("outputs: secrets hidden unless asked, without deploying", async () => {
    const hidden = await cli(["outputs", STACK, "--json"]);
    expect(hidden.code, hidden.stderr).toBe(0);
    const shown = JSON.parse(hidden.stdout);
    expect(shown).toMatchObject({
      gatewayUrl: env.gatewayUrl,
      controlToken: "[secret]",
      agentTokens: "[secret]",
      captureTraffic: false,
      live: false,
      computers: { [COMPUTER]: { cdpUrl: `${env.gatewayUrl}/computers/${COMPUTER}/cdp` } },
      websites: { shop: { live: false, domains: ["shop.test"] } },
    });
    const secrets = await cli(["outputs", STACK, "--json", "--show-secrets"]);
    expect(secrets.code, secrets.stderr).toBe(0);
    expect(JSON.parse(secrets.stdout)).toEqual({
      ...shown,
      controlToken: env.token,
      agentTokens: { [COMPUTER]: computerAgentToken(env.token, COMPUTER) },
    });
    const text = await cli(["outputs", STACK]);
    expect(text.stdout).toContain(`gatewayUrl: ${env.gatewayUrl}`);
    expect(text.stdout).not.toContain(env.token);
    expect(text.stdout).not.toContain(computerAgentToken(env.token, COMPUTER));
  });

  it("a stack that does not exist gets one line: not deployed, and how to deploy it", async () => {
    const runs = await Promise.all([
      cli(["status", `${STACK}-nosuch`]),
      cli(["outputs", `${STACK}-nosuch`]),
      cli(["screenshot", `${STACK}-nosuch`]),
    ]);
    for (const run of runs) {
      expect(run.code).toBe(1);
      expect(run.stderr.trim().split("\n")).toHaveLength(1);
      expect(run.stderr).toContain(
        `stack ${STACK}-nosuch is not deployed; there is no stacks/Pulumi.${STACK}-nosuch.yaml`,
      );
      expect(run.stderr).toContain(`\`multienv up ${STACK}-nosuch\``);
    }
  });
});

describe("screenshot", () => {
  it("is a PNG of the page the computer shows", async () => {
    // A page of one colour: the picture then says which page it is.
    await withComputerPage(async (page) => {
      await page.goto("https://shop.test/");
      await page.evaluate(() => {
        const doc = (globalThis as any).document;
        doc.body.innerHTML = "";
        doc.documentElement.style.background = "rgb(10, 200, 30)";
        doc.body.style.background = "rgb(10, 200, 30)";
      });
    });
    const out = path.join(tmp, "shots");
    const run = await cli(["screenshot", STACK, "--computer", COMPUTER, "--out", out]);
    expect(run.code, run.stderr).toBe(0);
    const match = /^(\S+\.png) \((\d+) bytes\): computer desktop at https:\/\/shop\.test\/$/m.exec(run.stdout);
    expect(match, run.stdout).not.toBeNull();
    const [, file, bytes] = match!;
    expect(path.dirname(file)).toBe(out);
    const png = fs.readFileSync(file);
    expect(png.length).toBe(Number(bytes));
    expect(png.subarray(0, 8)).toEqual(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]));
    expect(png.subarray(12, 16).toString("latin1")).toBe("IHDR");
    expect(png.readUInt32BE(16)).toBeGreaterThan(100);
    expect(png.readUInt32BE(20)).toBeGreaterThan(100);
    expect(await middlePixel(png)).toEqual([10, 200, 30]);

    // Every computer by default, into artifacts/<stack>/screenshots.
    const all = await cli(["screenshot", STACK]);
    expect(all.code, all.stderr).toBe(0);
    expect(all.stdout).toContain(path.join(ARTIFACTS, "screenshots", "desktop-"));
    const unknown = await cli(["screenshot", STACK, "--computer", "nosuch"]);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toBe(
      `multienv screenshot: stack ${STACK}: no computer nosuch (its computers: desktop); pass one of them with --computer\n`,
    );
  });
});

describe("watch", () => {
  it("shows the computer's screen live behind its secret, and the frame changes as the computer navigates", async () => {
    const child = spawn(process.execPath, [CLI, "watch", STACK], { cwd: REPO, env: process.env, stdio: "pipe" });
    children.push(child);
    let stdout = "";
    let stderr = "";
    child.stdout!.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr!.on("data", (d: Buffer) => (stderr += d.toString()));
    const url = await until(
      "watch's URL",
      async () => {
        if (child.exitCode !== null) throw new Error(`watch exited ${child.exitCode}: ${stderr}`);
        return /^(http:\/\/127\.0\.0\.1:\d+\/[0-9a-f]{64}\/)$/m.exec(stdout)?.[1];
      },
      90_000,
      250,
    );
    const origin = new URL(url).origin;
    const secret = new URL(url).pathname.split("/")[1];

    // No secret, a wrong one, or another path: 403, for the page and its live channel alike.
    for (const wrong of [`${origin}/`, `${origin}/${"0".repeat(64)}/`, `${origin}/${secret}/other`])
      expect((await fetch(wrong)).status, wrong).toBe(403);
    const refused = await new Promise<number>((resolve) => {
      const ws = new WebSocket(`${origin.replace("http", "ws")}/${"0".repeat(64)}/live`);
      ws.on("unexpected-response", (_req, res) => resolve(res.statusCode ?? 0));
      ws.on("open", () => (ws.close(), resolve(101)));
      ws.on("error", () => resolve(-1));
    });
    expect(refused).toBe(403);

    const page = await localPage((p) => p.goto(url));
    const screen = page.locator(`section[data-computer="${COMPUTER}"] canvas.screen`);
    // The picture the screen's canvas shows (none before its first frame).
    const picture = () => screen.evaluate((c: any) => (c.width > 0 ? c.toDataURL() : null));
    const shownUrl = page.locator(`section[data-computer="${COMPUTER}"] .url`);
    await until("the first frame", async () => (await picture()) !== null, 60_000, 250);
    const before = await picture();
    await until("the computer's URL", async () => (await shownUrl.textContent()) === "https://shop.test/", 30_000, 250);

    await withComputerPage((p) => p.goto("https://shop.test/signin"));
    await until(
      "the new URL on the page",
      async () => (await shownUrl.textContent()) === "https://shop.test/signin",
      30_000,
      250,
    );
    await until(
      "a new frame",
      async () => {
        const now = await picture();
        return now !== null && now !== before;
      },
      30_000,
      250,
    );
    // The proxy log's request line for that page scrolls beside it.
    await until(
      "the request line",
      async () =>
        ((await page.locator(`section[data-computer="${COMPUTER}"] .log`).textContent()) ?? "").includes(
          "shop.test:443 200",
        ),
      30_000,
      250,
    );

    // The computer's Chromium dies and its launcher starts it again at its start tab: the page follows it there.
    await killChromium(`${STACK}-${COMPUTER}-browser`);
    await until(
      "the restarted browser's start tab on the page",
      async () => (await shownUrl.textContent()) === "https://shop.test/",
      90_000,
      250,
    );
    const restarted = await picture();
    await withComputerPage((p) => p.goto("https://shop.test/signin"));
    await until(
      "a frame from the restarted browser",
      async () => {
        const now = await picture();
        return now !== null && now !== restarted;
      },
      30_000,
      250,
    );
    await page.close();

    child.kill("SIGINT");
    await until("watch to end", async () => child.exitCode !== null, 30_000, 250);
    expect(child.exitCode).toBe(0);
  });
});
