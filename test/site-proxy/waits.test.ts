// docs/design.md "Site proxy": one deadline (connectTimeoutMs) covers the lookup and every connection attempt; a name's
// addresses are tried in turn; a name that doesn't resolve or a host that never answers is a 502 with
// X-Agentenv-Site-Proxy: failed at or before the deadline; an idle tunnel ends after idleTimeoutMs, and so does a
// write to a peer that stopped reading.
import * as dgram from "node:dgram";
import * as net from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ConnectionRecord, FailedRecord } from "../../src/protocol/site-proxy";
import { cleanup, onCleanup } from "../helpers/processes";
import { closedPort } from "../helpers/ports";
import { connectThrough, curl, type ProxyProcess, startProxy } from "./helpers";
import {
  startDns,
  startEchoServer,
  startHangingAddress,
  startHttpServer,
  type TestDns,
  type TestHttpServer,
} from "../helpers/servers";

const CONNECT_TIMEOUT_MS = 1_500;
const IDLE_TIMEOUT_MS = 1_000;
/** Scheduling slack on a loaded 2-core machine (each measure includes starting curl). */
const SLACK_MS = 1_500;

let dns: TestDns;
let hang: { host: string; port: number };
let origin: TestHttpServer;
let proxy: ProxyProcess;

beforeAll(async () => {
  hang = await startHangingAddress();
  // The origin listens on 127.0.0.1 at the hanging listener's port, so a name can have both as addresses.
  origin = await startHttpServer(() => "answered", "127.0.0.1", hang.port);
  dns = await startDns({ "via-dns.test": ["127.0.0.1"] });
  proxy = await startProxy({
    dnsServers: [dns.server],
    sites: { shop: ["*.shop.test"] },
    connectTimeoutMs: CONNECT_TIMEOUT_MS,
    idleTimeoutMs: IDLE_TIMEOUT_MS,
    // The hanging and refusing addresses are other loopback addresses, standing in for public ones here.
    allowAddresses: ["127.0.0.0/8"],
    resolve: {
      "refused-first.test": ["127.0.0.2", "127.0.0.1"],
      "hang-first.test": [hang.host, "127.0.0.1"],
      "hangs.test": [hang.host],
      "hang-twice.test": [hang.host, hang.host],
    },
  });
});
afterAll(cleanup);

async function timed<T>(work: () => Promise<T>): Promise<{ value: T; ms: number }> {
  const start = Date.now();
  const value = await work();
  return { value, ms: Date.now() - start };
}

describe("connecting", () => {
  it("looks names up with the configured DNS servers", async () => {
    const result = await curl(proxy.url, `http://via-dns.test:${hang.port}/`);
    expect(result.body).toBe("answered");
    expect(dns.queries).toContain("via-dns.test");
  });

  it("tries the next address after one refuses", async () => {
    const result = await curl(proxy.url, `http://refused-first.test:${hang.port}/`);
    expect(result.status).toBe(200);
    const { socket } = await connectThrough(proxy.port, `refused-first.test:${hang.port}`);
    socket.destroy();
    const record = await proxy.waitForRecord<ConnectionRecord>(
      "the tunnel's connection line",
      (r) => r.event === "connection" && r.host === "refused-first.test" && r.method === "CONNECT",
    );
    expect(record.address).toBe("127.0.0.1");
  });

  it("reaches a later address inside the one deadline when the first hangs", async () => {
    const before = origin.requests.length;
    const { value: result, ms } = await timed(() =>
      curl(proxy.url, `http://hang-first.test:${hang.port}/second-address`),
    );
    expect(result.status).toBe(200);
    expect(result.body).toBe("answered");
    expect(origin.requests.slice(before).map((r) => r.url)).toEqual(["/second-address"]);
    expect(ms).toBeLessThan(CONNECT_TIMEOUT_MS + SLACK_MS);
  });

  for (const host of ["hangs.test", "hang-twice.test"]) {
    it(`answers 502 failed at the deadline when ${host === "hangs.test" ? "the only address" : "every address"} never answers`, async () => {
      const { value: result, ms } = await timed(() => curl(proxy.url, `http://${host}:${hang.port}/`));
      expect(result.status).toBe(502);
      expect(result.headers["x-agentenv-site-proxy"]).toBe("failed");
      expect(ms).toBeGreaterThanOrEqual(CONNECT_TIMEOUT_MS - 100);
      expect(ms).toBeLessThan(CONNECT_TIMEOUT_MS + SLACK_MS);
      const record = await proxy.waitForRecord<FailedRecord>(
        `failed ${host}`,
        (r) => r.event === "failed" && r.host === host,
      );
      expect(record.reason).toBe("no answer");
    });
  }

  it("answers 502 failed at once for a name that does not resolve", async () => {
    const { value: result, ms } = await timed(() => curl(proxy.url, "http://missing.test/"));
    expect(result.status).toBe(502);
    expect(result.headers["x-agentenv-site-proxy"]).toBe("failed");
    expect(ms).toBeLessThan(CONNECT_TIMEOUT_MS); // the DNS server's answer, not the deadline
    const viaConnect = await connectThrough(proxy.port, "missing.test:443");
    expect(viaConnect.status).toBe(502);
    expect(viaConnect.head).toMatch(/^X-Agentenv-Site-Proxy: failed$/im);
    viaConnect.socket.destroy();
    const record = await proxy.waitForRecord<FailedRecord>(
      "failed missing.test",
      (r) => r.event === "failed" && r.host === "missing.test" && r.method === "CONNECT",
    );
    expect(record.reason).toBe("doesn't resolve");
  });

  it("bounds the lookup by the same deadline when the DNS server never answers", async () => {
    const silent = dgram.createSocket("udp4");
    await new Promise<void>((resolve) => silent.bind(0, "127.0.0.1", resolve));
    onCleanup(() => silent.close());
    const silentProxy = await startProxy({
      dnsServers: [`127.0.0.1:${silent.address().port}`],
      connectTimeoutMs: CONNECT_TIMEOUT_MS,
    });
    const { value: result, ms } = await timed(() => curl(silentProxy.url, "http://slow-dns.test/"));
    expect(result.status).toBe(502);
    expect(result.headers["x-agentenv-site-proxy"]).toBe("failed");
    expect(ms).toBeLessThan(CONNECT_TIMEOUT_MS + SLACK_MS);
    const record = await silentProxy.waitForRecord<FailedRecord>(
      "failed slow-dns.test",
      (r) => r.event === "failed" && r.host === "slow-dns.test",
    );
    expect(record.reason).toBe("doesn't resolve");
  });

  it("answers 502 failed for a port where nothing listens", async () => {
    const port = await closedPort();
    const result = await curl(proxy.url, `http://127.0.0.1:${port}/`);
    expect(result.status).toBe(502);
    expect(result.headers["x-agentenv-site-proxy"]).toBe("failed");
  });
});

describe("waiting on open tunnels", () => {
  it("ends a tunnel with no traffic either way after the idle timeout", async () => {
    const echo = await startEchoServer();
    const { socket } = await connectThrough(proxy.port, `127.0.0.1:${echo.port}`);
    socket.write("ping");
    await new Promise((resolve) => socket.once("data", resolve));
    const { ms } = await timed(() => new Promise((resolve) => socket.once("close", resolve).resume()));
    expect(ms).toBeGreaterThanOrEqual(IDLE_TIMEOUT_MS - 100);
    expect(ms).toBeLessThan(IDLE_TIMEOUT_MS + SLACK_MS);
    const record = await proxy.waitForRecord<ConnectionRecord>(
      "the idle tunnel's line",
      (r) => r.event === "connection" && r.port === echo.port,
    );
    expect(record.endedBy).toBe("idle");
  });

  it("ends a tunnel to a synthetic name that stays silent after CONNECT", async () => {
    const { socket, status } = await connectThrough(proxy.port, "silent.shop.test:443");
    expect(status).toBe(200);
    const { ms } = await timed(() => new Promise((resolve) => socket.once("close", resolve).resume()));
    expect(ms).toBeGreaterThanOrEqual(IDLE_TIMEOUT_MS - 100);
    expect(ms).toBeLessThan(IDLE_TIMEOUT_MS + SLACK_MS);
  });

  it("ends a tunnel whose host stopped reading, even while the host keeps sending", async () => {
    // The host never reads, but sends a byte every 100 ms, so the tunnel is never idle.
    const talkers = new Set<NodeJS.Timeout>();
    const server = net.createServer((s) => {
      s.pause();
      const timer = setInterval(() => s.write("."), 100);
      talkers.add(timer);
      s.on("close", () => clearInterval(timer));
      s.on("error", () => s.destroy());
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    onCleanup(() => {
      for (const t of talkers) clearInterval(t);
      server.close();
    });
    const port = (server.address() as net.AddressInfo).port;
    const { socket } = await connectThrough(proxy.port, `127.0.0.1:${port}`);
    socket.resume(); // the client reads everything the host sends
    const chunk = Buffer.alloc(1 << 20);
    const pump = setInterval(() => socket.writable && socket.write(chunk), 20);
    const { ms } = await timed(() => new Promise((resolve) => socket.once("close", resolve).on("error", () => {})));
    clearInterval(pump);
    expect(ms).toBeLessThan(IDLE_TIMEOUT_MS + 2 * SLACK_MS);
    const record = await proxy.waitForRecord<ConnectionRecord>(
      "the stalled tunnel's line",
      (r) => r.event === "connection" && r.port === port,
    );
    expect(record.endedBy).toBe("stalled write");
  });
});
