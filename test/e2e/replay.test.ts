// Record once, replay forever, on the real engine: a live site (the web stand-in as github.com) recorded by the
// computer's own browser (Playwright's recordHar over the gateway's DevTools route), the stand-in removed, the same
// stack deployed again with `replay` and no network at all; the same scripted agent then sees the same page twice, a
// request the recording lacks is a logged miss, and nothing of the env reaches outside.
import { createHash } from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { chromium, type Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { deployStack, gatewayAccess, resetStack, type StackSpec } from "../../src/runner";
import { e2eStack, deployEnv, REPO, type DeployedEnv } from "./helpers/env";

const STACK = e2eStack("e2e-replay");
const PAGE = "https://github.com/replay-page";
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "multienv-e2e-replay-"));
const HAR = path.join(dir, "github.har");

const site = { live: true, domains: ["github.com"], server: { image: "multienv/sample-live-server" } };
const recordSpec: StackSpec = {
  name: STACK,
  config: {
    websites: { github: site },
    computers: { desk: { network: ["github.com"] } },
  },
};
const replaySpec: StackSpec = {
  name: STACK,
  config: {
    websites: { github: { ...site, replay: { file: HAR, ignoreParams: ["_"] } } },
    computers: { desk: { network: "none" } },
  },
};

/** What the scripted agent sees: the page opened in a new context, once its polls are done. */
async function visit(browser: Browser, recordHar?: string): Promise<{ body: string; polls: string[] }> {
  const context = await browser.newContext(recordHar ? { recordHar: { path: recordHar, content: "embed" } } : {});
  try {
    const page = await context.newPage();
    await page.goto(PAGE);
    await page.waitForSelector("body[data-done]", { timeout: 30_000 });
    const body = await page.evaluate("document.body.outerHTML");
    const polls = await page.$$eval("#polls li", (items) => items.map((li) => li.textContent ?? ""));
    return { body: String(body), polls };
  } finally {
    await context.close(); // writes the HAR
  }
}

describe("record a live site, replay it offline", () => {
  let env: DeployedEnv;
  let recorded: { body: string; polls: string[] };
  // The replay deploy replaces the gateway (its config changed), and Docker publishes it at a new port.
  let access: { gatewayUrl: string; controlToken: string };
  const connect = () =>
    chromium.connectOverCDP(`${access.gatewayUrl}/computers/desk/cdp`, {
      headers: { authorization: `Bearer ${access.controlToken}` },
    });
  const gateway = (route: string, init: RequestInit = {}) =>
    fetch(access.gatewayUrl + route, { ...init, headers: { authorization: `Bearer ${access.controlToken}` } });

  beforeAll(async () => {
    env = await deployEnv(STACK, { spec: recordSpec, selfTest: false });
    const browser = await env.connect("desk");
    try {
      recorded = await visit(browser, HAR);
    } finally {
      await browser.close();
    }
    await env.stopWebStandins();
    env.outputs = (await deployStack(replaySpec, { selfTest: false })).outputs;
    access = await gatewayAccess(STACK);
    // The update replaced the site proxy; a reset puts the browser on a fresh profile trusting the env CA as it is
    // now, as after `up`.
    await resetStack(STACK);
  }, 900_000);

  afterAll(async () => {
    await env?.teardown();
    fs.rmSync(dir, { recursive: true, force: true });
  }, 300_000);

  it("recorded three different poll answers from the live site", () => {
    expect(recorded.polls).toHaveLength(3);
    expect(new Set(recorded.polls).size).toBe(3);
  });

  it("marks the site replayed, with its recording's digest, and the env reproducible", () => {
    const sha256 = createHash("sha256").update(fs.readFileSync(HAR)).digest("hex");
    expect(env.outputs.replayedWebsites).toEqual([{ name: "github", recording: HAR, sha256 }]);
    expect(env.outputs.liveWebsites).toEqual([]);
    expect(env.outputs.reproducible).toBe(true);
    expect(env.outputs.websites.github).toMatchObject({ live: false, replayed: true });
  });

  it("gives the same scripted agent the same DOM twice, the polls' recorded answers in order", async () => {
    const browser = await connect();
    try {
      const first = await visit(browser);
      // The runner's reset: the replay server's repeats start from the first recorded answer, and the ended
      // episode's exchanges are kept in run.json.
      await browser.close().catch(() => undefined);
      await resetStack(STACK, { collect: true });
      const again = await connect();
      const second = await visit(again).finally(() => again.close());
      expect(first.polls).toEqual(recorded.polls);
      expect(second.body).toBe(first.body);
    } finally {
      await browser.close().catch(() => undefined);
    }
    // Each episode: the page and its three polls, each an exact match (the poll's cache-buster is ignored).
    const counters = (await (await gateway("/replay/v1/github/counters")).json()) as { exact: number };
    expect(counters.exact).toBeGreaterThanOrEqual(4);
    const run = JSON.parse(fs.readFileSync(path.join(REPO, "artifacts", STACK, "run.json"), "utf8")) as {
      episodes: { replay?: Record<string, { exact: number; fuzzy: number; missed: number }> }[];
      replay?: Record<string, { exact: number }>;
    };
    expect(run.episodes.at(-1)?.replay?.github.exact).toBeGreaterThanOrEqual(4);
  });

  it("answers a request the recording lacks with a 404 miss, logged with the nearest recorded URL", async () => {
    const browser = await connect();
    try {
      const context = await browser.newContext();
      const page = await context.newPage();
      await page.goto(PAGE);
      const miss = await page.evaluate(
        `fetch("/never-recorded").then((a) => ({ status: a.status, marker: a.headers.get("x-agentenv-replay") }))`,
      );
      expect(miss).toEqual({ status: 404, marker: "miss" });
      await context.close();
    } finally {
      await browser.close();
    }
    const logs = env.docker(`${STACK}-github-replay`, ["logs", `${STACK}-github-replay`]);
    const line = logs
      .split("\n")
      .filter((l) => l.includes('"replay-miss"'))
      .map((l) => JSON.parse(l) as { url: string; nearest?: string })
      .find((l) => l.url.includes("/never-recorded"));
    expect(line).toMatchObject({ url: "https://github.com/never-recorded" });
    expect(line?.nearest).toMatch(/^https:\/\/github\.com\//);
  });

  it("reaches nothing outside: the replay server and the site's server are on the internal env network alone", async () => {
    for (const container of [`${STACK}-github-replay`, `${STACK}-github-server`]) {
      const info = await env.inspect(container);
      expect(Object.keys(info.NetworkSettings.Networks)).toEqual([`${STACK}-env`]);
    }
    const network = (await env.api.getNetwork(`${STACK}-env`).inspect()) as { Internal: boolean };
    expect(network.Internal).toBe(true);
    const proxy = await env.inspect(`${STACK}-desk-proxy`);
    expect(Object.keys(proxy.NetworkSettings.Networks).some((n) => n.includes("egress"))).toBe(false);
  });
});
