// Issue 3, point 8: a computer's Chrome DevTools endpoint (and its site proxy's log) through the gateway,
// against a real headless Chromium.
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WebSocket } from "ws";
import { CHROMIUM_FLAGS } from "../../src/browser/launcher";
import { request, startGateway, startUpstream, TOKEN, type GatewayProcess, type Upstream } from "./helpers";

const AUTH = { Authorization: `Bearer ${TOKEN}` };

async function startChromium(profile: string): Promise<{ port: number; process: ChildProcess }> {
  const child = spawn(
    "/usr/bin/chromium",
    [
      ...CHROMIUM_FLAGS,
      "--remote-debugging-port=0",
      `--user-data-dir=${profile}`,
      "--no-default-browser-check",
      "about:blank",
    ],
    // Its own process group, so the browser's helper processes end with it.
    { stdio: "ignore", detached: true },
  );
  const portFile = join(profile, "DevToolsActivePort");
  for (let i = 0; i < 200 && !existsSync(portFile); i++) await new Promise((resolve) => setTimeout(resolve, 50));
  const port = Number(readFileSync(portFile, "utf8").split("\n")[0]);
  return { port, process: child };
}

/** One CDP command over a WebSocket: resolves with its result. */
function cdpCommand(socket: WebSocket, method: string, params: Record<string, unknown> = {}): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    const id = Math.floor(Math.random() * 1e9);
    const onMessage = (data: Buffer) => {
      const message = JSON.parse(data.toString());
      if (message.id !== id) return;
      socket.off("message", onMessage);
      if (message.error) reject(new Error(message.error.message));
      else resolve(message.result);
    };
    socket.on("message", onMessage);
    socket.send(JSON.stringify({ id, method, params }));
  });
}

describe("gateway /computers/<name>", () => {
  let profile: string;
  let browser: Awaited<ReturnType<typeof startChromium>>;
  let proxyLog: Upstream;
  let page: Upstream;
  let gateway: GatewayProcess;

  beforeAll(async () => {
    profile = mkdtempSync(join(tmpdir(), "multienv-chromium-"));
    browser = await startChromium(profile);
    proxyLog = await startUpstream((req, res) => {
      res.writeHead(200, { "Content-Type": "application/x-ndjson", "X-Path": req.url ?? "" });
      res.write('{"event":"startup"}\n');
      setTimeout(() => res.end('{"event":"connection","host":"shop.test"}\n'), 50);
    });
    page = await startUpstream((_req, res) => res.end("<title>through the gateway</title>"));
    gateway = await startGateway({
      sites: {},
      computers: {
        agent: { cdp: `http://127.0.0.1:${browser.port}`, proxyLog: `${proxyLog.url}/log` },
        nolog: { cdp: `http://127.0.0.1:${browser.port}` },
      },
    });
  });
  afterAll(async () => {
    await gateway?.stop();
    if (browser && browser.process.exitCode === null) {
      const exited = new Promise((resolve) => browser.process.once("exit", resolve));
      process.kill(-browser.process.pid!, "SIGKILL");
      await exited;
    }
    await Promise.all([proxyLog?.close(), page?.close()]);
    if (profile) rmSync(profile, { recursive: true, force: true, maxRetries: 5 });
  });

  it("serves /json/version with the WebSocket URL rewritten to the gateway's", async () => {
    const answer = await request(`${gateway.url}/computers/agent/cdp/json/version`, { headers: AUTH });
    expect(answer.status).toBe(200);
    const version = JSON.parse(answer.body);
    expect(version.Browser).toMatch(/Chrome/);
    expect(version.webSocketDebuggerUrl).toMatch(new RegExp(`^ws://127\\.0\\.0\\.1:${gateway.port}/computers/agent/cdp/devtools/browser/[0-9a-f-]+$`));
  });

  it("rewrites every target's WebSocket URL in /json/list", async () => {
    const targets = JSON.parse((await request(`${gateway.url}/computers/agent/cdp/json/list`, { headers: AUTH })).body) as Array<Record<string, string>>;
    expect(targets.length).toBeGreaterThan(0);
    for (const target of targets.filter((t) => t.webSocketDebuggerUrl)) {
      expect(target.webSocketDebuggerUrl.startsWith(`ws://127.0.0.1:${gateway.port}/computers/agent/cdp/devtools/`)).toBe(true);
    }
  });

  it("passes the DevTools WebSocket through, with the token", async () => {
    const version = JSON.parse((await request(`${gateway.url}/computers/agent/cdp/json/version`, { headers: AUTH })).body);
    const socket = new WebSocket(version.webSocketDebuggerUrl, { headers: AUTH });
    await new Promise((resolve, reject) => {
      socket.once("open", resolve);
      socket.once("error", reject);
    });
    const result = await cdpCommand(socket, "Browser.getVersion");
    expect(String(result.product)).toMatch(/Chrome/);
    socket.close();
  });

  it("lets Playwright drive the browser over CDP through the gateway", async () => {
    const connected = await chromium.connectOverCDP(`${gateway.url}/computers/agent/cdp`, { headers: AUTH, timeout: 15_000 });
    try {
      const context = connected.contexts()[0] ?? (await connected.newContext());
      const tab = await context.newPage();
      await tab.goto(page.url);
      expect(await tab.title()).toBe("through the gateway");
      await tab.close();
    } finally {
      await connected.close();
    }
  });

  it("answers an unknown computer with 404 JSON", async () => {
    const answer = await request(`${gateway.url}/computers/nobody/cdp/json/version`, { headers: AUTH });
    expect(answer.status).toBe(404);
    expect(JSON.parse(answer.body)).toEqual({ error: "unknown computer", computer: "nobody" });
  });

  it("streams the site proxy's log", async () => {
    const answer = await request(`${gateway.url}/computers/agent/proxy-log`, { headers: AUTH });
    expect(answer.status).toBe(200);
    expect(answer.headers["x-path"]).toBe("/log");
    expect(answer.body.trim().split("\n").map((line) => JSON.parse(line).event)).toEqual(["startup", "connection"]);
    const none = await request(`${gateway.url}/computers/nolog/proxy-log`, { headers: AUTH });
    expect(none.status).toBe(404);
  });
});
