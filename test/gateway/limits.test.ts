// Bounded resources: a client cannot hold a connection by trickling its request head.
import net from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { echoHandler, startGateway, startUpstream, type GatewayProcess, type Upstream } from "./helpers";

const HEADERS_TIMEOUT_MS = 600;

/** Opens a connection, writes `first`, then `drip` every `everyMs`; resolves with what came back and when the gateway closed it. */
function trickle(port: number, first: string, drip: string, everyMs: number, giveUpMs: number): Promise<{ answer: string; closedAfterMs: number | undefined }> {
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

  beforeAll(async () => {
    site = await startUpstream(echoHandler("site"));
    gateway = await startGateway({ headersTimeoutMs: HEADERS_TIMEOUT_MS, sites: { shop: { server: site.url } } });
  });
  afterAll(async () => {
    await gateway?.stop();
    await site?.close();
  });

  it("answers 408 and closes a connection whose request head trickles in slower than the bound", async () => {
    const { answer, closedAfterMs } = await trickle(gateway.port, "GET /svc/shop/slow HTTP/1.1\r\nHost: gw\r\n", "X-Drip: 1\r\n", 100, 5_000);
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
    const { answer } = await trickle(gateway.port, "POST /svc/shop/upload HTTP/1.1\r\nHost: gw\r\nContent-Length: 8\r\nConnection: close\r\n\r\n", "x", 250, 4_000);
    expect(answer.split("\r\n")[0]).toBe("HTTP/1.1 200 OK");
    expect(answer).toContain('"body":"xxxxxxxx"');
  });
});
