// Bounded resources: a client cannot hold a connection by trickling its request head, and a
// file in the captures folder that is not a regular file (a FIFO, a link to one, a directory
// named like a capture) never blocks the gateway's thread pool or event loop.
import { mkdtempSync, rmSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { echoHandler, startUpstream, type Upstream } from "../helpers/servers";
import { hostileCaptureFiles } from "../capture-server/helpers";
import { CONTROL_LINE, request, startGateway, TOKEN, type GatewayProcess } from "./helpers";

const HEADERS_TIMEOUT_MS = 600;
const AUTH = { Authorization: `Bearer ${TOKEN}` };

/**
 * Opens a connection, writes `first`, then `drip` every `everyMs`; resolves with what came back and when the gateway
 * closed it.
 */
function trickle(
  port: number,
  first: string,
  drip: string,
  everyMs: number,
  giveUpMs: number,
): Promise<{ answer: string; closedAfterMs: number | undefined }> {
  return new Promise((resolve) => {
    const started = Date.now();
    const socket = net.connect(port, "127.0.0.1");
    let answer = "";
    const timer = setInterval(() => socket.writable && socket.write(drip), everyMs);
    const giveUp = setTimeout(() => finish(undefined), giveUpMs);
    const finish = (closedAfterMs: number | undefined) => {
      clearInterval(timer);
      clearTimeout(giveUp);
      socket.destroy();
      resolve({ answer, closedAfterMs });
    };
    socket.on("data", (chunk) => (answer += chunk.toString("latin1")));
    socket.on("close", () => finish(Date.now() - started));
    socket.on("error", () => undefined);
    if (first) socket.write(first);
  });
}

describe("gateway resource bounds", () => {
  let gateway: GatewayProcess;
  let site: Upstream;
  let dir: string;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "multienv-limits-"));
    hostileCaptureFiles(dir, "shop-server"); // shop-server.pcap3 the one real capture
    site = await startUpstream(echoHandler("site"));
    gateway = await startGateway({
      headersTimeoutMs: HEADERS_TIMEOUT_MS,
      capturesDir: dir,
      sites: { shop: { server: site.url } },
    });
  });
  afterAll(async () => {
    await gateway?.stop();
    await site?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("answers 408 and closes a connection whose request head trickles in slower than the bound", async () => {
    const { answer, closedAfterMs } = await trickle(
      gateway.port,
      `GET /svc/shop/slow HTTP/1.1\r\nHost: gw\r\n${CONTROL_LINE}`,
      "X-Drip: 1\r\n",
      100,
      5_000,
    );
    expect(closedAfterMs).toBeDefined();
    expect(closedAfterMs!).toBeGreaterThanOrEqual(HEADERS_TIMEOUT_MS - 50);
    expect(closedAfterMs!).toBeLessThan(HEADERS_TIMEOUT_MS + 1_500);
    expect(answer.split("\r\n")[0]).toBe("HTTP/1.1 408 Request Timeout");
    const line = await gateway.waitForLog((entry) => entry.event === "request-refused" && entry.status === 408);
    expect(line).toMatchObject({ listener: "published", remote: "127.0.0.1" });
  });

  it("closes a connection that never sends a byte within the bound", async () => {
    const { closedAfterMs } = await trickle(gateway.port, "", "", 1_000_000, 5_000);
    expect(closedAfterMs).toBeDefined();
    expect(closedAfterMs!).toBeLessThan(HEADERS_TIMEOUT_MS + 1_500);
  });

  it("does not cut a request whose head came in time but whose body is slow and moving", async () => {
    const { answer } = await trickle(
      gateway.port,
      `POST /svc/shop/upload HTTP/1.1\r\nHost: gw\r\n${CONTROL_LINE}Content-Length: 8\r\nConnection: close\r\n\r\n`,
      "x",
      250,
      4_000,
    );
    expect(answer.split("\r\n")[0]).toBe("HTTP/1.1 200 OK");
    expect(answer).toContain('"body":"xxxxxxxx"');
  });

  it("lists only regular capture files, skipping a FIFO, links and a directory named like captures", async () => {
    const answer = await request(`${gateway.url}/traffic/v1/captures`, { headers: AUTH });
    expect(answer.status).toBe(200);
    expect((JSON.parse(answer.body).captures as Array<{ name: string }>).map((c) => c.name)).toEqual([
      "shop-server.pcap3",
    ]);
  });

  it("refuses to serve what is not a regular file, at once, and stays responsive with more such requests than thread-pool threads", async () => {
    const started = Date.now();
    const names = ["shop-server.pcap0", "shop-server.pcap1", "shop-server.pcap2", "shop-server.pcap4"];
    // libuv's pool has 4 threads: a blocking open of each FIFO request would take them all.
    const answers = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        request(`${gateway.url}/traffic/v1/captures/${names[i % names.length]}`, { headers: AUTH }),
      ),
    );
    for (const answer of answers) expect(answer.status).toBe(404);
    expect(Date.now() - started).toBeLessThan(3_000);
    const real = await request(`${gateway.url}/traffic/v1/captures/shop-server.pcap3`, { headers: AUTH });
    expect(real.status).toBe(200);
    expect(Number(real.headers["content-length"])).toBe(124);
    const line = await gateway.waitForLog(
      (entry) => entry.event === "request-refused" && entry.target === "/traffic/v1/captures/shop-server.pcap0",
    );
    expect(line).toMatchObject({ status: 404 });
  });

  it("answers /healthz without reading the FIFO", async () => {
    const started = Date.now();
    const health = await request(`${gateway.url}/healthz`);
    expect([200, 503]).toContain(health.status);
    expect(JSON.parse(health.body).missing).not.toContainEqual(
      expect.objectContaining({ detail: expect.stringContaining("pcap0") }),
    );
    expect(Date.now() - started).toBeLessThan(5_000);
  });
});
