// The replay server's limits held as an attacker would press them, the real server process on loopback: a large
// JSON body costs memory linear in its size and never holds up a request sent behind it; a WebSocket message over
// the body limit is refused by its declared length alone (raw frames on a socket); and a server killed mid-episode
// and started again on its state directory goes on with the episode's counters and repeats.
import http from "node:http";
import net from "node:net";
import { readFileSync } from "node:fs";
import { afterAll, describe, expect, it } from "vitest";
import { request as undiciRequest } from "undici";
import { cleanup, tempDir } from "../helpers/processes";
import { bearer, entry, har, harFile, startReplayServer, type ReplayServerProcess } from "./helpers";

const SITE = { "X-Forwarded-Host": "shop.example", "X-Forwarded-Proto": "https" };
const MIB = 1024 * 1024;

afterAll(cleanup);

/** A process's resident set and its peak, in bytes (Linux). */
function memoryOf(pid: number): { rss: number; peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const kb = (name: string) => Number(new RegExp(`${name}:\\s+(\\d+)`).exec(status)![1]) * 1024;
  return { rss: kb("VmRSS"), peak: kb("VmHWM") };
}

/** POSTs `body` to the server; resolves once its bytes are all handed to the socket, with the answer to come. */
function postWhole(port: number, path: string, body: Buffer): Promise<{ answered: Promise<number> }> {
  return new Promise((resolve, reject) => {
    const req = http.request({
      port,
      host: "127.0.0.1",
      path,
      method: "POST",
      headers: { ...SITE, "Content-Type": "application/json", "Content-Length": body.length },
    });
    const answered = new Promise<number>((done, failed) => {
      req.once("response", (res) => {
        res.resume();
        res.once("end", () => done(res.statusCode ?? 0));
      });
      req.once("error", failed);
    });
    answered.catch(() => undefined);
    req.once("error", reject);
    req.end(body, () => resolve({ answered }));
  });
}

const getBody = async (url: string) => (await undiciRequest(url, { headers: SITE })).body.text();

describe("a large request body", () => {
  let server: ReplayServerProcess;
  afterAll(() => server?.stop());

  it("is compared in memory linear in its size: a deep path's million leaves cost megabytes, not a label each", async () => {
    server = await startReplayServer(
      harFile(
        har([
          entry("https://shop.example/", { body: "home", mimeType: "text/plain" }),
          entry("https://shop.example/api/save", {
            method: "POST",
            postData: { mimeType: "application/json", text: '{"a":1}' },
            body: "saved",
          }),
        ]),
      ),
    );
    const pid = server.process.pid!;
    // 200 members deep, then an array of one-digit numbers: each leaf's label is 400 characters long.
    const depth = 200;
    const leaves = (MIB - depth * 6) / 2;
    const body = Buffer.from(`${'{"a":'.repeat(depth)}[${"1,".repeat(leaves - 1)}1]${"}".repeat(depth)}`);
    const before = memoryOf(pid);
    const { answered } = await postWhole(server.port, "/api/save", body);
    expect(await answered).toBe(200); // the same path: its fuzzy answer
    const after = memoryOf(pid);
    // The body's own bytes twice (its chunks and their concatenation) and 8 bytes a field, with room for the
    // allocator: far under the 400-character label per leaf (over 400 MB) the fields once cost.
    expect(after.peak - Math.max(before.peak, before.rss)).toBeLessThan(48 * MIB);
  });

  it("gives the loop back as it is read: a GET sent behind it is answered before it", async () => {
    // Two million numbers: many turns of the server's loop to read, where a GET can be answered in any one of them.
    const body = Buffer.from(`[${"1,".repeat(2 * MIB - 1)}1]`);
    const order: string[] = [];
    const { answered } = await postWhole(server.port, "/api/save", body);
    const post = answered.then(() => order.push("post"));
    const get = getBody(`${server.url}/`).then((text) => order.push(`get ${text}`));
    await Promise.all([post, get]);
    expect(order).toEqual(["get home", "post"]);
  });
});

/** A WebSocket opened by hand on a raw socket: the handshake, then whatever bytes the test writes. */
async function rawWebSocket(port: number, path: string): Promise<{ socket: net.Socket; received: () => Buffer }> {
  const socket = net.connect(port, "127.0.0.1");
  let buffered = Buffer.alloc(0);
  socket.on("data", (chunk: Buffer) => (buffered = Buffer.concat([buffered, chunk])));
  socket.on("error", () => undefined);
  await new Promise<void>((resolve) => socket.once("connect", () => resolve()));
  socket.write(
    `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Forwarded-Host: shop.example\r\nX-Forwarded-Proto: https\r\n` +
      "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n" +
      "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
  );
  for (let i = 0; i < 500 && !buffered.includes("\r\n\r\n"); i++) await new Promise((r) => setTimeout(r, 10));
  const head = buffered.subarray(0, buffered.indexOf("\r\n\r\n") + 4).toString("latin1");
  expect(head).toMatch(/^HTTP\/1\.1 101 /);
  buffered = buffered.subarray(head.length);
  return { socket, received: () => buffered };
}

/** A client frame's header: FIN, `opcode`, masked, a 64-bit payload length, the mask key. */
function frameHeader(opcode: number, length: number): Buffer {
  const header = Buffer.alloc(14);
  header[0] = 0x80 | opcode;
  header[1] = 0x80 | 127;
  header.writeBigUInt64BE(BigInt(length), 2);
  header.writeUInt32BE(0x01020304, 10);
  return header;
}

function maskedFrame(opcode: number, payload: Buffer): Buffer {
  const masked = Buffer.from(payload.map((byte, i) => byte ^ [1, 2, 3, 4][i % 4]));
  return Buffer.concat([frameHeader(opcode, payload.length), masked]);
}

describe("a WebSocket message", () => {
  let server: ReplayServerProcess;
  afterAll(() => server?.stop());

  it("over the body limit is refused by its declared length, the connection closed 1009 with a log line", async () => {
    server = await startReplayServer(
      harFile(
        har([
          entry("wss://shop.example/live", {
            status: 101,
            headers: { Upgrade: "websocket", Connection: "Upgrade" },
            webSocketMessages: [
              { type: "send", time: 1, opcode: 1, data: "hi" },
              { type: "receive", time: 2, opcode: 1, data: "hello" },
            ],
          }),
        ]),
      ),
      { maxBodyBytes: 64 * 1024 },
    );
    // A message within the limit is taken and paces the replay.
    const within = await rawWebSocket(server.port, "/live");
    within.socket.write(maskedFrame(1, Buffer.alloc(60 * 1024, 0x61)));
    for (let i = 0; i < 500 && !within.received().includes("hello"); i++) await new Promise((r) => setTimeout(r, 10));
    expect(within.received().subarray(2).toString()).toBe("hello");
    within.socket.destroy();

    // Only the header of a 1 MiB message: the server must not wait for (or hold) its bytes to refuse it.
    const over = await rawWebSocket(server.port, "/live");
    over.socket.write(frameHeader(1, MIB));
    for (let i = 0; i < 500 && over.received().length < 4; i++) await new Promise((r) => setTimeout(r, 10));
    const close = over.received();
    expect(close[0]).toBe(0x88); // FIN, close
    expect(close.readUInt16BE(2)).toBe(1009); // message too big
    over.socket.destroy();
    const line = await server.waitForLog((l) => l.event === "replay-websocket-refused");
    expect(line).toMatchObject({ url: "https://shop.example/live", limit: 64 * 1024 });
  });
});

describe("a replay server killed mid-episode", () => {
  it("goes on with the episode from its state directory: counters and repeats where they were, a reset kept too", async () => {
    const file = harFile(
      har(
        ["one", "two", "three"].map((body) =>
          entry("https://shop.example/api/poll", { body, mimeType: "application/json" }),
        ),
      ),
    );
    const stateDir = tempDir("multienv-replay-state-");
    const counters = async (s: ReplayServerProcess) =>
      (await undiciRequest(`${s.control}/replay/v1/counters`, { headers: bearer })).body.json();

    let server = await startReplayServer(file, { stateDir });
    expect(await getBody(`${server.url}/api/poll`)).toBe("one");
    expect(await getBody(`${server.url}/api/poll`)).toBe("two");
    await getBody(`${server.url}/nowhere`);
    // Asked in a later turn of its loop than the answers: what they changed is on disk by now.
    expect(await counters(server)).toEqual({ exact: 2, fuzzy: 0, missed: 1 });
    server.process.kill("SIGKILL");
    await server.stop();

    server = await startReplayServer(file, { stateDir });
    expect(await server.waitForLog((l) => l.event === "replay-restored")).toMatchObject({
      counters: { exact: 2, fuzzy: 0, missed: 1 },
      served: 2,
    });
    expect(await counters(server)).toEqual({ exact: 2, fuzzy: 0, missed: 1 });
    expect(await getBody(`${server.url}/api/poll`)).toBe("three");
    expect(await counters(server)).toEqual({ exact: 3, fuzzy: 0, missed: 1 });

    const reset = await undiciRequest(`${server.control}/replay/v1/reset`, { method: "POST", headers: bearer });
    expect(await reset.body.json()).toEqual({ ended: { exact: 3, fuzzy: 0, missed: 1 } });
    expect(await getBody(`${server.url}/api/poll`)).toBe("one");
    expect(await counters(server)).toEqual({ exact: 1, fuzzy: 0, missed: 0 });
    server.process.kill("SIGKILL");
    await server.stop();

    server = await startReplayServer(file, { stateDir });
    expect(await getBody(`${server.url}/api/poll`)).toBe("two");
    await server.stop();

    // Another recording in the same directory is a new episode, and says why.
    const other = harFile(har([entry("https://shop.example/api/poll", { body: "other" })]));
    server = await startReplayServer(other, { stateDir });
    expect(await server.waitForLog((l) => l.event === "replay-state-unreadable")).toMatchObject({
      error: "saved for another recording; a new episode",
    });
    expect(await counters(server)).toEqual({ exact: 0, fuzzy: 0, missed: 0 });
    await server.stop();
  });
});
