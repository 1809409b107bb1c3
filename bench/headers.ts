// npm run bench:headers
//
// What one request's Authorization costs the gateway beside what it costs the computer's own site proxy, as a computer
// would send it: plain HTTP to the site proxy (`GET http://shop.test/...`, its request log on), on to the gateway's
// browse listener (one worker), on to an origin in this process. For each kind of value, BENCH_REQUESTS requests
// (keep-alive, BENCH_CONNECTIONS at a time), and the CPU each process spent per request (/proc utime + stime, 10 ms
// ticks), the kinds alternating over BENCH_ROUNDS rounds, each figure the median of its rounds:
//   small     `Bearer ` and 43 letters: what a request costs beside its credential;
//   plain     `Bearer ` and 15 KB of letters and digits: an opaque token, the cheapest kind to read;
//   base64    `Bearer ` and 15 KB of random bytes' base64: a site's large credential, the costliest kind kept;
//   nested2   base64 of base64 of text: every layer text, read to the end, kept;
//   nested4   the same four deep: more than the budget;
//   escapes   `%25252B` and backslashes in every 50 characters: the most forms per character;
//   split     ten Authorization headers of 1.5 KB of nested4 each: the same bytes, ten values.
// Then the gateway alone: its /healthz (published listener) timed every 20 ms while BENCH_CONNECTIONS clients send it
// nested2 requests straight on its browse listener, median and p99, beside the same with no load. One JSON line at the
// end.
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { median } from "./kit";
import { cpuSeconds, freePort, processTree, startGateway, startSiteProxy } from "./loopback";

const TOKEN = "bench-control-token-0123456789abcdef";
const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 200);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 8);
const HEALTH_SECONDS = Number(process.env.BENCH_HEALTH_SECONDS ?? 4);
const SIZE = 15 * 1024;

const letters = (n: number) => randomBytes(n).toString("base64url").slice(0, n);
const base64 = (text: string) => Buffer.from(text, "latin1").toString("base64");
const nested = (depth: number, size = SIZE) => {
  let inner = letters(Math.ceil(size * Math.pow(3 / 4, depth)));
  for (let i = 0; i < depth; i++) inner = base64(inner);
  return `Basic ${inner}`.slice(0, size);
};

/** Each kind's Authorization headers (one value, or several). */
const KINDS: Record<string, string[]> = {
  small: [`Bearer ${letters(43)}`],
  plain: [`Bearer ${letters(SIZE)}`.slice(0, SIZE)],
  base64: [`Bearer ${randomBytes(SIZE).toString("base64")}`.slice(0, SIZE)],
  nested2: [nested(2)],
  nested4: [nested(4)],
  escapes: [`Bearer ${`%25252B${letters(44)}\\+`.repeat(SIZE / 44)}`.slice(0, SIZE)],
  split: Array.from({ length: 10 }, () => nested(4, SIZE / 10)),
};

/** `requests` GETs of `path` on `port`, each with `authorization`, `connections` at a time; the answers' statuses. */
async function send(
  port: number,
  host: string,
  path: string,
  authorization: string[],
  requests: number,
  connections: number,
): Promise<Record<number, number>> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: connections });
  const statuses: Record<number, number> = {};
  let started = 0;
  const one = () =>
    new Promise<void>((resolve, reject) => {
      const req = http.request({ host: "127.0.0.1", port, path, agent, headers: { Host: host } }, (res) => {
        statuses[res.statusCode ?? 0] = (statuses[res.statusCode ?? 0] ?? 0) + 1;
        res.resume();
        res.on("end", resolve);
      });
      for (const value of authorization) req.appendHeader("Authorization", value);
      req.on("error", reject);
      req.end();
    });
  const lane = async () => {
    while (started < requests) {
      started++;
      await one();
    }
  };
  await Promise.all(Array.from({ length: connections }, lane));
  agent.destroy();
  return statuses;
}

/** Milliseconds each /healthz took, timed every 20 ms for `seconds`. */
async function healthTimes(port: number, seconds: number): Promise<number[]> {
  const times: number[] = [];
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  for (const end = Date.now() + seconds * 1000; Date.now() < end;) {
    const start = performance.now();
    await new Promise<void>((resolve, reject) =>
      http
        .get({ host: "127.0.0.1", port, path: "/healthz", agent }, (res) => res.resume().on("end", resolve))
        .on("error", reject),
    );
    times.push(performance.now() - start);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  agent.destroy();
  return times;
}

const quantile = (values: number[], q: number) =>
  [...values].sort((a, b) => a - b)[Math.floor(q * (values.length - 1))];

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "multienv-bench-headers-"));
  const origin = http.createServer({ keepAliveTimeout: 60_000 }, (req, res) => {
    req.resume();
    res.end("ok");
  });
  await new Promise<void>((resolve) => origin.listen(0, "127.0.0.1", resolve));
  const site = `http://127.0.0.1:${(origin.address() as AddressInfo).port}`;
  const browsePort = await freePort();
  const gateway = await startGateway(
    {
      listen: { host: "127.0.0.1", port: 0 },
      browse: { hosts: ["127.0.0.1"], port: browsePort },
      sites: { shop: { server: site, frontend: site } },
      computers: { bench: { cdp: "http://127.0.0.1:1/cdp", proxyLog: "http://127.0.0.1:1/log" } },
      workers: 1,
    },
    TOKEN,
  );
  const proxy = await startSiteProxy({
    listen: { host: "127.0.0.1", port: 0 },
    gateway: `http://127.0.0.1:${browsePort}`,
    sites: { shop: ["shop.test"] },
    reach: "none",
    log: join(dir, "proxy.log"),
    dnsServers: ["127.0.0.1:1"],
    requestLog: { dir: join(dir, "requests"), computer: "bench" },
  });
  const gatewayPids = processTree(gateway.child.pid!);
  const proxyPids = processTree(proxy.child.pid!);
  try {
    const cpu: Record<string, { gateway: number[]; proxy: number[]; statuses: Record<number, number> }> = {};
    for (const kind of Object.keys(KINDS)) cpu[kind] = { gateway: [], proxy: [], statuses: {} };
    for (const kind of Object.keys(KINDS))
      await send(proxy.port, "shop.test", "http://shop.test/warm", KINDS[kind], 20, CONNECTIONS);
    for (let round = 0; round < ROUNDS; round++) {
      const kinds = round % 2 ? Object.keys(KINDS).reverse() : Object.keys(KINDS);
      for (const kind of kinds) {
        const before = { gateway: cpuSeconds(gatewayPids), proxy: cpuSeconds(proxyPids) };
        const statuses = await send(proxy.port, "shop.test", "http://shop.test/p", KINDS[kind], REQUESTS, CONNECTIONS);
        await new Promise((resolve) => setTimeout(resolve, 100));
        cpu[kind].gateway.push(((cpuSeconds(gatewayPids) - before.gateway) * 1e6) / REQUESTS);
        cpu[kind].proxy.push(((cpuSeconds(proxyPids) - before.proxy) * 1e6) / REQUESTS);
        for (const [status, n] of Object.entries(statuses))
          cpu[kind].statuses[Number(status)] = (cpu[kind].statuses[Number(status)] ?? 0) + n;
      }
    }
    const perRequest = Object.fromEntries(
      Object.entries(cpu).map(([kind, figures]) => [
        kind,
        {
          gatewayUs: Math.round(median(figures.gateway)),
          proxyUs: Math.round(median(figures.proxy)),
          gatewayStatuses: figures.statuses,
        },
      ]),
    );
    for (const [kind, figures] of Object.entries(perRequest))
      console.log(
        `${kind.padEnd(8)} gateway ${String(figures.gatewayUs).padStart(6)} us/request, site proxy ${String(
          figures.proxyUs,
        ).padStart(6)} us/request, answers ${JSON.stringify(figures.gatewayStatuses)}`,
      );

    const idle = await healthTimes(gateway.port, HEALTH_SECONDS / 2);
    let loading = true;
    const load = (async () => {
      while (loading) await send(browsePort, "shop.test", "/website/shop/p", KINDS.nested2, 50, CONNECTIONS);
    })();
    const loaded = await healthTimes(gateway.port, HEALTH_SECONDS);
    loading = false;
    await load;
    const health = {
      idle: { p50Ms: quantile(idle, 0.5), p99Ms: quantile(idle, 0.99) },
      underNested2: { p50Ms: quantile(loaded, 0.5), p99Ms: quantile(loaded, 0.99), samples: loaded.length },
    };
    console.log(
      `/healthz idle p50 ${health.idle.p50Ms.toFixed(1)} ms p99 ${health.idle.p99Ms.toFixed(1)} ms; under nested2 ` +
        `from ${CONNECTIONS} connections p50 ${health.underNested2.p50Ms.toFixed(1)} ms p99 ${health.underNested2.p99Ms.toFixed(1)} ms`,
    );
    console.log(JSON.stringify({ bench: "headers", requests: REQUESTS, rounds: ROUNDS, perRequest, health }));
  } finally {
    gateway.child.kill("SIGKILL");
    proxy.child.kill("SIGKILL");
    origin.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

main().then(
  () => process.exit(0),
  (error: Error) => {
    console.error(error);
    process.exit(1);
  },
);
