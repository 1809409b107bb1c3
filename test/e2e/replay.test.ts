// Record once, replay forever, on the real engine. A live site (the web stand-in as github.com, with its own test CA
// trusted for it alone through `recordTrust`) is recorded by the env itself: `record: true` opens its HTTPS at the
// computer's site proxy, and the scripted agent's session (a page changing with the time and a random value, a poll
// answered three ways, a WebSocket echo, a form POST) lands in the collected `requests/desk.har`, while another live
// site (example.com) stays a tunnel. The stand-in is then removed and the same stack deployed again with
// `replay: <that HAR>` and no network at all: the same scripted agent sees what it saw when recording, the same DOM
// twice in a row, a request the recording lacks is a miss in the proxy log, and nothing of the env reaches outside.
import { createHash } from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { chromium, type Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { collectCaptures, deployStack, gatewayAccess, resetStack, type StackSpec } from "../../src/runner";
import { computerControlToken } from "../../src/protocol/auth";
import { e2eStack, deployEnv, REPO, type DeployedEnv } from "./helpers/env";
import { makeStandinCerts, startWebStandin } from "./helpers/web-standin";

const STACK = e2eStack("e2e-replay");
const PAGE = "https://github.com/replay-page";
const ARTIFACTS = path.join(REPO, "artifacts", STACK);
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "multienv-e2e-replay-"));
/** The recording: the recording deploy's collected request log, kept aside (the replay's collections rewrite it). */
const HAR = path.join(dir, "github.har");
/** The recording deploy's collected proxy log, kept aside likewise. */
const RECORDING_LOG = path.join(dir, "recording-proxy-log.jsonl");
const certs = makeStandinCerts();

const live = (domain: string) => ({ live: true, domains: [domain], server: { image: "multienv/sample-live-server" } });
const recordSpec: StackSpec = {
  name: STACK,
  config: {
    websites: {
      github: { ...live("github.com"), record: true, recordTrust: certs.caPem },
      example: live("example.com"),
    },
    computers: { desk: { network: ["github.com", "example.com"] } },
  },
};
const replaySpec: StackSpec = {
  name: STACK,
  config: {
    websites: { github: { ...live("github.com"), replay: { file: HAR, ignoreParams: ["_"] } } },
    computers: { desk: { network: "none" } },
  },
};

/** What the scripted agent sees of the session. */
interface Seen {
  /** The page's DOM once its polls and its WebSocket echo are done. */
  body: string;
  /** What the server put in the page (its time and random value), the poll answers and the echo. */
  served: string;
  polls: string[];
  echo: string;
  /** The DOM of the page the form's POST led to. */
  submitted: string;
  /** The session cookie the site set. */
  session: string | undefined;
}

/** The scripted agent: the page in a new context, its polls and echo awaited, then the form sent. */
async function visit(browser: Browser): Promise<Seen> {
  const context = await browser.newContext();
  try {
    const page = await context.newPage();
    await page.goto(PAGE);
    await page.waitForSelector("body[data-done]", { timeout: 30_000 }).catch(async (error: Error) => {
      throw new Error(`${error.message}\nthe page as it stands: ${(await page.content()).slice(0, 2000)}`);
    });
    const body = String(await page.evaluate("document.body.outerHTML"));
    const served = (await page.textContent("#served")) ?? "";
    const polls = await page.$$eval("#polls li", (items) => items.map((li) => li.textContent ?? ""));
    const echo = (await page.textContent("#echo")) ?? "";
    await page.fill("input[name=q]", "replay me");
    await Promise.all([page.waitForURL("**/submit"), page.click("button")]);
    const submitted = String(await page.evaluate("document.body.outerHTML"));
    const session = (await context.cookies("https://github.com")).find((c) => c.name === "session")?.value;
    return { body, served, polls, echo, submitted, session };
  } finally {
    await context.close();
  }
}

interface HarEntry {
  request: { method: string; url: string; httpVersion: string; postData?: { text?: string } };
  response: { status: number; cookies: { name: string; value: string }[]; content: { text?: string } };
  _webSocketMessages?: { type: "send" | "receive"; data: string }[];
}

describe("record a live site through the env, replay it offline", () => {
  let env: DeployedEnv;
  let recorded: Seen;
  let exampleTitle: string;
  let harText: string;
  let entries: HarEntry[];
  let tokens: string[];
  // The replay deploy replaces the gateway (its config changed), and Docker publishes it at a new port.
  let access: { gatewayUrl: string; controlToken: string };
  const connect = () =>
    chromium.connectOverCDP(`${access.gatewayUrl}/computers/desk/cdp`, {
      headers: { authorization: `Bearer ${access.controlToken}` },
    });

  beforeAll(async () => {
    env = await deployEnv(STACK, { spec: recordSpec, selfTest: false, certs });
    const recording = await gatewayAccess(STACK);
    tokens = [
      recording.controlToken,
      computerControlToken(recording.controlToken, "desk"),
      ...Object.values(recording.agentTokens ?? {}),
    ];
    const browser = await env.connect("desk");
    try {
      recorded = await visit(browser).catch(async (error: Error) => {
        const lines = (await env.proxyLog("desk")).slice(-12).map((l) => JSON.stringify(l));
        const standin = env.docker(env.webStandin("desk"), ["logs", "--tail", "8", env.webStandin("desk")]);
        throw new Error(`${error.message}\nproxy log:\n${lines.join("\n")}\nstand-in:\n${standin}`);
      });
      const context = await browser.newContext();
      const page = await context.newPage();
      await page.goto("https://example.com/");
      exampleTitle = await page.title();
      await context.close();
    } finally {
      await browser.close();
    }
    // The runner's reset --collect: it ends every connection (a WebSocket's entry is written as its connection ends)
    // and keeps the episode's request log as a HAR document, the recording the replay deploy is given.
    await resetStack(STACK, { collect: true });
    const episode = path.join(ARTIFACTS, "episodes", "1");
    fs.copyFileSync(path.join(episode, "requests", "desk.har"), HAR);
    fs.copyFileSync(path.join(episode, "proxy-logs", "desk.jsonl"), RECORDING_LOG);
    harText = fs.readFileSync(HAR, "utf8");
    entries = (JSON.parse(harText) as { log: { entries: HarEntry[] } }).log.entries;

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
    fs.rmSync(certs.dir, { recursive: true, force: true });
  }, 300_000);

  describe("recording (record: true)", () => {
    const ofGithub = (p: string) => entries.filter((e) => e.request.url.startsWith(`https://github.com${p}`));

    it("holds the live site's exchanges decrypted, over HTTP/2 to the browser", () => {
      const [page] = ofGithub("/replay-page");
      expect(page.request.httpVersion).toBe("HTTP/2.0");
      expect(page.response.status).toBe(200);
      expect(page.response.content.text).toContain(recorded.served);
      const polls = ofGithub("/poll?");
      expect(polls.map((e) => e.response.content.text)).toEqual(recorded.polls);
      expect(new Set(recorded.polls).size).toBe(3);
    });

    it("holds the form's POST with its body and the page it led to", () => {
      const [post] = ofGithub("/submit");
      expect(post.request.method).toBe("POST");
      expect(post.request.postData?.text).toBe("q=replay+me");
      expect(post.response.content.text).toContain('<p id="got">replay me</p>');
    });

    it("holds the WebSocket's messages as Chromium's HAR export writes them", () => {
      const socket = entries.find((e) => e._webSocketMessages !== undefined);
      expect(socket?.request.url).toMatch(/^(https|wss):\/\/github\.com\/echo$/);
      const messages = socket!._webSocketMessages!;
      expect(messages.find((m) => m.type === "send")?.data).toBe("hello");
      expect(messages.find((m) => m.type === "receive")?.data).toBe(recorded.echo);
    });

    it("leaves the session cookie's value out, and every token out of every byte", () => {
      expect(recorded.session).toMatch(/^standin-session-/);
      expect(harText).not.toContain(recorded.session);
      const [page] = ofGithub("/replay-page");
      expect(page.response.cookies.map((c) => c.name)).toContain("session");
      const log = fs.readFileSync(RECORDING_LOG, "utf8");
      for (const token of tokens) {
        for (const form of [token, Buffer.from(token).toString("base64"), Buffer.from(token).toString("hex")]) {
          expect(harText).not.toContain(form);
          expect(log).not.toContain(form);
        }
      }
    });

    it("keeps a live site that is not recorded a tunnel: it loads, and nothing of it is in the log", () => {
      expect(exampleTitle).toBe("Example Domain stand-in");
      expect(entries.filter((e) => new URL(e.request.url).hostname === "example.com")).toEqual([]);
      const lines = fs
        .readFileSync(RECORDING_LOG, "utf8")
        .split("\n")
        .filter(Boolean)
        .map((l) => JSON.parse(l) as { event: string; host?: string; method?: string; recorded?: true });
      const tunnel = lines.find((l) => l.event === "connection" && l.host === "example.com");
      expect(tunnel).toMatchObject({ method: "CONNECT" });
      expect(tunnel?.recorded).toBeUndefined();
      expect(lines.some((l) => l.event === "connection" && l.host === "github.com" && l.recorded)).toBe(true);
    });
  });

  describe("replay (replay: the recording, network none)", () => {
    it("marks the site replayed, with its recording's digest, and the env reproducible", () => {
      const sha256 = createHash("sha256").update(fs.readFileSync(HAR)).digest("hex");
      expect(env.outputs.replayedWebsites).toEqual([{ name: "github", recording: HAR, sha256 }]);
      expect(env.outputs.liveWebsites).toEqual([]);
      expect(env.outputs.reproducible).toBe(true);
      expect(env.outputs.websites.github).toMatchObject({ live: false, replayed: true });
    });

    it("gives the same scripted agent what it saw when recording, and the same DOM twice in a row", async () => {
      const browser = await connect();
      let first: Seen;
      try {
        first = await visit(browser);
      } finally {
        await browser.close().catch(() => undefined);
      }
      // The runner's reset: the replay server's repeats start from the first recorded answer, and the ended
      // episode's exchanges are kept in run.json.
      await resetStack(STACK, { collect: true });
      const again = await connect();
      const second = await visit(again).finally(() => again.close());
      // What the site said when recording: its time and random value, the poll's three answers in order, the echo
      // and the page the POST led to.
      expect(first.served).toBe(recorded.served);
      expect(first.polls).toEqual(recorded.polls);
      expect(first.echo).toBe(recorded.echo);
      expect(first.submitted).toBe(recorded.submitted);
      // And the page's own time and randomness frozen: one DOM both times.
      expect(second.body).toBe(first.body);
      expect(second.submitted).toBe(first.submitted);
      const run = JSON.parse(fs.readFileSync(path.join(ARTIFACTS, "run.json"), "utf8")) as {
        episodes: { replay?: Record<string, { exact: number; fuzzy: number; missed: number }> }[];
      };
      // The page, three polls, the WebSocket and the POST, each an exact match (the poll's cache-buster ignored).
      expect(run.episodes.at(-1)?.replay?.github).toMatchObject({ exact: 6, missed: 0 });
    });

    it("answers a request the recording lacks with a 404 miss, in the collected proxy log and run.json", async () => {
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
      await collectCaptures(STACK);
      const line = fs
        .readFileSync(path.join(ARTIFACTS, "proxy-logs", "desk.jsonl"), "utf8")
        .split("\n")
        .filter((l) => l.includes('"replay-miss"'))
        .map((l) => JSON.parse(l) as Record<string, string>)
        .find((l) => l.url.includes("/never-recorded"));
      expect(line).toMatchObject({ site: "github", method: "GET", url: "https://github.com/never-recorded" });
      expect(line?.nearest).toMatch(/^https:\/\/github\.com\//);
      const run = JSON.parse(fs.readFileSync(path.join(ARTIFACTS, "run.json"), "utf8")) as {
        replay?: Record<string, { exact: number; fuzzy: number; missed: number }>;
      };
      expect(run.replay?.github.missed).toBe(1);
      expect(run.replay?.github.exact).toBeGreaterThanOrEqual(1);
    });

    it("reaches nothing outside: no container of the site, nor the computer, connects to the web again", async () => {
      // The web comes back (the stand-in, at the live site's names, on a network of its own that is not the env's):
      // nothing the replay deployed reaches it, by name or by address.
      const web = await startWebStandin(env.api, STACK, certs);
      try {
        const networks = (await env.inspect(web.id)).NetworkSettings.Networks as Record<string, { IPAddress: string }>;
        const address = Object.values(networks)[0].IPAddress;
        const targets: Record<string, [string, number]> = { address: [address, 443], name: ["github.com", 443] };
        for (const container of [`${STACK}-github-replay`, `${STACK}-github-server`, `${STACK}-desk-proxy`]) {
          const probe = env.connectsFrom(container, targets);
          expect(probe.address, container).not.toBe("connected");
          expect(probe.name, container).not.toBe("connected");
        }
        // Through the computer's own proxy: refused (network none), marked as the proxy's own answer.
        const via = env.throughProxy(`${STACK}-desk-browser`, {
          web: { method: "CONNECT", target: "example.com:443" },
        });
        expect(via.web).toMatchObject({ status: 403, marker: "refused" });
      } finally {
        await env.api.getContainer(web.id).remove({ force: true });
        await env.api.getNetwork(web.network).remove();
      }
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
});
