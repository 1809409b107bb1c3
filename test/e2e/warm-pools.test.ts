// A warm pool on the real Pulumi engine and the real Docker engine, used as a harness uses it: `multienv warm <task>
// --size 2` deploys two envs of a small task, `multienv serve` runs as a process of its own, episodes are claimed and
// released over HTTP and driven in a real Chromium through the claim's handles alone (its cdpUrl and agent token),
// the Python client runs against the same service, and `--size 0` leaves nothing of the pool on the engine. What it
// holds: no answer carries a control token; a release collects the episode's request log under
// artifacts/<task>/episodes/<episode>/ and resets the env; the next episode on that env has a fresh profile (no cookie
// of the one before) and a request log with none of the one before's exchanges.
import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { chromium, type Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runShopEpisode } from "../../examples/runner/shop-agent";
import { engineClient } from "../../src/engines/docker";
import { gatewayAccess } from "../../src/runner";
import { until } from "../helpers/until";
import { e2eStack, REPO, STACK_LABEL, stackFileOf, sweepStack } from "./helpers/env";

const TASK = e2eStack("e2e-pool");
const MEMBERS = [`${TASK}-w1`, `${TASK}-w2`];
const ARTIFACTS = path.join(REPO, "artifacts", TASK);
const api = engineClient();
const browsers: Browser[] = [];
let serve: ChildProcess | undefined;
let serveOutput = "";
let url = "";
let token = "";
/** Every body the service answered, to look for a control token in. */
const answers: string[] = [];

/** `multienv <args>` as a user runs it (bin/multienv.js), in the repository, on this run's state backend. */
function multienv(args: string[]): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [path.join(REPO, "bin/multienv.js"), ...args], {
      cwd: REPO,
      env: process.env,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    child.stdout.on("data", (d: Buffer) => (output += d.toString()));
    child.stderr.on("data", (d: Buffer) => (output += d.toString()));
    child.once("exit", (code) => resolve({ code, output }));
  });
}

async function call(method: string, route: string, body?: unknown): Promise<{ status: number; json: any }> {
  const res = await fetch(`${url}${route}`, {
    method,
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  answers.push(text);
  return { status: res.status, json: JSON.parse(text) };
}

async function claim(): Promise<any> {
  const answer = await call("POST", "/v1/claims", { task: TASK, ttlSeconds: 300, waitSeconds: 120 });
  expect(answer.status, JSON.stringify(answer.json)).toBe(201);
  return answer.json;
}

/** Waits until the pool has every member ready (the releases' resets done). */
async function allReady(): Promise<void> {
  await until(
    "both envs ready again",
    async () => {
      const pool = (await call("GET", "/v1/pools")).json.pools.find((p: { task: string }) => p.task === TASK);
      return pool?.ready === 2 && pool.resetting === 0 ? pool : undefined;
    },
    120_000,
    250,
  );
}

/** The agent's browser of a claim, opened with the claim's handles alone. */
async function browserOf(claimed: any): Promise<Browser> {
  const agent = claimed.computers.agent;
  const browser = await chromium.connectOverCDP(agent.cdpUrl, {
    headers: { authorization: `Bearer ${agent.agentToken}` },
  });
  browsers.push(browser);
  return browser;
}

/** The request log (HAR) an episode's release collected: its entries' URLs. */
function episodeRequests(episode: string): string[] {
  const dir = path.join(ARTIFACTS, "episodes", episode);
  const record = JSON.parse(fs.readFileSync(path.join(dir, "episode.json"), "utf8"));
  expect(record).toMatchObject({ episode, task: TASK });
  const har = JSON.parse(fs.readFileSync(path.join(dir, record.requests.agent.file), "utf8"));
  return (har.log.entries as { request: { url: string } }[]).map((e) => e.request.url);
}

async function poolContainers(): Promise<string[]> {
  const listed = await api.listContainers({ all: true, filters: { label: [STACK_LABEL] } });
  return listed.filter((c) => c.Labels[STACK_LABEL]?.startsWith(`${TASK}-`)).map((c) => c.Names[0].slice(1));
}

async function cleanUp(): Promise<void> {
  for (const member of MEMBERS) {
    await sweepStack(api, member).catch(() => undefined);
    fs.rmSync(stackFileOf(member), { force: true });
  }
  fs.rmSync(stackFileOf(TASK), { force: true });
  fs.rmSync(ARTIFACTS, { recursive: true, force: true });
  for (const member of MEMBERS) fs.rmSync(path.join(REPO, "artifacts", member), { recursive: true, force: true });
  fs.rmSync(path.join(REPO, ".multienv", "pools", TASK), { recursive: true, force: true });
}

beforeAll(async () => {
  await cleanUp();
  fs.copyFileSync(path.join(__dirname, "fixtures", "Pulumi.pool-shop.yaml"), stackFileOf(TASK));
}, 120_000);

afterAll(async () => {
  await Promise.all(browsers.map((b) => b.close().catch(() => undefined)));
  if (serve && serve.exitCode === null) {
    const exited = new Promise((done) => serve!.once("exit", done));
    serve.kill("SIGTERM");
    await exited;
  }
  await cleanUp();
}, 300_000);

describe("a warm pool on the real engines, claimed over HTTP", () => {
  it("warms two envs, each an ordinary stack of the task's file", async () => {
    const warmed = await multienv(["warm", TASK, "--size", "2"]);
    expect(warmed.code, warmed.output).toBe(0);
    expect(warmed.output).toContain(`pool ${TASK}: 2 ready of 2`);
    for (const member of MEMBERS)
      expect((await api.listContainers({ filters: { label: [`${STACK_LABEL}=${member}`] } })).length).toBeGreaterThan(
        0,
      );
  }, 600_000);

  it("serves claims whose handles open the agent's browser, and no answer carries a control token", async () => {
    serve = spawn(process.execPath, [path.join(REPO, "bin/multienv.js"), "serve", "--port", "0"], {
      cwd: REPO,
      env: process.env,
      stdio: ["ignore", "pipe", "pipe"],
    });
    serve.stdout!.on("data", (d: Buffer) => (serveOutput += d.toString()));
    serve.stderr!.on("data", (d: Buffer) => (serveOutput += d.toString()));
    url = await until(
      "serve's first line",
      () => /^serving warm pools at (http:\/\/127\.0\.0\.1:\d+) /.exec(serveOutput)?.[1],
      120_000,
      100,
    );
    token = fs.readFileSync(path.join(REPO, ".multienv", "serve.token"), "utf8").trim();

    const first = await claim();
    expect(Object.keys(first).sort()).toEqual(["computers", "episode", "expiresAt", "id", "stack"]);
    expect(MEMBERS).toContain(first.stack);
    const browser = await browserOf(first);
    const page = await browser.contexts()[0].newPage();
    // Episode 1: the scripted agent signs in (a session cookie) and orders; one request carries a marker of its own.
    await runShopEpisode(page, "https://shop.test/");
    const marker = `episode-one-${randomBytes(4).toString("hex")}`;
    await page.goto(`https://shop.test/?${marker}`);
    expect((await browser.contexts()[0].cookies()).length).toBeGreaterThan(0);
    await browser.close();

    const released = await call("DELETE", `/v1/claims/${encodeURIComponent(first.id)}`);
    expect(released.status).toBe(202);
    expect(released.json).toMatchObject({ id: first.id, episode: first.episode, stack: first.stack });
    await allReady();
    const firstRequests = episodeRequests(first.episode);
    expect(firstRequests.some((u) => u.includes(marker))).toBe(true);
    expect(firstRequests.some((u) => u.includes("/checkout") || u.includes("/orders"))).toBe(true);

    // Episode 2 on the same env: both envs claimed, so one of them is it.
    const second = [await claim(), await claim()];
    const again = second.find((c) => c.stack === first.stack);
    expect(again, JSON.stringify(second)).toBeDefined();
    const fresh = await browserOf(again);
    const context = fresh.contexts()[0];
    expect(await context.cookies()).toEqual([]);
    const secondMarker = `episode-two-${randomBytes(4).toString("hex")}`;
    const tab = await context.newPage();
    await tab.goto(`https://shop.test/?${secondMarker}`);
    await fresh.close();
    for (const c of second) expect((await call("DELETE", `/v1/claims/${encodeURIComponent(c.id)}`)).status).toBe(202);
    await allReady();
    const secondRequests = episodeRequests(again.episode);
    expect(secondRequests.some((u) => u.includes(secondMarker))).toBe(true);
    expect(secondRequests.filter((u) => u.includes(marker))).toEqual([]);

    // No answer carried a member's control token.
    for (const member of MEMBERS) {
      const access = await gatewayAccess(member);
      try {
        expect(access.controlToken.length).toBeGreaterThan(16);
        for (const text of answers) expect(text).not.toContain(access.controlToken);
      } finally {
        await access.close();
      }
    }
    expect(serveOutput).not.toContain(token);
  }, 600_000);

  it("serves the Python client's example (Debian's python3) end to end", async () => {
    const run = spawn("/usr/bin/python3", ["example.py", TASK, "--url", url, "--project-dir", REPO], {
      cwd: path.join(REPO, "clients", "python"),
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    run.stdout.on("data", (d: Buffer) => (out += d.toString()));
    run.stderr.on("data", (d: Buffer) => (out += d.toString()));
    const code = await new Promise((r) => run.once("exit", r));
    expect(code, out).toBe(0);
    const lines = out
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(lines[0]).toMatchObject({ computer: "agent", startTabs: ["https://shop.test/"] });
    expect(lines[0].browser).toMatch(/Chrome/);
    expect(lines[1].released).toMatch(new RegExp(`^${TASK}\\.`));
    await allReady();
  }, 300_000);

  it("drains with --size 0: every env collected and destroyed, no container of the pool left", async () => {
    const drained = await multienv(["warm", TASK, "--size", "0"]);
    expect(drained.code, drained.output).toBe(0);
    expect(await poolContainers()).toEqual([]);
    const pools = (await call("GET", "/v1/pools")).json.pools.find((p: { task: string }) => p.task === TASK);
    expect(pools).toMatchObject({ size: 0, ready: 0, claimed: 0, resetting: 0, failed: 0 });
  }, 300_000);
});
