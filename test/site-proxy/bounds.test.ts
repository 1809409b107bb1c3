// What a slow or greedy computer cannot make the proxy hold: a connection whose request head does not arrive in
// time (on the forward port, and inside the TLS the proxy terminates for a synthetic name) is dropped; the leaf
// certificates issued for names under a synthetic wildcard are kept up to a bound, least recently used first out.
import * as fs from "node:fs";
import * as net from "node:net";
import * as path from "node:path";
import * as tls from "node:tls";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ErrorRecord } from "../../src/protocol/site-proxy";
import { loadOrCreateCa, MAX_CACHED_LEAVES } from "../../src/site-proxy/ca";
import { cleanup, tempDir } from "../helpers/processes";
import { connectThrough, type ProxyProcess, startProxy } from "./helpers";
import { startHttpServer, type TestHttpServer } from "../helpers/servers";
import { until } from "../helpers/until";

const HEAD_TIMEOUT_MS = 1_000;
/** Scheduling slack on a loaded 2-core machine, plus the proxy's check interval (at most 1 s). */
const SLACK_MS = 2_000;

let gateway: TestHttpServer;
let proxy: ProxyProcess;

beforeAll(async () => {
  gateway = await startHttpServer(() => "page");
  proxy = await startProxy({
    gateway: gateway.url,
    sites: { shop: ["*.shop.test"] },
    headTimeoutMs: HEAD_TIMEOUT_MS,
    idleTimeoutMs: 60_000,
  });
});
afterAll(cleanup);

/** Resolves with how long `socket` stayed open (from now), or rejects after `limitMs`. */
function openFor(socket: net.Socket | tls.TLSSocket, limitMs: number): Promise<number> {
  const start = Date.now();
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`still open after ${limitMs} ms`)), limitMs);
    socket.on("error", () => {});
    socket.resume();
    socket.once("close", () => {
      clearTimeout(timer);
      resolve(Date.now() - start);
    });
  });
}

/** Writes `text` one byte every `everyMs` until the socket closes. */
function dribble(socket: net.Socket | tls.TLSSocket, text: string, everyMs = 150): void {
  let i = 0;
  const timer = setInterval(() => {
    if (socket.destroyed || i >= text.length) return clearInterval(timer);
    socket.write(text[i++]);
  }, everyMs);
  socket.once("close", () => clearInterval(timer));
}

describe("slow request heads", () => {
  it("drops a connection to the forward port that never sends a request", async () => {
    const before = proxy.records().length;
    const socket = net.connect(proxy.port, "127.0.0.1");
    await new Promise((resolve) => socket.once("connect", resolve));
    const ms = await openFor(socket, HEAD_TIMEOUT_MS + SLACK_MS);
    expect(ms).toBeGreaterThanOrEqual(HEAD_TIMEOUT_MS - 100);
    const record = await until("the error line", () =>
      proxy
        .records()
        .slice(before)
        .find((r): r is ErrorRecord => r.event === "error" && /no complete request head/.test(r.error)),
    );
    expect(record).toMatchObject({
      client: "127.0.0.1",
      error: `no complete request head within ${HEAD_TIMEOUT_MS} ms; connection dropped`,
    });
  });

  it("drops a connection that sends its request head a byte at a time, never finishing it in time", async () => {
    const socket = net.connect(proxy.port, "127.0.0.1");
    await new Promise((resolve) => socket.once("connect", resolve));
    dribble(socket, `GET http://a.shop.test/ HTTP/1.1\r\nHost: a.shop.test\r\nX-Slow: ${"x".repeat(200)}\r\n\r\n`);
    const ms = await openFor(socket, HEAD_TIMEOUT_MS + SLACK_MS);
    expect(ms).toBeGreaterThanOrEqual(HEAD_TIMEOUT_MS - 100);
  });

  it("keeps a kept-alive connection between requests for the idle timeout, not the head timeout", async () => {
    const socket = net.connect(proxy.port, "127.0.0.1");
    let text = "";
    socket.on("data", (d: Buffer) => (text += d.toString()));
    socket.write("GET http://a.shop.test/one HTTP/1.1\r\nHost: a.shop.test\r\n\r\n");
    await new Promise((r) => setTimeout(r, HEAD_TIMEOUT_MS * 2 + 500));
    expect(socket.destroyed).toBe(false);
    socket.write("GET http://a.shop.test/two HTTP/1.1\r\nHost: a.shop.test\r\nConnection: close\r\n\r\n");
    await new Promise((resolve) => socket.once("close", resolve));
    expect(text.match(/HTTP\/1\.1 200 /g)).toHaveLength(2);
  });

  it("drops a tunnel to a synthetic name whose TLS handshake stalls", async () => {
    const { socket, status } = await connectThrough(proxy.port, "stall.shop.test:443");
    expect(status).toBe(200);
    socket.write(Buffer.from([0x16, 0x03, 0x01])); // the start of a TLS record, and nothing more
    const ms = await openFor(socket, HEAD_TIMEOUT_MS + SLACK_MS);
    expect(ms).toBeGreaterThanOrEqual(HEAD_TIMEOUT_MS - 100);
  });

  it("drops a tunnel to a synthetic name whose request head inside TLS dribbles", async () => {
    const { socket } = await connectThrough(proxy.port, "slow.shop.test:443");
    const secure = tls.connect({ socket, servername: "slow.shop.test", ca: fs.readFileSync(proxy.caCertPath) });
    await new Promise<void>((resolve, reject) => secure.once("secureConnect", resolve).once("error", reject));
    dribble(secure, `GET / HTTP/1.1\r\nHost: slow.shop.test\r\nX-Slow: ${"x".repeat(200)}\r\n\r\n`);
    const ms = await openFor(secure, HEAD_TIMEOUT_MS + SLACK_MS);
    expect(ms).toBeLessThan(HEAD_TIMEOUT_MS + SLACK_MS);
    expect(gateway.requests.filter((r) => r.headers["x-slow"] !== undefined)).toEqual([]);
  });
});

describe("leaf certificates", () => {
  async function serialOf(ca: Awaited<ReturnType<typeof loadOrCreateCa>>, host: string): Promise<string> {
    const socket = new tls.TLSSocket(new net.Socket(), { secureContext: await ca.contextFor(host), isServer: true });
    const cert = socket.getCertificate() as tls.PeerCertificate;
    socket.destroy();
    return cert.serialNumber;
  }

  it("keeps the most recently used leaves up to the bound: one in use stays, one unused is issued anew", async () => {
    const ca = await loadOrCreateCa(undefined, path.join(tempDir(), "ca.pem"), 50);
    const kept = await serialOf(ca, "kept.shop.test");
    const first = await serialOf(ca, "first.shop.test");
    for (let i = 0; i < 200; i++) {
      await ca.contextFor(`n${i}.shop.test`);
      if (i % 10 === 0) expect(await serialOf(ca, "kept.shop.test")).toBe(kept);
      expect(ca.cachedLeaves()).toBeLessThanOrEqual(50);
    }
    expect(await serialOf(ca, "kept.shop.test")).toBe(kept);
    expect(await serialOf(ca, "first.shop.test")).not.toBe(first);
  });

  it(`holds at most ${MAX_CACHED_LEAVES} leaves by default, however many names under a wildcard are asked for`, async () => {
    const ca = await loadOrCreateCa(undefined, path.join(tempDir(), "ca.pem"));
    for (let i = 0; i < MAX_CACHED_LEAVES + 50; i++) await ca.contextFor(`n${i}.shop.test`);
    expect(ca.cachedLeaves()).toBe(MAX_CACHED_LEAVES);
  });
});
