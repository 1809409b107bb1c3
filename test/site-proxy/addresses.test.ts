// The address check: in every reach mode the proxy never dials the env's own networks (`deny`), loopback,
// link-local, metadata or unspecified addresses, nor any other range that is not the public web (documentation,
// benchmarking, NAT64 local-use, 6to4, Teredo, ...), however the computer spells them and whatever a name resolves
// to; under an allowlist never a private or shared address either. A refusal is a 403 with
// X-Agentenv-Site-Proxy: refused and a `refused` line naming the address (and the name).
//
// Through the real proxy the attacks aim only at loopback-family addresses, where an origin listens and a broken
// check would connect; addresses off this machine are judged by the check itself, so that a broken check never
// sends a packet off the machine.
import { execFileSync } from "node:child_process";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RefusedRecord, RequestRecord } from "../../src/protocol/site-proxy";
import { createAddressCheck } from "../../src/protocol/address-check";
import { cleanup } from "../helpers/processes";
import { closedPort } from "../helpers/ports";
import { connectThrough, curl, type ProxyProcess, startProxy } from "./helpers";
import { rawExchange, startHttpServer, type TestHttpServer } from "../helpers/servers";

afterAll(cleanup);

describe("the address check", () => {
  const allowAll = createAddressCheck({ reach: "allow-all", deny: ["172.18.0.0/16", "fd12:3456::/32"] });
  const allowlist = createAddressCheck({ reach: ["a.test"], deny: ["172.18.0.0/16"] });

  const everyMode: [string, RegExp][] = [
    ["127.0.0.1", /loopback/],
    ["127.255.255.254", /loopback/],
    ["::1", /loopback/],
    ["::ffff:127.0.0.1", /loopback/],
    ["::ffff:7f00:1", /loopback/],
    ["64:ff9b::7f00:1", /loopback/],
    ["::ffff:0:7f00:1", /loopback/],
    ["169.254.169.254", /metadata/],
    ["::ffff:169.254.169.254", /metadata/],
    ["64:ff9b::a9fe:a9fe", /metadata/],
    ["169.254.170.2", /metadata/],
    ["169.254.1.1", /link-local/],
    ["fe80::1", /link-local/],
    ["fe80::1%eth0", /zone id/],
    ["::1%lo", /zone id/],
    ["fd00:ec2::254", /metadata/],
    ["100.100.100.200", /metadata/],
    ["168.63.129.16", /metadata/],
    ["0.0.0.0", /unspecified/],
    ["0.1.2.3", /unspecified/],
    ["::", /unspecified/],
    ["::ffff:0.0.0.0", /unspecified/],
    ["224.0.0.1", /multicast/],
    ["ff02::1", /multicast/],
    ["255.255.255.255", /broadcast/],
    ["172.18.0.5", /env's own networks \(deny 172\.18\.0\.0\/16\)/],
    ["::ffff:172.18.0.5", /env's own networks/],
    ["64:ff9b::ac12:5", /env's own networks/],
  ];
  for (const [address, why] of everyMode) {
    it(`refuses ${address} in allow-all and under an allowlist`, () => {
      expect(allowAll(address)).toMatch(why);
      expect(allowlist(address)).toMatch(why);
    });
  }

  it("refuses a deny range written in IPv6 in allow-all", () => {
    expect(allowAll("fd12:3456::9")).toMatch(/env's own networks \(deny fd12:3456::\/32\)/);
  });

  const allowlistOnly: [string, RegExp][] = [
    ["10.1.2.3", /private/],
    ["172.16.0.1", /private/],
    ["192.168.1.1", /private/],
    ["fd00::1", /private \(unique local\)/],
    ["100.64.0.1", /shared/],
    ["::ffff:10.1.2.3", /private/],
    ["64:ff9b::a01:203", /private/],
  ];
  for (const [address, why] of allowlistOnly) {
    it(`refuses ${address} under an allowlist, and reaches it in allow-all`, () => {
      expect(allowlist(address)).toMatch(why);
      expect(allowAll(address)).toBeUndefined();
    });
  }

  // One address in each range that is not the public web beside the private ones (IANA's special-purpose
  // registries; IPv6 outside 2000::/3), and the IPv6 forms carrying an IPv4 address that are refused as themselves.
  const special: [string, RegExp][] = [
    ["192.0.0.8", /192\.0\.0\.0\/24, IETF protocol assignments/],
    ["192.0.0.9", /192\.0\.0\.0\/24/],
    ["192.0.2.1", /TEST-NET-1/],
    ["198.51.100.7", /TEST-NET-2/],
    ["203.0.113.9", /TEST-NET-3/],
    ["198.18.0.1", /benchmarking/],
    ["198.19.255.254", /benchmarking/],
    ["192.88.99.1", /6to4 relay anycast/],
    ["240.0.0.1", /reserved/],
    ["::ffff:192.0.2.1", /TEST-NET-1/],
    ["64:ff9b::c000:201", /TEST-NET-1/],
    ["64:ff9b:1::808:808", /NAT64 local-use/],
    ["64:ff9b:1:ffff::1", /NAT64 local-use/],
    ["2001:db8::1", /2001:db8::\/32, documentation/],
    ["3fff::1", /3fff::\/20, documentation/],
    ["2001:2::1", /benchmarking/],
    ["2001::1", /Teredo/],
    ["2001:0:4136:e378:8000:63bf:3fff:fdd2", /Teredo/],
    ["2001:20::1", /IETF protocol assignments/],
    ["2002:808:808::1", /6to4/],
    ["2002:7f00:1::1", /loopback/],
    ["2002:c000:201::1", /TEST-NET-1/],
    ["::808:808", /IPv4-compatible/],
    ["::7f00:1", /loopback/],
    ["100::1", /discard-only/],
    ["100:0:0:1::1", /dummy prefix/],
    ["5f00::1", /segment routing/],
    ["4000::1", /outside global unicast/],
    ["8000::1", /outside global unicast/],
    ["1::1", /outside global unicast/],
  ];
  for (const [address, why] of special) {
    it(`refuses ${address} in allow-all and under an allowlist: not the public web`, () => {
      expect(allowAll(address)).toMatch(why);
      expect(allowlist(address)).toMatch(why);
    });
  }

  for (const address of [
    "8.8.8.8",
    "1.1.1.1",
    "192.0.1.1",
    "198.17.255.255",
    "198.20.0.1",
    "2606:4700::1111",
    "2620:4f:8000::1",
    "2001:200::1",
    "::ffff:8.8.8.8",
    "64:ff9b::808:808",
    "::ffff:0:808:808",
  ]) {
    it(`reaches the public address ${address} in both modes`, () => {
      expect(allowAll(address)).toBeUndefined();
      expect(allowlist(address)).toBeUndefined();
    });
  }

  it("lets allowAddresses open loopback and private ranges, never deny, link-local, metadata or unspecified addresses", () => {
    const check = createAddressCheck({
      reach: ["a.test"],
      deny: ["10.9.0.0/16"],
      allowAddresses: ["127.0.0.0/8", "10.0.0.0/8", "169.254.0.0/16", "0.0.0.0/8", "fd00::/8"],
    });
    expect(check("127.0.0.1")).toBeUndefined();
    expect(check("::ffff:127.0.0.1")).toBeUndefined();
    expect(check("10.1.2.3")).toBeUndefined();
    expect(check("10.9.1.1")).toMatch(/deny/);
    expect(check("169.254.169.254")).toMatch(/metadata/);
    expect(check("169.254.1.1")).toMatch(/link-local/);
    expect(check("0.0.0.0")).toMatch(/unspecified/);
    expect(check("fd00:ec2::254")).toMatch(/metadata/);
    expect(check("::1")).toMatch(/loopback/);
  });
});

/** Raw bytes to the proxy, its whole answer back: these spellings are what a client library would rewrite. */
describe("attacks on loopback through the proxy", () => {
  let origin: TestHttpServer;
  let allowAll: ProxyProcess;
  let allowlist: ProxyProcess;

  beforeAll(async () => {
    origin = await startHttpServer(() => "the origin answered");
    const resolve = {
      localhost: ["127.0.0.1"],
      "rebound.test": ["127.0.0.1"],
      "mapped.test": ["::ffff:127.0.0.1"],
      "zero.test": ["0.0.0.0"],
      "v6.test": ["::1"],
    };
    // No allowAddresses: loopback is refused, as in a deployed env.
    allowAll = await startProxy({ reach: "allow-all", allowAddresses: [], resolve });
    allowlist = await startProxy({
      reach: ["rebound.test", "mapped.test", "*.allowed.test"],
      allowAddresses: [],
      resolve,
    });
  });

  async function expectRefused(proxy: ProxyProcess, host: string, address: RegExp): Promise<void> {
    const authority = `${host}:${origin.port}`;
    const before = origin.connections;
    const viaHttp = (
      await rawExchange(
        proxy.port,
        `GET http://${authority}/x HTTP/1.1\r\nHost: ${authority}\r\nConnection: close\r\n\r\n`,
      )
    ).toString("latin1");
    expect(viaHttp, `GET http://${authority}/`).toMatch(/^HTTP\/1\.1 403 /);
    expect(viaHttp).toMatch(/^X-Agentenv-Site-Proxy: refused$/im);
    const viaConnect = await connectThrough(proxy.port, authority);
    expect(viaConnect.status, `CONNECT ${authority}`).toBe(403);
    expect(viaConnect.head).toMatch(/^X-Agentenv-Site-Proxy: refused$/im);
    viaConnect.socket.destroy();
    expect(origin.connections, `the origin was never contacted for ${host}`).toBe(before);
    const name = host
      .replace(/^\[|\]$/g, "")
      .toLowerCase()
      .replace(/\.$/, "");
    for (const method of ["GET", "CONNECT"]) {
      const record = await proxy.waitForRecord<RefusedRecord>(
        `refused ${method} ${host}`,
        (r) => r.event === "refused" && r.method === method && r.host === name,
      );
      expect(record.port).toBe(origin.port);
      expect(record.address, `the refused line names the address ${host} stood for`).toMatch(address);
    }
  }

  for (const [host, address] of [
    ["127.0.0.1", /^127\.0\.0\.1$/],
    ["127.0.0.2", /^127\.0\.0\.2$/],
    ["0x7f.1", /^127\.0\.0\.1$/],
    ["2130706433", /^127\.0\.0\.1$/],
    ["017700000001", /^127\.0\.0\.1$/],
    ["0177.0.0.1", /^127\.0\.0\.1$/],
    ["127.1", /^127\.0\.0\.1$/],
    ["127.0.0.1.", /^127\.0\.0\.1$/],
    ["0", /^0\.0\.0\.0$/],
    ["0.0.0.0", /^0\.0\.0\.0$/],
    ["[::1]", /^::1$/],
    ["[::]", /^::$/],
    ["[::ffff:127.0.0.1]", /^::ffff:127\.0\.0\.1$/],
    ["[::ffff:7f00:1]", /^::ffff:7f00:1$/],
    ["[::1%25lo]", /^::1%25lo$/],
    ["localhost", /^127\.0\.0\.1$/],
    ["LocalHost.", /^127\.0\.0\.1$/],
    ["rebound.test", /^127\.0\.0\.1$/],
    ["mapped.test", /^::ffff:127\.0\.0\.1$/],
    ["zero.test", /^0\.0\.0\.0$/],
    ["v6.test", /^::1$/],
  ] as [string, RegExp][]) {
    it(`allow-all refuses ${host}`, async () => {
      await expectRefused(allowAll, host, address);
    });
  }

  it("an allowlist refuses its own names when they resolve to loopback, and every spelling of an address", async () => {
    const cases: [string, RegExp][] = [
      ["rebound.test", /^127\.0\.0\.1$/],
      ["mapped.test", /^::ffff:127\.0\.0\.1$/],
      ["0x7f.1", /^127\.0\.0\.1$/],
      ["2130706433", /^127\.0\.0\.1$/],
      ["[::ffff:127.0.0.1]", /^::ffff:127\.0\.0\.1$/],
    ];
    for (const [host, address] of cases) await expectRefused(allowlist, host, address);
    const record = allowlist
      .records()
      .find((r): r is RefusedRecord => r.event === "refused" && r.host === "rebound.test");
    expect(record).toMatchObject({ address: "127.0.0.1", why: expect.stringMatching(/loopback/) });
  });

  it("a name with an allowed and a refused address never falls through to the refused one", async () => {
    // The first address stands in for a public host that is down; the second is loopback, where an origin answers.
    const down = await closedPort("127.0.0.1");
    const local = await startHttpServer(() => "loopback answered", "127.0.0.2", down);
    const proxy = await startProxy({ reach: "allow-all", resolve: { "mixed.test": ["127.0.0.1", "127.0.0.2"] } });
    const result = await curl(proxy.url, `http://mixed.test:${down}/`);
    expect(result.status).toBe(403);
    expect(result.headers["x-agentenv-site-proxy"]).toBe("refused");
    const tunnel = await connectThrough(proxy.port, `mixed.test:${down}`);
    expect(tunnel.status).toBe(403);
    tunnel.socket.destroy();
    expect(local.connections).toBe(0);
    const record = await proxy.waitForRecord<RefusedRecord>(
      "the refusal",
      (r) => r.event === "refused" && r.host === "mixed.test",
    );
    expect(record).toMatchObject({ method: "GET", address: "127.0.0.2", why: expect.stringMatching(/loopback/) });
  });

  it("deny wins over allowAddresses, by address and by a name that resolves there", async () => {
    const proxy = await startProxy({
      reach: "allow-all",
      deny: ["127.0.0.1/32"],
      resolve: { "env.test": ["127.0.0.1"] },
    });
    for (const host of ["127.0.0.1", "env.test", "[::ffff:127.0.0.1]"]) {
      const result = await curl(proxy.url, `http://${host}:${origin.port}/`);
      expect(result.status, host).toBe(403);
    }
    const record = await proxy.waitForRecord<RefusedRecord>(
      "the refusal",
      (r) => r.event === "refused" && r.host === "env.test",
    );
    expect(record).toMatchObject({ address: "127.0.0.1", why: "in the env's own networks (deny 127.0.0.1/32)" });
    expect(origin.requests.filter((r) => r.url === "/")).toEqual([]);
  });

  it("allow-all still reaches an address it may dial, and logs the request", async () => {
    // 127.0.0.1 stands in for a public address (allowAddresses), as in the other tests.
    const proxy = await startProxy({ reach: "allow-all" });
    const result = await curl(proxy.url, `http://127.0.0.1:${origin.port}/public`);
    expect([result.status, result.body]).toEqual([200, "the origin answered"]);
    const record = await proxy.waitForRecord<RequestRecord>("the request line", (r) => r.event === "request");
    expect(record).toMatchObject({ method: "GET", host: "127.0.0.1", port: origin.port, status: 200 });
  });
});

/** True when this process is in a network namespace of its own with loopback alone (scripts/loopback-only.sh). */
function inLoopbackOnlyNamespace(): boolean {
  try {
    const links = execFileSync("ip", ["-o", "link", "show"], { encoding: "utf8" }).trim().split("\n");
    return links.length === 1 && /: lo:/.test(links[0]);
  } catch {
    return false;
  }
}

describe("addresses that are not the public web, through an allow-all proxy", () => {
  // Each is put on loopback when this runs in a namespace of its own (as root), with an origin listening there: a
  // proxy that dialled one would reach it. Elsewhere nothing answers there, and the refusal is checked alone.
  const addresses = [
    "192.0.2.1",
    "198.51.100.1",
    "203.0.113.1",
    "198.18.0.1",
    "64:ff9b:1::808:808",
    "2001:db8::1",
    "2002:808:808::1",
    "2001::1",
    "3fff::1",
  ];

  it("refuses each, by literal and by a name resolving to it, in raw bytes, and its origin is never contacted", async () => {
    const onLoopback = inLoopbackOnlyNamespace();
    if (onLoopback)
      for (const address of addresses)
        execFileSync("ip", ["addr", "add", `${address}/${address.includes(":") ? 128 : 32}`, "dev", "lo"]);
    const origin = await startHttpServer(() => "the origin answered", "::");
    const resolve = Object.fromEntries(addresses.map((a, i) => [`special${i}.test`, [a]]));
    const proxy = await startProxy({ reach: "allow-all", allowAddresses: [], resolve });
    if (onLoopback) {
      // The origin is there: a direct connection reaches it.
      const direct = (
        await rawExchange(origin.port, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 5_000, "192.0.2.1")
      ).toString("latin1");
      expect(direct).toMatch(/the origin answered/);
    }
    const before = origin.connections;
    const hosts = [...addresses.map((a) => (a.includes(":") ? `[${a}]` : a)), ...Object.keys(resolve)];
    for (const host of hosts) {
      const authority = `${host}:${origin.port}`;
      const viaHttp = (
        await rawExchange(
          proxy.port,
          `GET http://${authority}/x HTTP/1.1\r\nHost: ${authority}\r\nConnection: close\r\n\r\n`,
        )
      ).toString("latin1");
      expect(viaHttp, `GET http://${authority}/`).toMatch(/^HTTP\/1\.1 403 /);
      expect(viaHttp).toMatch(/^X-Agentenv-Site-Proxy: refused$/im);
      const viaConnect = await connectThrough(proxy.port, authority);
      expect(viaConnect.status, `CONNECT ${authority}`).toBe(403);
      viaConnect.socket.destroy();
    }
    expect(origin.connections, "the origin was never contacted").toBe(before);
    // A refusal's log line is written after its answer: wait for each rather than read the log at once.
    for (const [i, address] of addresses.entries())
      expect(
        await proxy.waitForRecord<RefusedRecord>(
          `the refusal of special${i}.test`,
          (r) => r.event === "refused" && r.host === `special${i}.test`,
        ),
      ).toMatchObject({ address, why: expect.stringMatching(/not the public web/) });
  });
});
