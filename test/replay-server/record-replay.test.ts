// Record once, replay twice: a live site (a node server here) whose page changes with the time and a random value,
// an XHR polled three times with three answers and a form POST, recorded by Playwright's recordHar in a real
// Chromium; the live site stopped; the replay server over that HAR file. The same scripted agent sees the same DOM
// as when recording, twice in a row, and a request the recording lacks is a logged miss.
import http from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { chromium, type Browser } from "playwright-core";
import { request as undiciRequest } from "undici";
import { cleanup, tempDir } from "../helpers/processes";
import { bearer, startReplayServer, type ReplayServerProcess } from "./helpers";

const HOST = "shop.example";

/** The live site: each answer differs from the last. */
function startLiveSite(): Promise<http.Server> {
  let polls = 0;
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk) => chunks.push(chunk));
    req.on("end", () => {
      const body = Buffer.concat(chunks).toString();
      res.setHeader("Cache-Control", "no-store");
      if (req.url === "/") {
        res.setHeader("Content-Type", "text/html; charset=utf-8");
        res.end(`<!doctype html><html><head><title>live</title></head><body>
<p id="time">${new Date().toISOString()}</p><p id="rand">${Math.random()}</p><ol id="polls"></ol>
<form method="post" action="/submit"><input name="who" value="ann"><input type="hidden" name="nonce" value="${Math.random()}"><button>go</button></form>
<script>
(async () => {
  for (let i = 0; i < 3; i++) {
    const answer = await (await fetch("/api/count?t=" + Date.now())).json();
    const li = document.createElement("li"); li.textContent = answer.count + " " + answer.at; document.getElementById("polls").append(li);
  }
  document.body.dataset.polled = "yes";
})();
</script></body></html>`);
      } else if (req.url?.startsWith("/api/count")) {
        polls += 1;
        res.setHeader("Content-Type", "application/json");
        res.end(JSON.stringify({ count: polls, at: Date.now() }));
      } else if (req.url === "/submit" && req.method === "POST") {
        const form = new URLSearchParams(body);
        res.setHeader("Content-Type", "text/html; charset=utf-8");
        res.end(
          `<!doctype html><html><head></head><body><p id="done">thanks ${form.get("who")} at ${Date.now()}</p></body></html>`,
        );
      } else {
        res.statusCode = 404;
        res.end();
      }
    });
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server)));
}

/** The scripted agent: the page after its three polls, then the page its form leads to. */
async function agent(browser: Browser, recordHar?: string): Promise<string[]> {
  const context = await browser.newContext(recordHar ? { recordHar: { path: recordHar, content: "embed" } } : {});
  const page = await context.newPage();
  await page.goto(`http://${HOST}/`);
  await page.waitForSelector("body[data-polled]");
  const first = await page.innerHTML("body");
  await Promise.all([page.waitForURL(`http://${HOST}/submit`), page.click("button")]);
  const second = await page.innerHTML("body");
  await context.close();
  return [first, second];
}

const launch = (port: number) =>
  chromium.launch({
    executablePath: "/usr/bin/chromium",
    args: ["--no-sandbox", `--host-resolver-rules=MAP ${HOST} 127.0.0.1:${port}`],
  });

/** The DOM without the determinism script, which only a replayed page holds. */
const withoutInjected = (html: string) => html.replace(/^<script>\(\(\)=>\{"use strict";.*?<\/script>/s, "");

describe("record with Playwright, replay offline", () => {
  let recorded: string[];
  let server: ReplayServerProcess;
  let browser: Browser;
  let file: string;

  beforeAll(async () => {
    file = join(tempDir("multienv-replay-record-"), "recording.har");
    const live = await startLiveSite();
    const recorder = await launch((live.address() as AddressInfo).port);
    recorded = await agent(recorder, file);
    await recorder.close();
    await new Promise((resolve) => {
      live.closeAllConnections();
      live.close(resolve);
    });
    server = await startReplayServer(file, { ignoreParams: ["t"], ignoreBodyFields: ["nonce"] });
    browser = await launch(server.port);
  });
  afterAll(async () => {
    await browser?.close();
    await server?.stop();
    await cleanup();
  });

  /** One episode: the replay reset (as the runner's reset does), then the agent; its counters. */
  async function episode(replay = server, on = browser): Promise<{ dom: string[]; counters: Record<string, number> }> {
    const reset = await undiciRequest(`${replay.control}/replay/v1/reset`, { method: "POST", headers: bearer });
    await reset.body.dump();
    const dom = await agent(on);
    const counters = await undiciRequest(`${replay.control}/replay/v1/counters`, { headers: bearer });
    return { dom, counters: (await counters.body.json()) as Record<string, number> };
  }

  it("shows the same scripted agent the DOM it saw when recording, in two episodes in a row", async () => {
    const { dom: first, counters } = await episode();
    const { dom: second } = await episode();
    expect(second).toEqual(first);
    // The body as recorded: the server's time and random value, the three polls' three answers, the form's answer.
    expect(first.map(withoutInjected)).toEqual(recorded);
    expect(recorded[0]).toMatch(/<li>1 \d+<\/li><li>2 \d+<\/li><li>3 \d+<\/li>/);
    // The page, three polls (their `t` ignored), the form POST (its nonce ignored) and the page it leads to: exact;
    // a favicon, which the recording may lack, the one miss there may be.
    expect(counters.exact).toBe(5);
    expect(counters.fuzzy).toBe(0);
    expect(counters.missed).toBeLessThanOrEqual(1);
  });

  it("without ignore lists, answers the changed poll URLs fuzzily, still in recorded order", async () => {
    const plain = await startReplayServer(file);
    const plainBrowser = await launch(plain.port);
    try {
      const { dom, counters } = await episode(plain, plainBrowser);
      expect(dom.map(withoutInjected)).toEqual(recorded);
      // The page, and the form (its nonce is the replayed page's, so the recorded one): exact; the three polls, whose
      // `t` is now the frozen clock's, never a recorded one: fuzzy, and still their three answers in order.
      expect([counters.exact, counters.fuzzy]).toEqual([2, 3]);
    } finally {
      await plainBrowser.close();
      await plain.stop();
    }
  });

  it("answers what the recording lacks with a logged miss, never the live site", async () => {
    const answer = await undiciRequest(`http://127.0.0.1:${server.port}/api/other`, {
      headers: { "X-Forwarded-Host": HOST },
    });
    await answer.body.dump();
    expect([answer.statusCode, answer.headers["x-agentenv-replay"]]).toEqual([404, "miss"]);
    await server.waitForLog((line) => line.event === "replay-miss" && line.url === `http://${HOST}/api/other`);
  });
});
