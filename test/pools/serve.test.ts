// `multienv serve` on loopback: its token (refused without it, written mode 0600, never printed), its answers to bad
// input (one line naming the field), a claim beyond the ready envs (503, Retry-After, the pool's state), the pools'
// state, and the Python client end to end, run with Debian's python3 against the real service. The pool's member is
// registered ready without a deploy (the claim path needs no engine); its cdpUrl is a real Chromium's DevTools.
import { execFileSync, spawn } from "node:child_process";
import { statSync } from "node:fs";
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { openLeaseStore } from "../../src/accounts";
import { servePools } from "../../src/runner/pools";
import { startChromium } from "../helpers/chromium";
import { cleanup, onCleanup, ROOT, stopOnCleanup } from "../helpers/processes";
import { envOf, project, registerReady } from "./helpers";

afterEach(cleanup);

const TASK = "shop";

async function started(cdpUrl?: string) {
  const p = project(TASK);
  const store = await openLeaseStore({ sqliteFile: p.sqliteFile });
  onCleanup(() => store.close());
  await registerReady(store, p, TASK, 1, cdpUrl);
  const service = await servePools({ projectDir: p.projectDir, env: envOf(p), port: 0, keeper: false });
  onCleanup(() => service.close());
  const token = execFileSync("cat", [service.tokenFile], { encoding: "utf8" }).trim();
  const call = (method: string, route: string, body?: unknown, auth = `Bearer ${token}`) =>
    fetch(`${service.url}${route}`, {
      method,
      headers: { authorization: auth, "content-type": "application/json" },
      body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
    });
  return { p, store, service, token, call };
}

describe("multienv serve", () => {
  it("refuses every route without its token, or with another", async () => {
    const { call } = await started();
    for (const [method, route] of [
      ["GET", "/v1/pools"],
      ["GET", "/v1/openapi.json"],
      ["POST", "/v1/claims"],
      ["DELETE", "/v1/claims/shop.00000000000000000000000000000000"],
    ])
      for (const auth of ["", "Bearer ", `Bearer ${"0".repeat(64)}`, "Basic x"]) {
        const res = await call(method, route, method === "POST" ? { task: TASK } : undefined, auth);
        expect(res.status, `${method} ${route} with "${auth}"`).toBe(401);
      }
  });

  it("writes its token mode 0600 and prints only where it is", async () => {
    const p = project(TASK);
    const child = spawn(
      process.execPath,
      ["--import=tsx", "src/runner/cli.ts", "serve", "--port", "0", "--project-dir", p.projectDir],
      {
        cwd: ROOT,
        env: envOf(p),
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    stopOnCleanup(child);
    let out = "";
    child.stdout!.on("data", (d: Buffer) => (out += d.toString()));
    child.stderr!.on("data", (d: Buffer) => (out += d.toString()));
    const tokenFile = path.join(p.projectDir, ".multienv", "serve.token");
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no first line: ${out}`)), 200_000);
      child.stdout!.on("data", () => {
        if (out.includes("\n")) {
          clearTimeout(timer);
          resolve();
        }
      });
    });
    expect(out.split("\n")[0]).toMatch(/^serving warm pools at http:\/\/127\.0\.0\.1:\d+ \(token in .*serve\.token/);
    expect(statSync(tokenFile).mode & 0o777).toBe(0o600);
    const token = execFileSync("cat", [tokenFile], { encoding: "utf8" }).trim();
    expect(token).toMatch(/^[0-9a-f]{64}$/);
    child.kill("SIGTERM");
    await new Promise((r) => child.once("exit", r));
    expect(out).not.toContain(token);
  }, 240_000);

  it("answers bad input with one line naming the field", async () => {
    const { call } = await started();
    const cases: [unknown, RegExp][] = [
      ["{not json", /^body: not JSON/],
      [{}, /^task: /],
      [{ task: TASK, ttlSeconds: "soon" }, /^ttlSeconds: /],
      [{ task: TASK, waitSeconds: -1 }, /^waitSeconds: /],
      [{ task: TASK, extra: 1 }, /^body: unknown field\(s\) extra/],
      [{ task: "../../etc" }, /^task: /],
    ];
    for (const [body, message] of cases) {
      const res = await call("POST", "/v1/claims", body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      const answer = (await res.json()) as { error: string };
      expect(answer.error).toMatch(message);
      expect(answer.error).not.toContain("\n");
    }
    expect((await call("DELETE", "/v1/claims/not-a-claim")).status).toBe(404);
  });

  it("claims, then answers 503 with Retry-After and the pool's state once none is ready; lists the pools", async () => {
    const { call } = await started();
    const claimed = await call("POST", "/v1/claims", { task: TASK, ttlSeconds: 60 });
    expect(claimed.status).toBe(201);
    const claim = (await claimed.json()) as Record<string, any>;
    expect(Object.keys(claim).sort()).toEqual(["computers", "episode", "expiresAt", "id", "stack"]);
    expect(Object.keys(claim.computers.agent).sort()).toEqual(["agentToken", "cdpUrl", "startTabs"]);
    const busy = await call("POST", "/v1/claims", { task: TASK, waitSeconds: 0.3 });
    expect(busy.status).toBe(503);
    expect(busy.headers.get("retry-after")).toBe("1");
    expect(((await busy.json()) as any).pool).toMatchObject({ task: TASK, ready: 0, claimed: 1 });
    const pools = (await (await call("GET", "/v1/pools")).json()) as any;
    expect(pools.pools).toEqual([
      expect.objectContaining({ task: TASK, size: 1, ready: 0, claimed: 1, resetting: 0, failed: 0 }),
    ]);
    expect(pools.pools[0]).toHaveProperty("admits");
    const renewed = await call("POST", `/v1/claims/${claim.id}/renew`, { ttlSeconds: 120 });
    expect(renewed.status).toBe(200);
    expect((await call("GET", "/v1/openapi.json")).status).toBe(200);
  });

  it("serves the Python client end to end (Debian's python3, the standard library alone)", async () => {
    const chromium = await startChromium();
    const { p, service } = await started(chromium.cdp);
    const run = spawn("/usr/bin/python3", ["-m", "unittest", "-v", "test_client"], {
      cwd: path.join(ROOT, "clients", "python"),
      env: { ...process.env, MULTIENV_SERVE_URL: service.url, MULTIENV_PROJECT_DIR: p.projectDir, MULTIENV_TASK: TASK },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    run.stdout!.on("data", (d: Buffer) => (out += d.toString()));
    run.stderr!.on("data", (d: Buffer) => (out += d.toString()));
    const code = await new Promise((r) => run.once("exit", r));
    expect(out, out).toMatch(/Ran 4 tests/);
    expect(out).not.toMatch(/skipped/);
    expect(code, out).toBe(0);
  }, 120_000);
});
