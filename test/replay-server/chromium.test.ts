// Determinism in a real Chromium: a replayed page that prints Date.now(), Math.random(), crypto.getRandomValues and
// crypto.randomUUID renders the same DOM on two loads, its clock at the recorded time advancing as WPR's does;
// service worker registration is refused; a page's recorded Content-Security-Policy does not block the script; a
// recorded WebSocket is played back to the page.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { chromium, type Browser } from "playwright-core";
import { cleanup } from "../helpers/processes";
import { entry, har, harFile, startReplayServer, type ReplayServerProcess } from "./helpers";

const RECORDED = "2024-03-01T12:00:00.000Z";

const PAGE = `<!doctype html><html><head><title>clock</title></head><body><pre id="out"></pre><script>
const seq = []; for (let i = 0; i < 26; i++) seq.push(Date.now());
const values = new Uint32Array(4); crypto.getRandomValues(values);
const out = { seq, iso: new Date().toISOString(), random: [Math.random(), Math.random()], values: [...values],
  uuid: crypto.randomUUID(), isDate: new Date() instanceof Date, year: new Date(2020, 0, 2).getFullYear(),
  asString: typeof Date() };
document.getElementById("out").textContent = JSON.stringify(out);
navigator.serviceWorker.register("/sw.js").then(() => "registered", (error) => error.name)
  .then((result) => { document.body.dataset.sw = result; });
</script></body></html>`;

const CHAT_PAGE = `<!doctype html><html><head></head><body><ol id="log"></ol><script>
const ws = new WebSocket("ws://shop.example/live", ["chat.v1"]);
const log = (text) => { const li = document.createElement("li"); li.textContent = text; document.getElementById("log").append(li); };
let sent = 0;
ws.onopen = () => log("open " + ws.protocol);
ws.onmessage = (event) => {
  log(event.data);
  if (sent < 2) ws.send("ping " + ++sent);
  else document.body.dataset.done = "yes";
};
</script></body></html>`;

const CORS_PAGE = `<!doctype html><html><head></head><body><p id="cart"></p><script>
fetch("http://api.shop.example/cart", { method: "POST", headers: { "Content-Type": "application/json" }, body: '{"item":7}' })
  .then((r) => r.text(), (e) => "failed: " + e.message)
  .then((text) => { document.getElementById("cart").textContent = text; });
</script></body></html>`;

const CSP_PAGE = `<!doctype html><html><head></head><body><p id="t"></p><script nonce="abc">
document.getElementById("t").textContent = String(Date.now());
</script></body></html>`;

describe("determinism in Chromium", () => {
  let server: ReplayServerProcess;
  let browser: Browser;

  beforeAll(async () => {
    const file = harFile(
      har([
        entry("http://shop.example/clock", { started: RECORDED, body: PAGE }),
        entry("http://shop.example/chat", { started: RECORDED, body: CHAT_PAGE }),
        entry("ws://shop.example/live", {
          started: RECORDED,
          status: 101,
          headers: { Upgrade: "websocket", Connection: "Upgrade", "Sec-WebSocket-Protocol": "chat.v1" },
          webSocketMessages: [
            { type: "receive", time: 1, opcode: 1, data: "welcome" },
            { type: "send", time: 2, opcode: 1, data: "ping 1" },
            { type: "receive", time: 3, opcode: 1, data: "pong 1" },
            { type: "send", time: 4, opcode: 1, data: "ping 2" },
            { type: "receive", time: 5, opcode: 1, data: "pong 2" },
          ],
        }),
        entry("http://www.shop.example/shop", { started: RECORDED, body: CORS_PAGE }),
        entry("http://api.shop.example/cart", {
          started: RECORDED,
          method: "POST",
          postData: { mimeType: "application/json", text: '{"item":7}' },
          headers: { "Content-Type": "application/json", "Access-Control-Allow-Origin": "http://www.shop.example" },
          body: '{"added":7}',
        }),
        entry("http://shop.example/csp", {
          started: RECORDED,
          body: CSP_PAGE,
          headers: { "Content-Type": "text/html", "Content-Security-Policy": "script-src 'nonce-abc'" },
        }),
      ]),
    );
    server = await startReplayServer(file);
    browser = await chromium.launch({
      executablePath: "/usr/bin/chromium",
      args: [
        "--no-sandbox",
        `--host-resolver-rules=MAP shop.example 127.0.0.1:${server.port}, MAP *.shop.example 127.0.0.1:${server.port}`,
        // A secure context (as the https site in an env is), so the page has service workers and randomUUID.
        "--unsafely-treat-insecure-origin-as-secure=http://shop.example",
      ],
    });
  });
  afterAll(async () => {
    await browser?.close();
    await server?.stop();
    await cleanup();
  });

  async function load(path: string, ready: string, host = "shop.example"): Promise<string> {
    const context = await browser.newContext();
    const page = await context.newPage();
    await page.goto(`http://${host}${path}`);
    await page.waitForSelector(ready);
    const html = await page.content();
    await context.close();
    return html;
  }

  it("renders the same DOM on two loads, its clock at the recorded time advancing 50 ms per 25 readings", async () => {
    const first = await load("/clock", "body[data-sw]");
    const second = await load("/clock", "body[data-sw]");
    expect(second).toBe(first);
    const out = JSON.parse(/<pre id="out">([^<]*)<\/pre>/.exec(first)![1].replace(/&quot;/g, '"'));
    const recorded = Date.parse(RECORDED);
    expect(out.seq.slice(0, 25)).toEqual(Array(25).fill(recorded));
    expect(out.seq[25]).toBe(recorded + 50);
    expect(out.random[0]).not.toBe(out.random[1]);
    expect(new Set(out.values).size).toBe(4);
    expect(out.uuid).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect([out.isDate, out.year, out.asString]).toEqual([true, 2020, "string"]);
    expect(first).toContain('data-sw="SecurityError"');
  });

  it("plays a recorded WebSocket back to the page, each answer after the page's message", async () => {
    const html = await load("/chat", "body[data-done]");
    const items = [...html.matchAll(/<li>([^<]*)<\/li>/g)].map((match) => match[1]);
    expect(items).toEqual(["open chat.v1", "welcome", "pong 1", "pong 2"]);
  });

  it("answers a cross-origin request's preflight the recording lacks, so the page gets the recorded answer", async () => {
    const html = await load("/shop", "#cart:not(:empty)", "www.shop.example");
    // The JSON body makes Chromium ask first (OPTIONS); a preflight answered 404 would fail the fetch.
    expect(html).toContain('<p id="cart">{"added":7}</p>');
  });

  it("runs under the page's recorded Content-Security-Policy, which still holds for other inline scripts", async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    await page.goto("http://shop.example/csp");
    await page.waitForSelector("#t:not(:empty)");
    expect(await page.textContent("#t")).toBe(String(Date.parse(RECORDED)));
    // An inline script of no nonce or hash is still refused: the policy was widened for the injected script alone.
    await page.evaluate(
      'const s = document.createElement("script"); s.textContent = "document.body.dataset.ran = 1"; document.body.append(s)',
    );
    expect(await page.getAttribute("body", "data-ran")).toBeNull();
    await context.close();
  });
});
