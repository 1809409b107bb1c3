// The site proxy under pressure: more than 1,024 connections at once (no select()-style limit), 200
// concurrent tunnels, bad requests answered 400 with a log line and never a crash, and the supervisor starting the
// proxy again within 2 s of a kill -9.
import * as crypto from "node:crypto";
import * as fs from "node:fs";
import * as net from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ErrorRecord, RestartedRecord, StartupRecord } from "../../src/protocol/site-proxy";
import { cleanup } from "../helpers/processes";
import { closedPort } from "../helpers/ports";
import { connectThrough, curl, type ProxyProcess, startProxy } from "./helpers";
import { rawExchange, startEchoServer, startHttpServer } from "../helpers/servers";
import { until } from "../helpers/until";

let echoPort: number;
let proxy: ProxyProcess;

beforeAll(async () => {
  echoPort = (await startEchoServer()).port;
  proxy = await startProxy({}, { ulimit: 8192 });
});
afterAll(cleanup);

async function echoes(socket: net.Socket, payload: Buffer): Promise<boolean> {
  const received: Buffer[] = [];
  let length = 0;
  await new Promise<void>((resolve, reject) => {
    socket.on("data", (d: Buffer) => {
      received.push(d);
      length += d.length;
      if (length >= payload.length) resolve();
    });
    socket.once("error", reject);
    socket.write(payload);
  });
  socket.removeAllListeners("data");
  return Buffer.concat(received).equals(payload);
}

describe("robustness", () => {
  it("keeps more than 1,024 tunnels open at once, every one working", async () => {
    const sockets: net.Socket[] = [];
    try {
      for (let batch = 0; batch < 11; batch++) {
        const opened = await Promise.all(
          Array.from({ length: 100 }, () => connectThrough(proxy.port, `127.0.0.1:${echoPort}`)),
        );
        for (const { socket, status } of opened) {
          expect(status).toBe(200);
          sockets.push(socket);
        }
      }
      expect(sockets.length).toBe(1_100);
      // Each tunnel holds two descriptors in the proxy: well past the 1,024 a select() loop can watch.
      expect(fs.readdirSync(`/proc/${proxy.startup.pid}/fd`).length).toBeGreaterThan(2_200);
      // All 1,100 are open now (2,200 descriptors in the proxy); each one still carries bytes both ways.
      const results = await Promise.all(sockets.map((s, i) => echoes(s, Buffer.from(`tunnel ${i}\n`))));
      expect(results.filter((ok) => !ok)).toEqual([]);
    } finally {
      for (const s of sockets) s.destroy();
    }
  });

  it("serves 200 tunnels opened at the same moment, all of them", async () => {
    const outcomes = await Promise.all(
      Array.from({ length: 200 }, async () => {
        const { socket, status } = await connectThrough(proxy.port, `127.0.0.1:${echoPort}`);
        const ok = status === 200 && (await echoes(socket, crypto.randomBytes(64 * 1024)));
        socket.destroy();
        return ok;
      }),
    );
    expect(outcomes.filter((ok) => ok).length).toBe(200);
  });

  it("answers a malformed request line, oversized headers and a CONNECT without a port with 400 and a log line", async () => {
    const cases: [string, string | Buffer, RegExp][] = [
      ["malformed request line", "THIS IS NOT HTTP\r\n\r\n", /malformed request/],
      [
        "oversized headers",
        `GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\nX-Big: ${"x".repeat(70 * 1024)}\r\n\r\n`,
        /larger than 65536 bytes/,
      ],
      ["CONNECT without a port", "CONNECT example.test HTTP/1.1\r\nHost: example.test\r\n\r\n", /host:port/],
    ];
    for (const [what, bytes, logged] of cases) {
      const before = proxy.records().length;
      const answer = (await rawExchange(proxy.port, bytes)).toString("latin1");
      expect(answer, what).toMatch(/^HTTP\/1\.1 400 /);
      expect(answer, what).toMatch(/^X-Agentenv-Site-Proxy: bad-request$/im);
      const record = await until(`${what}'s log line`, () =>
        proxy
          .records()
          .slice(before)
          .find((r): r is ErrorRecord => r.event === "error"),
      );
      expect(record.status, what).toBe(400);
      expect(record.error, what).toMatch(logged);
    }
    // Still the same process, still serving.
    expect(proxy.child.exitCode).toBeNull();
    const origin = await startHttpServer(() => "still here");
    expect((await curl(proxy.url, `${origin.url}/`)).body).toBe("still here");
  });

  it("is started again by the supervisor within 2 s of a kill -9, logging restarted", async () => {
    const origin = await startHttpServer(() => "served");
    const port = await closedPort();
    const supervised = await startProxy({ listen: { host: "127.0.0.1", port } }, { supervise: true });
    expect((await curl(supervised.url, `${origin.url}/`)).body).toBe("served");
    await until(
      "the supervisor's second process to be ready",
      () => /ready to take over/.test(supervised.stderr()) || undefined,
      10_000,
    );
    const firstPid = supervised.startup.pid;
    const killedAt = Date.now();
    process.kill(firstPid, "SIGKILL");
    await until(
      "the proxy to serve again",
      async () => {
        const result = await curl(supervised.url, `${origin.url}/`, ["--max-time", "1"]);
        return result.body === "served" ? true : undefined;
      },
      5_000,
    );
    const servedAgainAfter = Date.now() - killedAt;
    expect(servedAgainAfter).toBeLessThan(2_000);
    const restarted = await supervised.waitForRecord<RestartedRecord>("restarted", (r) => r.event === "restarted");
    expect(restarted).toMatchObject({ previousPid: firstPid, signal: "SIGKILL", exitCode: null });
    const startups = await until("both startup lines", () => {
      const found = supervised.records().filter((r): r is StartupRecord => r.event === "startup");
      return found.length === 2 ? found : undefined;
    });
    expect(startups.map((s) => s.pid)).toEqual([firstPid, restarted.pid]);
  });
});
