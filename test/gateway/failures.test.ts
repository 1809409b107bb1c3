// What the client sees, and what the log says, when an upstream fails.
import { spawn, type ChildProcess } from "node:child_process";
import http from "node:http";
import net, { type AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startUpstream, type Upstream } from "../helpers/servers";
import { CONTROL, request, startGateway, type GatewayProcess } from "./helpers";

const IDLE_MS = 400;
const CONNECT_MS = 700;

/**
 * A TCP port whose accept queue is full: a listener with backlog 0 that never accepts,
 * holding one connection already, so the kernel drops further SYNs and a connect hangs
 * (what an unreachable host looks like), all on loopback.
 */
async function startBlackhole(): Promise<{ port: number; close(): void }> {
  const listener: ChildProcess = spawn("python3", [
    "-c",
    "import socket,time\ns=socket.socket()\ns.bind(('127.0.0.1',0))\ns.listen(0)\nprint(s.getsockname()[1],flush=True)\ntime.sleep(120)",
  ]);
  const port = await new Promise<number>((resolve) =>
    listener.stdout!.once("data", (data) => resolve(Number(String(data).trim()))),
  );
  const filler = net.connect(port, "127.0.0.1");
  await new Promise((resolve) => filler.once("connect", resolve));
  return {
    port,
    close: () => {
      filler.destroy();
      listener.kill();
    },
  };
}

async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/**
 * An upstream that answers the first request on each connection with keep-alive, then resets
 * the connection when a second request arrives on it: what a server that timed a kept-alive
 * connection out just as the request went looks like.
 */
function startResettingUpstream(): Promise<{ port: number; connections: () => number; close(): void }> {
  let connections = 0;
  const server = net.createServer((socket) => {
    connections++;
    let requests = 0;
    let buffered = "";
    socket.on("data", (chunk) => {
      buffered += chunk.toString("latin1");
      while (buffered.includes("\r\n\r\n")) {
        buffered = buffered.slice(buffered.indexOf("\r\n\r\n") + 4);
        if (++requests === 1) socket.write("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
        else socket.resetAndDestroy();
      }
    });
    socket.on("error", () => undefined);
  });
  return new Promise((resolve) =>
    server.listen(0, "127.0.0.1", () =>
      resolve({
        port: (server.address() as AddressInfo).port,
        connections: () => connections,
        close: () => server.close(),
      }),
    ),
  );
}

describe("gateway upstream failures", () => {
  let gateway: GatewayProcess;
  let upstream: Upstream;
  let blackhole: Awaited<ReturnType<typeof startBlackhole>>;
  let resetting: Awaited<ReturnType<typeof startResettingUpstream>>;
  let upstreamSawClose: (afterBytes: number) => void = () => undefined;

  beforeAll(async () => {
    upstream = await startUpstream((req, res) => {
      if (req.url === "/stall-mid-body") {
        res.writeHead(200, { "Content-Length": "100" });
        res.write("0123456789"); // then nothing, ever
        return;
      }
      if (req.url === "/stall-before-head") return; // accepts, never answers
      if (req.url === "/slow-but-moving") {
        // Takes longer than the idle timeout in all, but is never idle that long.
        res.writeHead(200, { "Content-Type": "text/plain" });
        let sent = 0;
        const timer = setInterval(() => {
          res.write(`${sent}\n`);
          if (++sent === 8) {
            clearInterval(timer);
            res.end();
          }
        }, IDLE_MS / 3);
        return;
      }
      if (req.url === "/endless") {
        res.writeHead(200, { "Content-Type": "application/octet-stream" });
        let sent = 0;
        const timer = setInterval(() => {
          res.write(Buffer.alloc(1024));
          sent += 1024;
        }, 20);
        res.on("close", () => {
          clearInterval(timer);
          upstreamSawClose(sent);
        });
        return;
      }
      res.end("ok");
    });
    blackhole = await startBlackhole();
    resetting = await startResettingUpstream();
    gateway = await startGateway({
      idleTimeoutMs: IDLE_MS,
      connectTimeoutMs: CONNECT_MS,
      sites: {
        shop: { server: upstream.url },
        down: { server: `http://127.0.0.1:${await closedPort()}` },
        unreachable: { server: `http://127.0.0.1:${blackhole.port}` },
        resetting: { server: `http://127.0.0.1:${resetting.port}` },
      },
    });
  });
  afterAll(async () => {
    await gateway?.stop();
    blackhole?.close();
    resetting?.close();
    await upstream?.close();
  });

  it("answers a refused connection with 502 JSON naming the error", async () => {
    const answer = await request(`${gateway.url}/svc/down/x`);
    expect(answer.status).toBe(502);
    expect(answer.headers["content-type"]).toBe("application/json");
    const body = JSON.parse(answer.body);
    expect(body).toMatchObject({ error: "upstream connect failed", site: "down" });
    expect(body.detail).toContain("ECONNREFUSED");
  });

  it("answers a connection that does not complete within the connect timeout with 502 JSON", async () => {
    const started = Date.now();
    const answer = await request(`${gateway.url}/svc/unreachable/x`);
    const took = Date.now() - started;
    expect(answer.status).toBe(502);
    expect(JSON.parse(answer.body)).toMatchObject({ error: "upstream connect timeout", site: "unreachable" });
    expect(took).toBeGreaterThanOrEqual(CONNECT_MS - 50);
    expect(took).toBeLessThan(CONNECT_MS + 2_000);
  });

  it("answers an upstream that accepts but never answers with 502 JSON after the idle timeout", async () => {
    const answer = await request(`${gateway.url}/svc/shop/stall-before-head`);
    expect(answer.status).toBe(502);
    expect(JSON.parse(answer.body)).toMatchObject({ error: "upstream idle timeout", site: "shop" });
  });

  it("cuts an upstream that stalls mid-body after the idle timeout and logs the bytes sent", async () => {
    const started = Date.now();
    const outcome = await new Promise<{ received: string; error?: string }>((resolve) => {
      http.get(`${gateway.url}/svc/shop/stall-mid-body`, { agent: false, headers: CONTROL }, (res) => {
        let received = "";
        res.setEncoding("utf8");
        res.on("data", (chunk: string) => (received += chunk));
        res.on("error", (error) => resolve({ received, error: error.message }));
        res.on("end", () => resolve({ received }));
      });
    });
    expect(outcome.received).toBe("0123456789");
    expect(outcome.error).toBeDefined(); // the client sees a short body, not a complete one
    expect(Date.now() - started).toBeGreaterThanOrEqual(IDLE_MS - 50);
    const line = await gateway.waitForLog(
      (entry) => entry.event === "upstream-idle-timeout" && entry.path === "/stall-mid-body",
    );
    expect(line).toMatchObject({ site: "shop", bytesSent: 10, idleTimeoutMs: IDLE_MS });
  });

  it("does not cut a slow exchange that keeps moving: the timeout is idle time, not a ceiling", async () => {
    const started = Date.now();
    const answer = await request(`${gateway.url}/svc/shop/slow-but-moving`);
    expect(Date.now() - started).toBeGreaterThan(IDLE_MS * 2);
    expect(answer.status).toBe(200);
    expect(answer.body).toBe("0\n1\n2\n3\n4\n5\n6\n7\n");
  });

  it("keeps reused upstream connections usable after an idle-timed exchange", async () => {
    for (let i = 0; i < 3; i++) {
      const answer = await request(`${gateway.url}/svc/shop/plain`);
      expect(answer.body).toBe("ok");
      // longer than the idle timeout, between requests
      await new Promise((resolve) => setTimeout(resolve, IDLE_MS + 100));
    }
  });

  it("answers a response head it cannot forward with 502, and keeps serving", async () => {
    const odd = net.createServer((socket) => {
      socket.once("data", () => socket.end("HTTP/1.1 099 Odd\r\nContent-Length: 0\r\n\r\n"));
      socket.on("error", () => undefined);
    });
    await new Promise<void>((resolve) => odd.listen(0, "127.0.0.1", resolve));
    const oddGateway = await startGateway({
      sites: {
        odd: { server: `http://127.0.0.1:${(odd.address() as AddressInfo).port}` },
        shop: { server: upstream.url },
      },
    });
    try {
      const answer = await request(`${oddGateway.url}/svc/odd/`);
      expect(answer.status).toBe(502);
      expect(JSON.parse(answer.body)).toMatchObject({ error: "upstream failed", site: "odd" });
      expect((await request(`${oddGateway.url}/svc/shop/plain`)).body).toBe("ok");
    } finally {
      await oddGateway.stop();
      odd.close();
    }
  });

  it("sends a bodiless request again on a new connection when its kept-alive one was closed by the upstream", async () => {
    for (let i = 0; i < 3; i++) {
      const answer = await request(`${gateway.url}/svc/resetting/again`);
      expect(answer.status, `request ${i}: ${answer.body}`).toBe(200);
      expect(answer.body).toBe("ok");
    }
    expect(resetting.connections()).toBe(3);
  });

  it("closes the upstream exchange when the client disconnects", async () => {
    const closed = new Promise<number>((resolve) => (upstreamSawClose = resolve));
    await new Promise<void>((resolve) => {
      const req = http.get(`${gateway.url}/svc/shop/endless`, { agent: false, headers: CONTROL }, (res) => {
        res.once("data", () => {
          req.destroy();
          resolve();
        });
      });
      req.on("error", () => undefined);
    });
    const started = Date.now();
    await closed;
    // Well before the idle timeout: the disconnect itself closed it.
    expect(Date.now() - started).toBeLessThan(IDLE_MS);
  });
});
