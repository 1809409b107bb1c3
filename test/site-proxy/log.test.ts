// docs/design.md "Site proxy": one JSON line per event. A success and both kinds of failure are sent through the real
// proxy and every field of their records is checked.
import * as fs from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type {
  ConnectionRecord,
  ErrorRecord,
  FailedRecord,
  RefusedRecord,
  StartupRecord,
} from "../../src/protocol/site-proxy";
import { cleanup } from "../helpers/processes";
import { closedPort } from "../helpers/ports";
import { connectThrough, curl, type ProxyProcess, startProxy } from "./helpers";
import { startDns, startEchoServer } from "../helpers/servers";

let proxy: ProxyProcess;
let echoPort: number;

beforeAll(async () => {
  echoPort = (await startEchoServer()).port;
  const dns = await startDns({ "echo.test": ["127.0.0.1"] });
  proxy = await startProxy({
    reach: ["echo.test", "*.closed.test"],
    dnsServers: [dns.server],
    resolve: { "no.closed.test": ["127.0.0.1"] },
    idleTimeoutMs: 60_000,
  });
});
afterAll(cleanup);

const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

describe("the log", () => {
  it("starts with a startup line naming the bound port, the CA and the reaching", async () => {
    await proxy.waitForRecord("the startup line", (r) => r.event === "startup");
    const startup = proxy.records()[0] as StartupRecord;
    expect(Object.keys(startup).sort()).toEqual([
      "caCert",
      "control",
      "event",
      "pid",
      "proxy",
      "reach",
      "sites",
      "time",
    ]);
    expect(startup).toMatchObject({
      event: "startup",
      pid: proxy.child.pid,
      proxy: { host: "127.0.0.1", port: proxy.port },
      control: null,
      caCert: proxy.caCertPath,
      reach: ["echo.test", "*.closed.test"],
      sites: [],
    });
    expect(startup.time).toMatch(ISO);
  });

  it("writes a connection line when a tunnel ends: host, port, address, bytes each way, start, duration", async () => {
    const before = Date.now();
    const { socket } = await connectThrough(proxy.port, `echo.test:${echoPort}`);
    const payload = Buffer.alloc(12_345, 7);
    socket.write(payload);
    let received = 0;
    await new Promise<void>((resolve) =>
      socket.on("data", (d: Buffer) => (received += d.length) >= payload.length && resolve()),
    );
    await new Promise((resolve) => setTimeout(resolve, 200));
    socket.end();
    const record = await proxy.waitForRecord<ConnectionRecord>(
      "the connection line",
      (r) => r.event === "connection" && r.host === "echo.test",
    );
    expect(Object.keys(record).sort()).toEqual([
      "address",
      "bytesFromHost",
      "bytesToHost",
      "durationMs",
      "event",
      "host",
      "method",
      "port",
      "start",
      "time",
    ]);
    expect(record).toMatchObject({
      event: "connection",
      method: "CONNECT",
      host: "echo.test",
      port: echoPort,
      address: "127.0.0.1",
      bytesToHost: 12_345,
      bytesFromHost: 12_345,
    });
    expect(record.start).toMatch(ISO);
    expect(Date.parse(record.start)).toBeGreaterThanOrEqual(before - 5);
    expect(record.durationMs).toBeGreaterThanOrEqual(190);
    expect(record.durationMs).toBeLessThan(5_000);
    expect(Date.parse(record.time)).toBeGreaterThanOrEqual(Date.parse(record.start) + record.durationMs - 5);
  });

  it("writes a failed line for a name that doesn't resolve and for a host that doesn't answer", async () => {
    const port = await closedPort();
    expect((await curl(proxy.url, "http://nowhere.echo.test/")).status).toBe(403); // not in the allowlist: refused, not failed
    expect((await curl(proxy.url, "http://missing.closed.test/x")).status).toBe(502);
    expect((await connectThrough(proxy.port, `no.closed.test:${port}`)).status).toBe(502);

    const unresolved = await proxy.waitForRecord<FailedRecord>(
      "doesn't resolve",
      (r) => r.event === "failed" && r.host === "missing.closed.test",
    );
    expect(Object.keys(unresolved).sort()).toEqual(["error", "event", "host", "method", "port", "reason", "time"]);
    expect(unresolved).toMatchObject({
      event: "failed",
      method: "GET",
      host: "missing.closed.test",
      port: 80,
      reason: "doesn't resolve",
    });
    expect(unresolved.error).toMatch(/ENOTFOUND|missing\.closed\.test/);

    const unanswered = await proxy.waitForRecord<FailedRecord>(
      "no answer",
      (r) => r.event === "failed" && r.host === "no.closed.test",
    );
    expect(unanswered).toMatchObject({
      event: "failed",
      method: "CONNECT",
      host: "no.closed.test",
      port,
      reason: "no answer",
    });
    expect(unanswered.error).toMatch(/ECONNREFUSED 127\.0\.0\.1/);

    const refused = await proxy.waitForRecord<RefusedRecord>("refused", (r) => r.event === "refused");
    expect(refused).toMatchObject({ event: "refused", method: "GET", host: "nowhere.echo.test", port: 80 });
  });

  it("writes an error line for a request it cannot parse", async () => {
    const { status } = await connectThrough(proxy.port, "no-port.test");
    expect(status).toBe(400);
    const record = await proxy.waitForRecord<ErrorRecord>("the error line", (r) => r.event === "error");
    expect(record).toMatchObject({ event: "error", method: "CONNECT", status: 400, client: "127.0.0.1" });
    expect(record.error).toMatch(/host:port/);
  });

  it("writes nothing but JSON lines, each with its event and time", () => {
    const lines = fs.readFileSync(proxy.logPath, "utf8").trimEnd().split("\n");
    for (const line of lines) {
      const record = JSON.parse(line);
      expect(Object.keys(record).slice(0, 2)).toEqual(["event", "time"]);
      expect(["startup", "connection", "failed", "refused", "request", "error", "restarted"]).toContain(record.event);
    }
  });
});
