// npm run bench:gateway
//
// The gateway against nginx configured as the same reverse proxy, in one run, to the same
// upstream (an nginx serving a small body and a 1 GiB file), measured with wrk:
//   - requests/s and p99 latency with 64 connections (the gateway with its default workers,
//     one per core less one; the nginx proxy with `worker_processes auto`);
//   - the CPU time each proxy's processes spend per request (/proc utime + stime over a run, divided by its
//     requests), at 64, 1 and 8 connections: unlike latency, other processes on a busy machine move it little;
//   - throughput of streaming a 1 GiB body through each (curl, body discarded);
//   - the gateway's RSS (each process) after at least 100k requests;
//   - the latency each proxy adds per request at 1 and at 8 concurrent connections: its median latency
//     (wrk, /hello) less the upstream's own, measured straight, in the same alternating rounds.
//   - TLS + HTTP/2 terminated: BENCH_H2_REQUESTS (20,000) on one connection, 32 streams at a time, through the
//     site proxy (CONNECT to a synthetic name, the requests on to this gateway) and through nginx terminating TLS
//     with HTTP/2 in front of the same upstream; the CPU per request of the site proxy, of the gateway behind it,
//     and of nginx, and each one's requests/s and median request time.
// Targets: >= 0.8x nginx's requests/s, >= 0.9x its streaming throughput, RSS < 150 MiB, added latency
// at 1 and 8 connections <= 2x nginx's.
// Alongside, the same gateway with the hand-written HTTP/1.1 client it used before undici
// (bench/gateway-hand-written.ts): undici was to replace it unless more than 20% slower.
// The machine is shared (other processes compete for its cores), so the proxies are
// measured in alternating rounds and each figure is the median of its rounds.
// Options (env): BENCH_SECONDS per round (5), BENCH_ROUNDS (3), BENCH_CONNECTIONS (64), BENCH_LATENCY_SECONDS
// per latency round (3).
import { spawnSync, type ChildProcess } from "node:child_process";
import { chmodSync, mkdtempSync, readFileSync, rmSync, truncateSync, openSync, closeSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import {
  cpuPerRequest,
  cpuSeconds,
  freePort,
  h2Connection,
  h2Requests,
  processTree,
  startGateway,
  startNginx,
  startNginxTlsH2,
  siteProxyOnLoopback,
  startSiteProxy,
  testCertificate,
  waitForPort,
} from "./loopback";
import { median, stopServices } from "./kit";

const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 64);
const LATENCY_SECONDS = Number(process.env.BENCH_LATENCY_SECONDS ?? 3);
const H2_REQUESTS = Number(process.env.BENCH_H2_REQUESTS ?? 20_000);
/** Streams in flight at once on the TLS+h2 connection: about a page's subresources. */
const H2_STREAMS = 32;
/** Concurrent connections at which the added latency is measured. */
const LATENCY_CONNECTIONS = [1, 8];
const TOKEN = "bench-control-token-0123456789abcdef";
// A site's data plane on the published listener takes the control token: every contender is sent it (nginx ignores it).
const AUTHORIZATION = `Authorization: Bearer ${TOKEN}`;
const GIB = 1024 ** 3;

interface WrkResult {
  requestsPerSecond: number;
  p50Ms: number;
  p99Ms: number;
  requests: number;
  errors: string;
}

function toMs(value: string): number {
  const match = /^([\d.]+)(us|ms|s|m)$/.exec(value);
  if (!match) return NaN;
  const n = Number(match[1]);
  return match[2] === "us" ? n / 1000 : match[2] === "ms" ? n : match[2] === "s" ? n * 1000 : n * 60_000;
}

function wrk(url: string, seconds: number, connections = CONNECTIONS): WrkResult {
  const run = spawnSync(
    "wrk",
    [`-t${Math.min(2, connections)}`, `-c${connections}`, `-d${seconds}s`, "--latency", "-H", AUTHORIZATION, url],
    { encoding: "utf8" },
  );
  if (run.status !== 0) throw new Error(`wrk failed: ${run.stderr}`);
  const out = run.stdout;
  const rps = Number(/Requests\/sec:\s+([\d.]+)/.exec(out)?.[1]);
  const p50 = toMs(/\s50%\s+(\S+)/.exec(out)?.[1] ?? "");
  const p99 = toMs(/\s99%\s+(\S+)/.exec(out)?.[1] ?? "");
  const requests = Number(/(\d+) requests in/.exec(out)?.[1]);
  const errors = [/Socket errors:.*/.exec(out)?.[0], /Non-2xx or 3xx responses: \d+/.exec(out)?.[0]]
    .filter(Boolean)
    .join("; ");
  // Answers that are not the page are not the figure asked for: a contender that refuses is not faster.
  const non2xx = /Non-2xx or 3xx responses: (\d+)/.exec(out);
  if (non2xx !== null) throw new Error(`wrk ${url}: ${non2xx[1]} answers were not 2xx or 3xx`);
  return { requestsPerSecond: rps, p50Ms: p50, p99Ms: p99, requests, errors };
}

/** MB/s (10^6 bytes) of downloading url to /dev/null. */
function streamThroughput(url: string): { mbPerSecond: number; bytes: number } {
  const run = spawnSync(
    "curl",
    ["-s", "-o", "/dev/null", "-H", AUTHORIZATION, "-w", "%{size_download} %{time_total} %{http_code}", url],
    {
      encoding: "utf8",
    },
  );
  const [bytes, seconds, code] = run.stdout.trim().split(" ");
  if (code !== "200" || Number(bytes) !== GIB) throw new Error(`streaming ${url}: HTTP ${code}, ${bytes} bytes`);
  return { mbPerSecond: Number(bytes) / Number(seconds) / 1e6, bytes: Number(bytes) };
}

/** wrk on url, plus the requests each CPU second of `pids` served (robust to a busy machine). */
async function wrkWithCpu(
  url: string,
  seconds: number,
  pids: number[],
  connections = CONNECTIONS,
): Promise<WrkResult & { perCpuSecond: number; cpuUsPerRequest: number }> {
  const result = await cpuPerRequest(pids, () => wrk(url, seconds, connections));
  return { ...result, perCpuSecond: result.requests / Math.max(result.cpuSeconds, 0.01) };
}

function rssMiB(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1]) / 1024;
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "multienv-bench-"));
  const children: ChildProcess[] = [];
  try {
    // A sparse 1 GiB file: nginx serves it from the page cache without touching the disk.
    const big = join(dir, "big.bin");
    closeSync(openSync(big, "w"));
    truncateSync(big, GIB);
    chmodSync(dir, 0o755); // nginx workers run as nobody
    chmodSync(big, 0o644);
    const [upstreamPort, nginxProxyPort] = await Promise.all([freePort(), freePort()]);

    const upstreamNginx = startNginx(
      dir,
      "upstream",
      `worker_processes 1;
events { worker_connections 4096; }
http {
  access_log off;
  keepalive_requests 1000000;
  sendfile on;
  server {
    listen 127.0.0.1:${upstreamPort} backlog=4096;
    location = /hello { default_type text/plain; return 200 "hello from the upstream\\n"; }
    location = /big { alias ${big}; default_type application/octet-stream; }
  }
}`,
    );
    children.push(upstreamNginx);
    // The same reverse proxy as the gateway: prefix stripped, Host kept, X-Forwarded-* added,
    // hop-by-hop headers dropped, kept-alive upstream connections, streamed (unbuffered) both ways.
    const nginxProxy = startNginx(
      dir,
      "proxy",
      `worker_processes auto;
events { worker_connections 4096; }
http {
  access_log off;
  keepalive_requests 1000000;
  upstream bench { server 127.0.0.1:${upstreamPort}; keepalive 256; }
  server {
    listen 127.0.0.1:${nginxProxyPort} backlog=4096;
    location /svc/bench/ {
      proxy_pass http://bench/;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host $http_host;
      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
      proxy_set_header X-Forwarded-Host $http_host;
      proxy_set_header X-Forwarded-Proto $scheme;
      proxy_buffering off;
      proxy_request_buffering off;
      proxy_connect_timeout 10s;
      proxy_read_timeout 60s;
    }
  }
}`,
    );
    children.push(nginxProxy);
    await Promise.all([waitForPort(upstreamPort), waitForPort(nginxProxyPort)]);

    const config = {
      listen: { host: "127.0.0.1", port: 0 },
      sites: { bench: { server: `http://127.0.0.1:${upstreamPort}`, frontend: `http://127.0.0.1:${upstreamPort}` } },
    };
    const started = async (running: Promise<{ child: ChildProcess; port: number; workers: number }>) => {
      const { child, port, workers } = await running;
      children.push(child);
      return { pid: child.pid!, port, workers };
    };
    const gateway = await started(startGateway(config, TOKEN));
    const handWritten = await started(startGateway(config, TOKEN, [], join(__dirname, "gateway-hand-written.ts")));
    // TLS + HTTP/2 terminated: the site proxy (a synthetic name, its requests on to the gateway's /website/bench/),
    // and nginx terminating TLS with HTTP/2 in front of the same upstream.
    const siteProxy = await startSiteProxy(
      siteProxyOnLoopback(`http://127.0.0.1:${gateway.port}`, { bench: ["bench.test"] }, join(dir, "site-proxy.log")),
    );
    children.push(siteProxy.child);
    const { cert, key } = testCertificate(dir);
    const nginxTlsPort = await freePort();
    const nginxTls = startNginxTlsH2(dir, {
      port: nginxTlsPort,
      upstreamPort: upstreamPort,
      cert,
      key,
      keepalive: 256,
      buffering: false,
    });
    children.push(nginxTls);
    await waitForPort(nginxTlsPort);

    type Run = WrkResult & { perCpuSecond: number; cpuUsPerRequest: number };
    const contenders = [
      { name: "gateway", base: `http://127.0.0.1:${gateway.port}/svc/bench`, pid: gateway.pid },
      { name: "hand-written", base: `http://127.0.0.1:${handWritten.port}/svc/bench`, pid: handWritten.pid },
      { name: "nginx", base: `http://127.0.0.1:${nginxProxyPort}/svc/bench`, pid: nginxProxy.pid! },
    ].map((c) => ({
      ...c,
      pids: processTree(c.pid),
      runs: [] as Run[],
      streams: [] as number[],
      streamCpu: [] as number[],
    }));
    console.log(
      `gateway (undici): ${gateway.workers} workers on ${gateway.port}; gateway (hand-written client): ${handWritten.workers} workers on ${handWritten.port}; ` +
        `nginx proxy on ${nginxProxyPort}; upstream nginx on ${upstreamPort}`,
    );
    console.log(
      `wrk -t2 -c${CONNECTIONS} -d${SECONDS}s, ${ROUNDS} alternating rounds (after a 3 s warm-up each); medians\n`,
    );

    for (const c of contenders) wrk(`${c.base}/hello`, 3);
    for (let round = 0; round < ROUNDS; round++) {
      for (const c of contenders) c.runs.push(await wrkWithCpu(`${c.base}/hello`, SECONDS, c.pids));
      for (const c of contenders) {
        const cpu = cpuSeconds(c.pids);
        c.streams.push(streamThroughput(`${c.base}/big`).mbPerSecond);
        c.streamCpu.push(cpuSeconds(c.pids) - cpu);
      }
      const last = (c: (typeof contenders)[number]) =>
        `${c.runs.at(-1)!.requestsPerSecond.toFixed(0)} req/s, p99 ${c.runs.at(-1)!.p99Ms.toFixed(1)} ms, ${c.streams.at(-1)!.toFixed(0)} MB/s`;
      console.log(`round ${round + 1}: ${contenders.map((c) => `${c.name} ${last(c)}`).join(" | ")}`);
    }
    const figures = contenders.map((c) => ({
      requestsPerSecond: median(c.runs.map((r) => r.requestsPerSecond)),
      requestsPerCpuSecond: median(c.runs.map((r) => r.perCpuSecond)),
      cpuUsPerRequest: median(c.runs.map((r) => r.cpuUsPerRequest)),
      p99Ms: median(c.runs.map((r) => r.p99Ms)),
      streamMBps: median(c.streams),
      streamCpuSeconds: median(c.streamCpu),
      errors: c.runs
        .map((r) => r.errors)
        .filter(Boolean)
        .join(" "),
    }));
    const [gw, hw, ng] = figures;

    // Added latency: each proxy's median latency less the upstream's own, at few connections (where the
    // latency is each hop's own work, not queueing). Alternating rounds, medians.
    // The CPU each spends per request at those connections is measured in the same runs.
    const straight = `http://127.0.0.1:${upstreamPort}/hello`;
    const latencyOf = [
      { name: "upstream", url: straight, pids: processTree(upstreamNginx.pid!) },
      ...contenders.map((c) => ({ name: c.name, url: `${c.base}/hello`, pids: c.pids })),
    ];
    const latency: Record<string, Record<string, number[]>> = {};
    const latencyCpu: Record<string, Record<string, number[]>> = {};
    for (const connections of LATENCY_CONNECTIONS) {
      latency[connections] = Object.fromEntries(latencyOf.map((l) => [l.name, [] as number[]]));
      latencyCpu[connections] = Object.fromEntries(latencyOf.map((l) => [l.name, [] as number[]]));
      for (let round = 0; round < ROUNDS; round++)
        for (const l of latencyOf) {
          const run = await wrkWithCpu(l.url, LATENCY_SECONDS, l.pids, connections);
          latency[connections][l.name].push(run.p50Ms);
          latencyCpu[connections][l.name].push(run.cpuUsPerRequest);
        }
    }
    const cpuAt = (connections: number, name: string) => median(latencyCpu[connections][name]);
    const addedMs = (connections: number, name: string) =>
      median(latency[connections][name]) - median(latency[connections].upstream);
    const added = Object.fromEntries(
      LATENCY_CONNECTIONS.map((connections) => [
        connections,
        {
          upstreamP50Ms: median(latency[connections].upstream),
          gatewayAddedMs: addedMs(connections, "gateway"),
          handWrittenAddedMs: addedMs(connections, "hand-written"),
          nginxAddedMs: addedMs(connections, "nginx"),
          gatewayVsNginx: addedMs(connections, "gateway") / addedMs(connections, "nginx"),
          cpuUsPerRequest: {
            upstream: cpuAt(connections, "upstream"),
            gateway: cpuAt(connections, "gateway"),
            handWritten: cpuAt(connections, "hand-written"),
            nginx: cpuAt(connections, "nginx"),
          },
          cpuGatewayVsNginx: cpuAt(connections, "gateway") / cpuAt(connections, "nginx"),
        },
      ]),
    );
    // TLS + HTTP/2: H2_REQUESTS on one connection, H2_STREAMS at a time, through the site proxy (and the gateway
    // behind it) and through nginx terminating TLS + h2; the CPU each process spends per request, alternating rounds.
    const sitePids = processTree(siteProxy.child.pid!);
    const nginxTlsPids = processTree(nginxTls.pid!);
    const gatewayPids = contenders[0].pids;
    const h2Runs = {
      env: [] as { siteProxy: number; gateway: number; requestsPerSecond: number; p50Ms: number; errors: number }[],
      nginx: [] as { nginx: number; requestsPerSecond: number; p50Ms: number; errors: number }[],
    };
    const h2Round = async (requests: number) => {
      const viaProxy = await h2Connection("bench.test", 443, siteProxy.port);
      const gatewayBefore = cpuSeconds(gatewayPids);
      const env = await cpuPerRequest(sitePids, () =>
        h2Requests(viaProxy, "bench.test", "/hello", requests, H2_STREAMS),
      );
      const gatewayUs = ((cpuSeconds(gatewayPids) - gatewayBefore) * 1e6) / requests;
      const straight = await h2Connection("bench.test", nginxTlsPort);
      const ng = await cpuPerRequest(nginxTlsPids, () =>
        h2Requests(straight, `bench.test:${nginxTlsPort}`, "/hello", requests, H2_STREAMS),
      );
      return { env, gatewayUs, ng };
    };
    await h2Round(2_000); // warm-up: the leaf issued, the pools filled, the code compiled
    for (let round = 0; round < ROUNDS; round++) {
      const { env, gatewayUs, ng } = await h2Round(H2_REQUESTS);
      h2Runs.env.push({
        siteProxy: env.cpuUsPerRequest,
        gateway: gatewayUs,
        requestsPerSecond: env.requests / env.seconds,
        p50Ms: env.p50Ms,
        errors: env.errors,
      });
      h2Runs.nginx.push({
        nginx: ng.cpuUsPerRequest,
        requestsPerSecond: ng.requests / ng.seconds,
        p50Ms: ng.p50Ms,
        errors: ng.errors,
      });
      console.log(
        `TLS+h2 round ${round + 1}: site proxy ${env.cpuUsPerRequest.toFixed(0)} us/request (gateway behind it ${gatewayUs.toFixed(0)}), ` +
          `${(env.requests / env.seconds).toFixed(0)} req/s | nginx TLS+h2 ${ng.cpuUsPerRequest.toFixed(0)} us/request, ${(ng.requests / ng.seconds).toFixed(0)} req/s`,
      );
    }
    const h2 = {
      requests: H2_REQUESTS,
      streams: H2_STREAMS,
      siteProxyCpuUsPerRequest: median(h2Runs.env.map((r) => r.siteProxy)),
      gatewayBehindItCpuUsPerRequest: median(h2Runs.env.map((r) => r.gateway)),
      nginxTlsCpuUsPerRequest: median(h2Runs.nginx.map((r) => r.nginx)),
      siteProxyRequestsPerSecond: median(h2Runs.env.map((r) => r.requestsPerSecond)),
      nginxTlsRequestsPerSecond: median(h2Runs.nginx.map((r) => r.requestsPerSecond)),
      siteProxyP50Ms: median(h2Runs.env.map((r) => r.p50Ms)),
      nginxTlsP50Ms: median(h2Runs.nginx.map((r) => r.p50Ms)),
      errors: [...h2Runs.env, ...h2Runs.nginx].reduce((n, r) => n + r.errors, 0),
    };

    let gatewayRequests = contenders[0].runs.reduce((n, r) => n + r.requests, 0);
    console.log("");

    while (gatewayRequests < 100_000) gatewayRequests += wrk(`${contenders[0].base}/hello`, 5).requests + 3; // +3: the warm-up is not counted
    const rss = [gateway.pid, ...processTree(gateway.pid).slice(1)].map((pid) => ({ pid, mib: rssMiB(pid) }));
    const handWrittenRss = Math.max(...[handWritten.pid, ...processTree(handWritten.pid).slice(1)].map(rssMiB));

    const row = (name: string, ...cells: string[]) =>
      console.log(name.padEnd(26) + cells.map((cell) => cell.padStart(14)).join(""));
    const ratio = (a: number, b: number) => (a / b).toFixed(2);
    row("", "gateway", "hand-written", "nginx", "gw/nginx", "gw/hand-wr.");
    row(
      "requests/s",
      gw.requestsPerSecond.toFixed(0),
      hw.requestsPerSecond.toFixed(0),
      ng.requestsPerSecond.toFixed(0),
      ratio(gw.requestsPerSecond, ng.requestsPerSecond),
      ratio(gw.requestsPerSecond, hw.requestsPerSecond),
    );
    row(
      "CPU per request, 64 conn (us)",
      gw.cpuUsPerRequest.toFixed(1),
      hw.cpuUsPerRequest.toFixed(1),
      ng.cpuUsPerRequest.toFixed(1),
      ratio(gw.cpuUsPerRequest, ng.cpuUsPerRequest),
      ratio(gw.cpuUsPerRequest, hw.cpuUsPerRequest),
    );
    for (const connections of LATENCY_CONNECTIONS) {
      const c = added[connections].cpuUsPerRequest;
      row(
        `CPU per request, ${connections} conn (us)`,
        c.gateway.toFixed(1),
        c.handWritten.toFixed(1),
        c.nginx.toFixed(1),
        ratio(c.gateway, c.nginx),
        ratio(c.gateway, c.handWritten),
      );
    }
    row(
      "requests per CPU second",
      gw.requestsPerCpuSecond.toFixed(0),
      hw.requestsPerCpuSecond.toFixed(0),
      ng.requestsPerCpuSecond.toFixed(0),
      ratio(gw.requestsPerCpuSecond, ng.requestsPerCpuSecond),
      ratio(gw.requestsPerCpuSecond, hw.requestsPerCpuSecond),
    );
    row(
      "p99 latency (ms)",
      gw.p99Ms.toFixed(2),
      hw.p99Ms.toFixed(2),
      ng.p99Ms.toFixed(2),
      ratio(gw.p99Ms, ng.p99Ms),
      ratio(gw.p99Ms, hw.p99Ms),
    );
    row(
      "1 GiB stream (MB/s)",
      gw.streamMBps.toFixed(0),
      hw.streamMBps.toFixed(0),
      ng.streamMBps.toFixed(0),
      ratio(gw.streamMBps, ng.streamMBps),
      ratio(gw.streamMBps, hw.streamMBps),
    );
    row(
      "1 GiB stream (CPU s)",
      gw.streamCpuSeconds.toFixed(2),
      hw.streamCpuSeconds.toFixed(2),
      ng.streamCpuSeconds.toFixed(2),
      ratio(gw.streamCpuSeconds, ng.streamCpuSeconds),
      ratio(gw.streamCpuSeconds, hw.streamCpuSeconds),
    );
    const errors = contenders
      .map((c, i) => (figures[i].errors ? `${c.name} [${figures[i].errors}]` : ""))
      .filter(Boolean);
    if (errors.length) console.log(`errors: ${errors.join(" ")}`);
    for (const connections of LATENCY_CONNECTIONS) {
      const a = added[connections];
      row(
        `added latency, ${connections} conn (ms)`,
        a.gatewayAddedMs.toFixed(3),
        a.handWrittenAddedMs.toFixed(3),
        a.nginxAddedMs.toFixed(3),
        a.gatewayVsNginx.toFixed(2),
        ratio(a.gatewayAddedMs, a.handWrittenAddedMs),
      );
    }
    console.log(
      `(added latency, aim gw/nginx <= 2: median latency through each proxy less the upstream's own, ${median(latency[1].upstream).toFixed(3)} ms at 1 connection, ${median(latency[8].upstream).toFixed(3)} ms at 8)`,
    );
    console.log(
      `\nTLS + HTTP/2, ${H2_REQUESTS} requests on one connection, ${H2_STREAMS} streams at a time, medians of ${ROUNDS} rounds:\n` +
        `  CPU per request: site proxy ${h2.siteProxyCpuUsPerRequest.toFixed(1)} us (and the gateway behind it ${h2.gatewayBehindItCpuUsPerRequest.toFixed(1)} us), ` +
        `nginx TLS+h2 ${h2.nginxTlsCpuUsPerRequest.toFixed(1)} us: site proxy/nginx ${ratio(h2.siteProxyCpuUsPerRequest, h2.nginxTlsCpuUsPerRequest)}x, ` +
        `site proxy + gateway/nginx ${ratio(h2.siteProxyCpuUsPerRequest + h2.gatewayBehindItCpuUsPerRequest, h2.nginxTlsCpuUsPerRequest)}x\n` +
        `  requests/s: site proxy ${h2.siteProxyRequestsPerSecond.toFixed(0)}, nginx ${h2.nginxTlsRequestsPerSecond.toFixed(0)}; ` +
        `median request ${h2.siteProxyP50Ms.toFixed(2)} ms vs ${h2.nginxTlsP50Ms.toFixed(2)} ms${h2.errors ? `; ${h2.errors} errors` : ""}`,
    );
    console.log(
      `\ngateway RSS after ${gatewayRequests} requests: ${rss.map((r) => `${r.pid}: ${r.mib.toFixed(1)} MiB`).join(", ")} (hand-written: at most ${handWrittenRss.toFixed(1)} MiB)`,
    );
    const maxRss = Math.max(...rss.map((r) => r.mib));
    const worst = Math.min(gw.requestsPerSecond / hw.requestsPerSecond, gw.streamMBps / hw.streamMBps);
    console.log(
      `undici against the hand-written client, the worse of requests/s and stream: ${worst.toFixed(2)}x (undici was to stay unless below 0.80x)`,
    );
    const { errors: _g, ...gatewayFigures } = gw;
    const { errors: _h, ...handWrittenFigures } = hw;
    const { errors: _n, ...nginxFigures } = ng;
    console.log(
      JSON.stringify({
        connections: CONNECTIONS,
        seconds: SECONDS,
        rounds: ROUNDS,
        loadAverage: loadavg(),
        gateway: {
          ...gatewayFigures,
          client: "undici",
          workers: gateway.workers,
          maxRssMiB: maxRss,
          requests: gatewayRequests,
        },
        handWritten: {
          ...handWrittenFigures,
          client: "hand-written",
          workers: handWritten.workers,
          maxRssMiB: handWrittenRss,
        },
        nginx: nginxFigures,
        ratios: {
          requestsPerSecond: gw.requestsPerSecond / ng.requestsPerSecond,
          requestsPerCpuSecond: gw.requestsPerCpuSecond / ng.requestsPerCpuSecond,
          p99: gw.p99Ms / ng.p99Ms,
          stream: gw.streamMBps / ng.streamMBps,
          addedLatency1: added[1].gatewayVsNginx,
          addedLatency8: added[8].gatewayVsNginx,
          cpuPerRequest64: gw.cpuUsPerRequest / ng.cpuUsPerRequest,
          cpuPerRequest1: added[1].cpuGatewayVsNginx,
          cpuPerRequest8: added[8].cpuGatewayVsNginx,
          tlsH2SiteProxyVsNginxCpu: h2.siteProxyCpuUsPerRequest / h2.nginxTlsCpuUsPerRequest,
          tlsH2EnvVsNginxCpu:
            (h2.siteProxyCpuUsPerRequest + h2.gatewayBehindItCpuUsPerRequest) / h2.nginxTlsCpuUsPerRequest,
          tlsH2RequestsPerSecond: h2.siteProxyRequestsPerSecond / h2.nginxTlsRequestsPerSecond,
          undiciVsHandWritten: {
            requestsPerSecond: gw.requestsPerSecond / hw.requestsPerSecond,
            requestsPerCpuSecond: gw.requestsPerCpuSecond / hw.requestsPerCpuSecond,
            p99: gw.p99Ms / hw.p99Ms,
            stream: gw.streamMBps / hw.streamMBps,
            streamCpu: gw.streamCpuSeconds / hw.streamCpuSeconds,
          },
        },
        addedLatency: added,
        tlsH2: h2,
        latencySamplesCpuUsPerRequest: latencyCpu,
        latencySamplesP50Ms: latency,
        targets: {
          requestsPerSecond: 0.8,
          stream: 0.9,
          maxRssMiB: 150,
          undiciAtLeast: 0.8,
          addedLatencyVsNginxAtMost: 2,
        },
      }),
    );
  } finally {
    await stopServices(children);
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((error: Error) => {
  console.error(`bench:gateway: ${error.message}`);
  process.exit(1);
});
