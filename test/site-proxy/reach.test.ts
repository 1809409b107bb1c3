// docs/design.md "Site proxy" / "Reaching": allow-all forwards any host (names and addresses; loopback, link-local and
// the env's own networks never, see addresses.test.ts); an allowlist only its names and wildcards, never an address
// or a localhost name; none nothing but synthetic names. A refusal is 403 with X-Agentenv-Site-Proxy: refused and a
// `refused` log line. The origin's 127.0.0.1 stands in for a public address (the helpers' allowAddresses).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RefusedRecord } from "../../src/protocol/site-proxy";
import { cleanup } from "../helpers/processes";
import { connectThrough, curl, type ProxyProcess, startProxy } from "./helpers";
import { startDns, startHttpServer, type TestHttpServer } from "../helpers/servers";

let origin: TestHttpServer;
let gateway: TestHttpServer;
let dnsServer: string;

beforeAll(async () => {
  origin = await startHttpServer(() => "origin says hi");
  gateway = await startHttpServer(() => "synthetic page");
  const dns = await startDns({
    "exact.test": ["127.0.0.1"],
    "a.b.allowed.test": ["127.0.0.1"],
    "allowed.test": ["127.0.0.1"],
    "other.test": ["127.0.0.1"],
  });
  dnsServer = dns.server;
});
afterAll(cleanup);

function proxyWith(reach: unknown): Promise<ProxyProcess> {
  return startProxy({
    gateway: gateway.url,
    sites: { shop: ["shop.test"] },
    reach,
    dnsServers: [dnsServer],
    resolve: { localhost: ["127.0.0.1"], "app.localhost": ["127.0.0.1"] },
  });
}

async function expectForwarded(proxy: ProxyProcess, host: string): Promise<void> {
  const viaHttp = await curl(proxy.url, `http://${host}:${origin.port}/page`);
  expect(viaHttp.status, `HTTP to ${host}`).toBe(200);
  expect(viaHttp.body).toBe("origin says hi");
  const { socket, status } = await connectThrough(proxy.port, `${host}:${origin.port}`);
  expect(status, `CONNECT to ${host}`).toBe(200);
  socket.write(`GET /tunnelled HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`);
  const answer = await new Promise<string>((resolve) => {
    let text = "";
    socket.on("data", (d: Buffer) => (text += d.toString()));
    socket.on("close", () => resolve(text));
  });
  expect(answer).toContain("origin says hi");
}

async function expectRefused(proxy: ProxyProcess, host: string): Promise<void> {
  const authority = host.includes(":") ? `[${host}]:${origin.port}` : `${host}:${origin.port}`;
  const before = origin.requests.length;
  const viaHttp = await curl(proxy.url, `http://${authority}/page`);
  expect(viaHttp.status, `HTTP to ${host}`).toBe(403);
  expect(viaHttp.headers["x-agentenv-site-proxy"]).toBe("refused");
  const viaConnect = await connectThrough(proxy.port, authority);
  expect(viaConnect.status, `CONNECT to ${host}`).toBe(403);
  expect(viaConnect.head).toMatch(/^X-Agentenv-Site-Proxy: refused$/im);
  viaConnect.socket.destroy();
  expect(origin.requests.length, "the origin was not contacted").toBe(before);
  const normalized = host.toLowerCase();
  for (const method of ["GET", "CONNECT"]) {
    const record = await proxy.waitForRecord<RefusedRecord>(
      `refused ${method} ${host}`,
      (r) => r.event === "refused" && r.method === method && r.host === normalized,
    );
    expect(record.port).toBe(origin.port);
    expect(record.why).toEqual(expect.any(String));
  }
}

describe("reach allow-all", () => {
  let proxy: ProxyProcess;
  beforeAll(async () => (proxy = await proxyWith("allow-all")));

  it("forwards names and addresses alike", async () => {
    await expectForwarded(proxy, "other.test");
    await expectForwarded(proxy, "127.0.0.1");
    expect(proxy.records().filter((r) => r.event === "refused")).toEqual([]);
  });
});

describe("reach allowlist", () => {
  let proxy: ProxyProcess;
  // The proxy holds the line itself even when its configuration names an address or a localhost name.
  beforeAll(async () => (proxy = await proxyWith(["exact.test", "*.allowed.test", "127.0.0.1", "localhost"])));

  it("forwards its exact names and the names under its wildcards", async () => {
    await expectForwarded(proxy, "exact.test");
    await expectForwarded(proxy, "a.b.allowed.test");
    await expectForwarded(proxy, "EXACT.test.");
  });

  it("refuses other names, a wildcard's bare suffix, addresses and localhost names", async () => {
    await expectRefused(proxy, "other.test");
    await expectRefused(proxy, "allowed.test");
    await expectRefused(proxy, "127.0.0.1");
    await expectRefused(proxy, "::1");
    await expectRefused(proxy, "localhost");
    await expectRefused(proxy, "app.localhost");
  });

  it("still routes synthetic names", async () => {
    expect((await curl(proxy.url, "http://shop.test/")).body).toBe("synthetic page");
  });
});

describe("reach none", () => {
  let proxy: ProxyProcess;
  beforeAll(async () => (proxy = await proxyWith("none")));

  it("refuses every host that is not a synthetic name", async () => {
    await expectRefused(proxy, "exact.test");
    await expectRefused(proxy, "127.0.0.1");
  });

  it("routes synthetic names", async () => {
    const result = await curl(proxy.url, "http://shop.test/x");
    expect(result.status).toBe(200);
    expect(result.body).toBe("synthetic page");
  });
});
