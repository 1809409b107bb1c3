// The replay server as a real process on loopback, over a HAR file, with real clients (undici, ws, raw sockets):
// what it answers, what it never sends, misses, repeats and their reset, the counters, WebSockets played back, and
// the one line a bad config or recording gets.
import { spawnSync } from "node:child_process";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { request as undiciRequest } from "undici";
import { WebSocket } from "ws";
import { cleanup } from "../helpers/processes";
import { rawExchange } from "../helpers/servers";
import {
  bearer,
  entry,
  har,
  harFile,
  REPLAY_SERVER_ARGS,
  REPLAY_TOKEN,
  startReplayServer,
  type ReplayServerProcess,
} from "./helpers";

const SITE = { "X-Forwarded-Host": "shop.example", "X-Forwarded-Proto": "https" };

async function get(
  url: string,
  headers: Record<string, string> = SITE,
  method: "GET" | "HEAD" | "POST" = "GET",
  body?: string,
) {
  const answer = await undiciRequest(url, { method, headers, body });
  return { status: answer.statusCode, headers: answer.headers, body: await answer.body.text() };
}

function wsOpen(
  url: string,
  protocols: string[] = [],
): Promise<{ ws: WebSocket; frames: string[]; protocol: string; marker: string | undefined }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, protocols, { headers: SITE });
    const frames: string[] = [];
    let marker: string | undefined;
    ws.on("upgrade", (res) => (marker = res.headers["x-agentenv-replay"] as string | undefined));
    ws.on("message", (data, binary) =>
      frames.push(binary ? `binary:${(data as Buffer).toString("hex")}` : data.toString()),
    );
    ws.once("open", () => resolve({ ws, frames, protocol: ws.protocol, marker }));
    ws.once("unexpected-response", (_req, res) =>
      reject(new Error(`status ${res.statusCode} ${res.headers["x-agentenv-replay"]}`)),
    );
    ws.once("error", reject);
  });
}

async function framesUntil(frames: string[], count: number): Promise<string[]> {
  for (let i = 0; i < 400 && frames.length < count; i++) await new Promise((r) => setTimeout(r, 10));
  return [...frames];
}

describe("replay server", () => {
  let server: ReplayServerProcess;

  beforeAll(async () => {
    const form = "application/x-www-form-urlencoded";
    const file = harFile(
      har([
        entry("https://shop.example/", {
          headers: [
            ["Content-Type", "text/plain"],
            ["Content-Encoding", "gzip"],
            ["Content-Length", "9999"],
            ["Transfer-Encoding", "chunked"],
            ["Connection", "keep-alive, X-Hop"],
            ["X-Hop", "connection-only"],
            ["Set-Cookie", "a=1; Path=/"],
            ["Set-Cookie", "b=2; Path=/"],
            ["X-Evil", "x\r\nX-Injected: yes"],
            ["Date", "Fri, 01 Mar 2024 12:00:01 GMT"],
          ],
          body: "home page",
        }),
        entry("https://shop.example/api/poll", { body: "one", mimeType: "application/json" }),
        entry("https://shop.example/api/poll", { body: "two", mimeType: "application/json" }),
        entry("https://shop.example/api/poll", { body: "three", mimeType: "application/json" }),
        entry("https://shop.example/login", {
          method: "POST",
          postData: { mimeType: form, text: "user=ann&password=pw" },
          status: 303,
          statusText: "See Other",
          headers: { Location: "/account" },
        }),
        entry("https://shop.example/logo.png", {
          body: "\x89PNG",
          base64: true,
          mimeType: "image/png",
          headers: { "Content-Type": "image/png" },
        }),
        entry("wss://shop.example/live", {
          status: 101,
          headers: { Upgrade: "websocket", Connection: "Upgrade", "Sec-WebSocket-Protocol": "chat" },
          webSocketMessages: [
            { type: "receive", time: 1, opcode: 1, data: "welcome" },
            { type: "send", time: 2, opcode: 1, data: "a" },
            { type: "receive", time: 3, opcode: 1, data: "echo a" },
            { type: "receive", time: 4, opcode: 2, data: Buffer.from([1, 2, 3]).toString("base64") },
            { type: "send", time: 5, opcode: 1, data: "b" },
            { type: "receive", time: 6, opcode: 1, data: "echo b" },
          ],
        }),
      ]),
    );
    server = await startReplayServer(file, { maxBodyBytes: 1024 });
  });
  afterAll(async () => {
    await server?.stop();
    await cleanup();
  });

  it("answers the recorded status, headers and body, framing recomputed and the connection's headers dropped", async () => {
    const answer = await get(`${server.url}/`);
    expect(answer.status).toBe(200);
    expect(answer.body).toBe("home page");
    expect(answer.headers["content-length"]).toBe("9");
    expect(answer.headers["content-encoding"]).toBeUndefined();
    expect(answer.headers["x-hop"]).toBeUndefined();
    expect(answer.headers["set-cookie"]).toEqual(["a=1; Path=/", "b=2; Path=/"]);
    expect(answer.headers["date"]).toBe("Fri, 01 Mar 2024 12:00:01 GMT");
    expect(answer.headers["x-agentenv-replay"]).toBe("exact");
    const png = await undiciRequest(`${server.url}/logo.png`, { headers: SITE });
    expect(Buffer.from(await png.body.arrayBuffer())).toEqual(Buffer.from("\x89PNG"));
  });

  it("never lets a recorded header value add a header of its own (raw bytes on the socket)", async () => {
    const raw = (
      await rawExchange(
        server.port,
        "GET / HTTP/1.1\r\nHost: x\r\nX-Forwarded-Host: shop.example\r\nX-Forwarded-Proto: https\r\nConnection: close\r\n\r\n",
      )
    ).toString("latin1");
    expect(raw.startsWith("HTTP/1.1 200 OK\r\n")).toBe(true);
    expect(raw).not.toMatch(/X-Injected/i);
    expect(raw).not.toMatch(/^X-Evil/im);
    expect(raw.endsWith("\r\n\r\nhome page")).toBe(true);
  });

  it("answers HEAD with the GET's headers and length, and no body", async () => {
    const answer = await get(`${server.url}/`, SITE, "HEAD");
    expect([answer.status, answer.headers["content-length"], answer.body]).toEqual([200, "9", ""]);
  });

  it("answers a recorded form POST, its fields in any order", async () => {
    const answer = await undiciRequest(`${server.url}/login`, {
      method: "POST",
      headers: { ...SITE, "Content-Type": "application/x-www-form-urlencoded" },
      body: "password=pw&user=ann",
    });
    await answer.body.dump();
    expect([answer.statusCode, answer.headers.location, answer.headers["x-agentenv-replay"]]).toEqual([
      303,
      "/account",
      "exact",
    ]);
  });

  it("refuses a body larger than it holds to compare", async () => {
    const answer = await get(
      `${server.url}/login`,
      { ...SITE, "Content-Type": "text/plain" },
      "POST",
      "x".repeat(5000),
    );
    expect(answer.status).toBe(413);
  });

  it("answers a miss with 404 marked miss and a replay-miss line naming the nearest recorded URL, never the network", async () => {
    const answer = await get(`${server.url}/api/pol?x=1`);
    expect(answer.status).toBe(404);
    expect(answer.headers["x-agentenv-replay"]).toBe("miss");
    const line = await server.waitForLog(
      (l) => l.event === "replay-miss" && l.url === "https://shop.example/api/pol?x=1",
    );
    expect(line).toMatchObject({ method: "GET", nearest: "https://shop.example/api/poll" });
    const otherHost = await get(`${server.url}/`, { "X-Forwarded-Host": "cdn.example", "X-Forwarded-Proto": "https" });
    expect([otherHost.status, otherHost.headers["x-agentenv-replay"]]).toEqual([404, "miss"]);
  });

  it("refuses a service worker's script", async () => {
    const answer = await get(`${server.url}/`, { ...SITE, "Service-Worker": "script" });
    expect([answer.status, answer.headers["x-agentenv-replay"]]).toEqual([404, "refused"]);
  });

  it("answers a poll in recorded order then the last again, counts each, and starts over after a reset", async () => {
    // This test's own episode.
    await undiciRequest(`${server.control}/replay/v1/reset`, { method: "POST", headers: bearer }).then((r) =>
      r.body.dump(),
    );
    const polls = [];
    for (let i = 0; i < 4; i++) polls.push((await get(`${server.url}/api/poll`)).body);
    expect(polls).toEqual(["one", "two", "three", "three"]);
    await get(`${server.url}/api/poll?cache=1`); // same path, a query never recorded: fuzzy
    await get(`${server.url}/nowhere`);
    const counters = await undiciRequest(`${server.control}/replay/v1/counters`, { headers: bearer });
    expect(await counters.body.json()).toEqual({ exact: 4, fuzzy: 1, missed: 1 });
    const reset = await undiciRequest(`${server.control}/replay/v1/reset`, { method: "POST", headers: bearer });
    expect(await reset.body.json()).toEqual({ ended: { exact: 4, fuzzy: 1, missed: 1 } });
    expect((await get(`${server.url}/api/poll`)).body).toBe("one");
  });

  it("gives identical requests arriving at once each its own recorded answer", async () => {
    await undiciRequest(`${server.control}/replay/v1/reset`, { method: "POST", headers: bearer }).then((r) =>
      r.body.dump(),
    );
    const answers = await Promise.all([1, 2, 3].map(() => get(`${server.url}/api/poll`)));
    expect(answers.map((a) => a.body).sort()).toEqual(["one", "three", "two"]);
  });

  it("serves its control routes to the token alone, on the control listener alone", async () => {
    for (const headers of [{}, { Authorization: "Bearer wrong-token-0123456789abcdefghijklmnop" }]) {
      const answer = await undiciRequest(`${server.control}/replay/v1/reset`, { method: "POST", headers });
      await answer.body.dump();
      expect(answer.statusCode).toBe(401);
    }
    const health = await undiciRequest(`${server.control}/healthz`, { headers: bearer });
    expect(await health.body.json()).toEqual({ ok: true, hosts: ["shop.example"] });
    // On the site's listener the path is the recorded site's: a miss, not the control route.
    const onSite = await get(`${server.url}/replay/v1/counters`, { ...SITE, Authorization: `Bearer ${REPLAY_TOKEN}` });
    expect([onSite.status, onSite.headers["x-agentenv-replay"]]).toEqual([404, "miss"]);
  });

  it("plays a WebSocket back: the server's frames in order, each after the client frame that preceded it", async () => {
    const { ws, frames, protocol, marker } = await wsOpen(`ws://127.0.0.1:${server.port}/live`, ["chat"]);
    expect([protocol, marker]).toEqual(["chat", "exact"]);
    expect(await framesUntil(frames, 1)).toEqual(["welcome"]);
    ws.send("not what was recorded");
    expect(await framesUntil(frames, 3)).toEqual(["welcome", "echo a", "binary:010203"]);
    ws.send("b");
    expect(await framesUntil(frames, 4)).toEqual(["welcome", "echo a", "binary:010203", "echo b"]);
    ws.close();
  });

  it("answers a WebSocket handshake the recording lacks with 404 marked miss", async () => {
    await expect(wsOpen(`ws://127.0.0.1:${server.port}/other`)).rejects.toThrow("status 404 miss");
  });
});

describe("replay server start-up", () => {
  const run = (env: Record<string, string>) =>
    spawnSync(process.execPath, REPLAY_SERVER_ARGS, {
      env: { ...process.env, ...env },
      encoding: "utf8",
      timeout: 30_000,
    });

  it("exits 2 with one line naming the field of a bad config", () => {
    const result = run({
      MULTIENV_REPLAY_SERVER_CONFIG: JSON.stringify({ listen: { host: "127.0.0.1", port: 0 }, recording: "/x.har" }),
      MULTIENV_REPLAY_SERVER_TOKEN: REPLAY_TOKEN,
    });
    expect(result.status).toBe(2);
    expect(result.stderr.trim().split("\n")).toHaveLength(1);
    expect(result.stderr).toContain("MULTIENV_REPLAY_SERVER_CONFIG.control");
  });

  it("exits 2 with one line naming a recording that is not HAR", () => {
    const file = harFile("not json");
    const result = run({
      MULTIENV_REPLAY_SERVER_CONFIG: JSON.stringify({
        listen: { host: "127.0.0.1", port: 0 },
        control: { host: "127.0.0.1", port: 0 },
        recording: file,
      }),
      MULTIENV_REPLAY_SERVER_TOKEN: REPLAY_TOKEN,
    });
    expect(result.status).toBe(2);
    expect(result.stderr.trim().split("\n")).toHaveLength(1);
    expect(result.stderr).toContain(`recording ${file}: is not JSON`);
  });
});
