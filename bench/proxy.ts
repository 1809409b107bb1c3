// npm run bench:proxy — the site proxy against squid (Debian) and a direct connection, in one run, all on loopback:
//   tunnel throughput over a 1 GiB transfer, new tunnels per second, added latency per request (a small
//   round trip inside an open tunnel), RSS per idle tunnel with 1,000 idle tunnels open, and forwarded plain-HTTP
//   requests per second on kept-alive connections (a GET, and a POST whose 16 KiB body the proxy frames again).
//   The last line is every figure as one JSON object.
//   With --baseline <a checkout of this repository, its node_modules installed> that checkout's site proxy runs too,
//   taking its turns in the same rounds, and each figure's ratio to it is printed: a change's cost, measured beside
//   what it changed rather than against another day's figures.
// Aims: throughput >= 1.0x squid and >= 0.8x direct; tunnels/s >= squid; < 64 KiB RSS per idle tunnel.
// Usage: npm run bench:proxy [-- --gib 1 --seconds 3 --idle 1000 --rounds 3 --baseline <checkout>]
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as http from "node:http";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import { freePort } from "../test/helpers/ports";
import { waitForPort } from "./loopback";

const args = new Map<string, string>();
for (let i = 2; i < process.argv.length; i += 2) args.set(process.argv[i].replace(/^--/, ""), process.argv[i + 1]);
const TRANSFER_BYTES = Math.round(Number(args.get("gib") ?? 1) * 1024 ** 3);
const RATE_SECONDS = Number(args.get("seconds") ?? 3);
const RATE_CONCURRENCY = 32;
const ROUND_TRIPS = 5_000;
const IDLE_TUNNELS = Number(args.get("idle") ?? 1_000);
const ROUNDS = Number(args.get("rounds") ?? 3);
const BASELINE = args.get("baseline") === undefined ? undefined : path.resolve(args.get("baseline")!);

const root = path.resolve(__dirname, "..");
const work = fs.mkdtempSync(path.join(os.tmpdir(), "bench-proxy-"));
fs.chmodSync(work, 0o777); // squid drops to its own user and writes its log here
const children: ChildProcess[] = [];
const cleanupAll = () => {
  for (const c of children) if (c.exitCode === null) c.kill("SIGKILL");
  fs.rmSync(work, { recursive: true, force: true });
};
process.on("exit", cleanupAll);
process.on("SIGINT", () => process.exit(130));

// ---------------------------------------------------------------------------------------------------------------
// Upstreams: a source (sends the number of bytes asked for in an 8-byte header) and an echo server.

const chunk = Buffer.alloc(1 << 20, 0x61);

function listen(server: net.Server): Promise<number> {
  return new Promise((resolve) =>
    server.listen({ port: 0, host: "127.0.0.1", backlog: 4096 }, () =>
      resolve((server.address() as net.AddressInfo).port),
    ),
  );
}

const source = net.createServer((socket) => {
  socket.on("error", () => socket.destroy());
  socket.once("data", (header: Buffer) => {
    let left = Number(header.readBigUInt64BE(0));
    const pump = () => {
      while (left > 0) {
        const piece = left >= chunk.length ? chunk : chunk.subarray(0, left);
        left -= piece.length;
        if (!socket.write(piece)) return void socket.once("drain", pump);
      }
      socket.end();
    };
    pump();
  });
});
const echo = net.createServer((socket) => {
  socket.on("error", () => socket.destroy());
  socket.setNoDelay(true);
  socket.pipe(socket);
});

/** A plain HTTP origin: a small page for every request, its body read first. */
const origin = http.createServer({ keepAliveTimeout: 60_000 }, (req, res) => {
  req.resume();
  req.on("end", () => res.end("<html>ok</html>"));
});
const POST_BODY = Buffer.alloc(16 * 1024, 0x63);

// ---------------------------------------------------------------------------------------------------------------
// Clients.

type Opener = (port: number) => Promise<net.Socket>;

/** A socket to 127.0.0.1:port, directly. */
const direct: Opener = (port) =>
  new Promise((resolve, reject) => {
    const socket = net.connect({ port, host: "127.0.0.1", noDelay: true }, () => resolve(socket));
    socket.once("error", reject);
  });

/** A socket to 127.0.0.1:port through a CONNECT proxy, once it answered 200. */
function viaProxy(proxyPort: number): Opener {
  return (port) =>
    new Promise((resolve, reject) => {
      const socket = net.connect({ port: proxyPort, host: "127.0.0.1", noDelay: true });
      socket.once("error", reject);
      socket.write(`CONNECT 127.0.0.1:${port} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n\r\n`);
      let head = Buffer.alloc(0);
      const onData = (data: Buffer) => {
        head = Buffer.concat([head, data]);
        const end = head.indexOf("\r\n\r\n");
        if (end < 0) return;
        socket.off("data", onData);
        socket.pause();
        if (!/^HTTP\/1\.[01] 200/.test(head.toString("latin1", 0, 16)))
          return reject(new Error(`proxy answered ${head.toString("latin1", 0, end)}`));
        const rest = head.subarray(end + 4);
        if (rest.length > 0) socket.unshift(rest);
        socket.off("error", reject);
        resolve(socket);
      };
      socket.on("data", onData);
    });
}

const sinkBuffer = Buffer.allocUnsafe(1 << 20);

/**
 * MiB/s of a TRANSFER_BYTES download from the source, directly (proxyPort undefined) or through a CONNECT proxy.
 * The client reads into one reused buffer (node's `onread`) so that it costs as little CPU as it can: the machine's
 * cores are shared by the client, the source and the proxy under test.
 */
async function throughput(proxyPort: number | undefined, sourcePort: number): Promise<number> {
  const header = Buffer.alloc(8);
  header.writeBigUInt64BE(BigInt(TRANSFER_BYTES));
  let start = 0n;
  let received = 0;
  let head = proxyPort === undefined ? "" : undefined; // the proxy's answer to CONNECT, until its blank line
  let socket!: net.Socket;
  await new Promise<void>((resolve, reject) => {
    socket = net.connect({
      port: proxyPort ?? sourcePort,
      host: "127.0.0.1",
      onread: {
        buffer: sinkBuffer,
        callback: (bytes, buffer) => {
          if (head !== undefined) {
            received += bytes;
            return true;
          }
          const text = Buffer.from(buffer.buffer, buffer.byteOffset, bytes).toString("latin1");
          const end = text.indexOf("\r\n\r\n");
          if (end < 0) throw new Error("the proxy's answer to CONNECT came in pieces");
          if (!/^HTTP\/1\.[01] 200/.test(text)) reject(new Error(`proxy answered ${text.slice(0, end)}`));
          head = text.slice(0, end);
          received += bytes - (end + 4);
          start = process.hrtime.bigint();
          socket.write(header);
          return true;
        },
      },
    });
    socket.once("connect", () => {
      if (proxyPort === undefined) {
        start = process.hrtime.bigint();
        socket.write(header);
      } else socket.write(`CONNECT 127.0.0.1:${sourcePort} HTTP/1.1\r\nHost: 127.0.0.1:${sourcePort}\r\n\r\n`);
    });
    socket.once("end", resolve);
    socket.once("error", reject);
  });
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  socket.destroy();
  if (received !== TRANSFER_BYTES) throw new Error(`received ${received} of ${TRANSFER_BYTES} bytes`);
  return TRANSFER_BYTES / 2 ** 20 / seconds;
}

function roundTrip(socket: net.Socket, payload: Buffer): Promise<void> {
  return new Promise((resolve, reject) => {
    let got = 0;
    const onData = (d: Buffer) => {
      got += d.length;
      if (got >= payload.length) {
        socket.off("data", onData);
        socket.off("error", reject);
        resolve();
      }
    };
    socket.on("data", onData);
    socket.once("error", reject);
    socket.write(payload);
  });
}

async function tunnelsPerSecond(open: Opener, echoPort: number): Promise<{ perSecond: number; count: number }> {
  const until = Date.now() + RATE_SECONDS * 1000;
  const start = Date.now();
  let done = 0;
  const one = Buffer.from("x");
  await Promise.all(
    Array.from({ length: RATE_CONCURRENCY }, async () => {
      while (Date.now() < until) {
        const socket = await open(echoPort);
        socket.resume();
        await roundTrip(socket, one);
        socket.destroy();
        done++;
      }
    }),
  );
  return { perSecond: done / ((Date.now() - start) / 1000), count: done };
}

async function latencyMicros(open: Opener, echoPort: number): Promise<{ mean: number; p50: number; p99: number }> {
  const socket = await open(echoPort);
  socket.resume();
  const payload = Buffer.alloc(64, 0x62);
  for (let i = 0; i < 200; i++) await roundTrip(socket, payload); // warm up
  const samples: number[] = [];
  for (let i = 0; i < ROUND_TRIPS; i++) {
    const start = process.hrtime.bigint();
    await roundTrip(socket, payload);
    samples.push(Number(process.hrtime.bigint() - start) / 1000);
  }
  socket.destroy();
  samples.sort((a, b) => a - b);
  return {
    mean: samples.reduce((a, b) => a + b, 0) / samples.length,
    p50: samples[Math.floor(samples.length / 2)],
    p99: samples[Math.floor(samples.length * 0.99)],
  };
}

/**
 * Requests per second on RATE_CONCURRENCY kept-alive connections: absolute-form through a proxy, or origin-form
 * straight to the origin (proxyPort undefined).
 */
async function httpRequestsPerSecond(
  proxyPort: number | undefined,
  originPort: number,
  method: "GET" | "POST",
): Promise<number> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: RATE_CONCURRENCY });
  const until = Date.now() + RATE_SECONDS * 1000;
  const start = Date.now();
  let done = 0;
  const one = () =>
    new Promise<void>((resolve, reject) => {
      const req = http.request(
        {
          agent,
          host: "127.0.0.1",
          port: proxyPort ?? originPort,
          method,
          path: proxyPort === undefined ? "/page" : `http://127.0.0.1:${originPort}/page`,
          headers: {
            Host: `127.0.0.1:${originPort}`,
            ...(method === "POST" ? { "Content-Length": POST_BODY.length } : {}),
          },
        },
        (res) => {
          if (res.statusCode !== 200) reject(new Error(`${method} answered ${res.statusCode}`));
          res.resume();
          res.on("end", resolve);
        },
      );
      req.on("error", reject);
      req.end(method === "POST" ? POST_BODY : undefined);
    });
  await Promise.all(
    Array.from({ length: RATE_CONCURRENCY }, async () => {
      while (Date.now() < until) {
        await one();
        done++;
      }
    }),
  );
  agent.destroy();
  return done / ((Date.now() - start) / 1000);
}

/** CPU time (user + system) the process has used, in seconds: unlike wall time, hardly moved by others' load. */
function cpuSeconds(pid: number): number {
  const fields = fs.readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
  return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS;
}

const CLOCK_TICKS = Number(spawnSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).stdout.trim()) || 100;

function rssKiB(pid: number): number {
  const status = fs.readFileSync(`/proc/${pid}/status`, "utf8");
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)![1]);
}

async function idleTunnelRss(open: Opener, echoPort: number, pid: number): Promise<number> {
  // Warm the process up with the same kind of work first, so the baseline is a proxy that already ran tunnels.
  await Promise.all(Array.from({ length: 50 }, async () => (await open(echoPort)).destroy()));
  await new Promise((r) => setTimeout(r, 500));
  const before = rssKiB(pid);
  const sockets: net.Socket[] = [];
  for (let batch = 0; batch < IDLE_TUNNELS / 100; batch++) {
    const opened = await Promise.all(Array.from({ length: 100 }, () => open(echoPort)));
    for (const socket of opened) {
      socket.resume();
      await roundTrip(socket, Buffer.from("hello"));
      sockets.push(socket);
    }
  }
  await new Promise((r) => setTimeout(r, 1_000));
  const after = rssKiB(pid);
  for (const s of sockets) s.destroy();
  return ((after - before) * 1024) / sockets.length;
}

// ---------------------------------------------------------------------------------------------------------------
// The proxies.

/** The site proxy of the checkout at `checkout` (this one unless a baseline), its log in `work/<name>`. */
async function startOurs(checkout = root, name = "ours"): Promise<{ port: number; pid: number }> {
  // The upstreams are on 127.0.0.1, standing in for public hosts: loopback is refused unless allowAddresses opens it.
  const config = {
    listen: { host: "127.0.0.1", port: 0 },
    gateway: "http://127.0.0.1:9",
    sites: {},
    reach: "allow-all",
    log: path.join(work, `${name}/site-proxy.log`),
    allowAddresses: ["127.0.0.1/32"],
  };
  const child = spawn(
    "bash",
    [
      "-c",
      `ulimit -n $(ulimit -Hn); exec "$@"`,
      "bash",
      process.execPath,
      path.join(checkout, "bin/multienv-site-proxy.js"),
    ],
    {
      env: { ...process.env, MULTIENV_SITE_PROXY_CONFIG: JSON.stringify(config) },
      stdio: ["ignore", "pipe", "inherit"],
    },
  );
  children.push(child);
  const line = await new Promise<string>((resolve, reject) => {
    child.stdout!.once("data", (d: Buffer) => resolve(d.toString().split("\n")[0]));
    child.once("exit", (code) => reject(new Error(`our proxy exited (${code})`)));
  });
  const startup = JSON.parse(line) as { pid: number; proxy: { port: number } };
  return { port: startup.proxy.port, pid: startup.pid };
}

async function startSquid(): Promise<{ port: number; pid: number } | undefined> {
  if (spawnSync("bash", ["-c", "command -v squid"]).status !== 0) return undefined;
  const port = await freePort();
  const dir = path.join(work, "squid");
  fs.mkdirSync(dir, { mode: 0o777 });
  fs.chmodSync(dir, 0o777);
  const conf = path.join(dir, "squid.conf");
  fs.writeFileSync(
    conf,
    [
      `http_port 127.0.0.1:${port}`,
      "http_access allow all", // loopback only; CONNECT allowed to any port, as our proxy's allow-all
      "cache deny all",
      "cache_mem 0 MB",
      "access_log none",
      `cache_log ${dir}/cache.log`,
      `pid_filename ${dir}/squid.pid`,
      `coredump_dir ${dir}`,
      "max_filedescriptors 16384",
      "shutdown_lifetime 0 seconds",
      "via off",
      "forwarded_for delete",
      "",
    ].join("\n"),
  );
  const child = spawn("bash", ["-c", `ulimit -n $(ulimit -Hn); exec squid -N -f ${conf}`], {
    stdio: ["ignore", "inherit", "inherit"],
  });
  children.push(child);
  await waitForPort(port, 15_000);
  return { port, pid: child.pid! };
}

// ---------------------------------------------------------------------------------------------------------------

function fmt(n: number, digits = 0): string {
  return n.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits });
}

async function main(): Promise<void> {
  const sourcePort = await listen(source);
  const echoPort = await listen(echo);
  const originPort = await listen(origin);
  const ours = await startOurs();
  const baseline = BASELINE === undefined ? undefined : await startOurs(BASELINE, "baseline");
  const squid = await startSquid().catch((err: Error) => {
    console.error(`squid did not start: ${err.message}`);
    return undefined;
  });
  const contenders: [string, Opener, number | undefined, number | undefined][] = [
    ["direct", direct, undefined, undefined],
    ["multienv", viaProxy(ours.port), ours.pid, ours.port],
    ...(baseline
      ? ([["baseline", viaProxy(baseline.port), baseline.pid, baseline.port]] as [string, Opener, number, number][])
      : []),
    ...(squid ? ([["squid", viaProxy(squid.port), squid.pid, squid.port]] as [string, Opener, number, number][]) : []),
  ];

  console.log(
    `site proxy benchmark on ${os.cpus().length} cores (${os.cpus()[0]?.model.trim()}), node ${process.version}, ${squid ? "squid 5" : "no squid"}`,
  );
  console.log(`the benchmark's clients and upstreams share the machine with the proxy under test\n`);

  // Each measure runs in rounds, the contenders taking turns within a round, and the best round counts: on a shared
  // machine a burst of someone else's load then hits one round, not one contender.
  type Result = {
    mibps: number;
    tps: number;
    rtt: { mean: number; p50: number; p99: number };
    getsPerSecond: number;
    postsPerSecond: number;
    rss?: number;
    cpuPerGiB?: number;
    cpuPerTunnelUs?: number;
  };
  const results: Record<string, Result> = {};
  for (const [name] of contenders)
    results[name] = {
      mibps: 0,
      tps: 0,
      rtt: { mean: Infinity, p50: Infinity, p99: Infinity },
      getsPerSecond: 0,
      postsPerSecond: 0,
    };
  for (let round = 0; round < ROUNDS; round++) {
    for (const [name, open, pid, proxyPort] of round % 2 === 0 ? contenders : [...contenders].reverse()) {
      const r = results[name];
      const cpuBefore = pid ? cpuSeconds(pid) : 0;
      r.mibps = Math.max(r.mibps, await throughput(proxyPort, sourcePort));
      if (pid)
        r.cpuPerGiB = Math.min(r.cpuPerGiB ?? Infinity, (cpuSeconds(pid) - cpuBefore) / (TRANSFER_BYTES / 1024 ** 3));
      const cpuBeforeTunnels = pid ? cpuSeconds(pid) : 0;
      const rate = await tunnelsPerSecond(open, echoPort);
      if (pid)
        r.cpuPerTunnelUs = Math.min(
          r.cpuPerTunnelUs ?? Infinity,
          ((cpuSeconds(pid) - cpuBeforeTunnels) * 1e6) / (rate.count || 1),
        );
      r.tps = Math.max(r.tps, rate.perSecond);
      const rtt = await latencyMicros(open, echoPort);
      if (rtt.p50 < r.rtt.p50) r.rtt = rtt;
      r.getsPerSecond = Math.max(r.getsPerSecond, await httpRequestsPerSecond(proxyPort, originPort, "GET"));
      r.postsPerSecond = Math.max(r.postsPerSecond, await httpRequestsPerSecond(proxyPort, originPort, "POST"));
    }
    process.stderr.write(`round ${round + 1} of ${ROUNDS} done\n`);
  }
  for (const [name, open, pid] of contenders) if (pid) results[name].rss = await idleTunnelRss(open, echoPort, pid);
  for (const [name] of contenders) {
    const { mibps, tps, rtt, rss, cpuPerGiB, cpuPerTunnelUs, getsPerSecond, postsPerSecond } = results[name];
    console.log(
      `${name.padEnd(9)} throughput ${fmt(mibps).padStart(6)} MiB/s${cpuPerGiB !== undefined ? ` (${fmt(cpuPerGiB, 2)} CPU s/GiB)` : ""} | new tunnels ${fmt(tps).padStart(6)}/s${cpuPerTunnelUs !== undefined ? ` (${fmt(cpuPerTunnelUs)} µs CPU each)` : ""} | round trip p50 ${fmt(rtt.p50, 1)} µs (mean ${fmt(rtt.mean, 1)}, p99 ${fmt(rtt.p99, 1)})` +
        ` | HTTP GET ${fmt(getsPerSecond)}/s, POST 16 KiB ${fmt(postsPerSecond)}/s` +
        (rss !== undefined ? ` | RSS per idle tunnel ${fmt(rss / 1024, 1)} KiB (${IDLE_TUNNELS} tunnels)` : ""),
    );
  }

  const d = results.direct;
  const o = results.multienv;
  const s = results.squid;
  console.log("\nratios");
  console.log(
    `  throughput       multienv/direct ${fmt(o.mibps / d.mibps, 2)}x (aim >= 0.8)` +
      (s ? ` | multienv/squid ${fmt(o.mibps / s.mibps, 2)}x (aim >= 1.0)` : ""),
  );
  if (s)
    console.log(
      `  proxy CPU/GiB    multienv/squid ${fmt(o.cpuPerGiB! / s.cpuPerGiB!, 2)}x (lower is better; unlike wall time, barely moved by other load)`,
    );
  if (s)
    console.log(
      `  proxy CPU/tunnel multienv/squid ${fmt(o.cpuPerTunnelUs! / s.cpuPerTunnelUs!, 2)}x (lower is better)`,
    );
  console.log(
    `  new tunnels/s    multienv/direct ${fmt(o.tps / d.tps, 2)}x` +
      (s ? ` | multienv/squid ${fmt(o.tps / s.tps, 2)}x (aim >= 1.0)` : ""),
  );
  console.log(
    `  added latency    multienv +${fmt(o.rtt.p50 - d.rtt.p50, 1)} µs per round trip (p50)` +
      (s ? ` | squid +${fmt(s.rtt.p50 - d.rtt.p50, 1)} µs` : ""),
  );
  console.log(
    `  idle tunnel RSS  multienv ${fmt(o.rss! / 1024, 1)} KiB (aim < 64)` +
      (s?.rss !== undefined ? ` | squid ${fmt(s.rss / 1024, 1)} KiB` : ""),
  );
  console.log(
    `  HTTP GET/s       multienv/direct ${fmt(o.getsPerSecond / d.getsPerSecond, 2)}x` +
      (s ? ` | multienv/squid ${fmt(o.getsPerSecond / s.getsPerSecond, 2)}x` : ""),
  );
  console.log(
    `  HTTP POST/s      multienv/direct ${fmt(o.postsPerSecond / d.postsPerSecond, 2)}x` +
      (s ? ` | multienv/squid ${fmt(o.postsPerSecond / s.postsPerSecond, 2)}x` : ""),
  );
  const b = results.baseline;
  if (b) {
    console.log(`\nagainst the baseline (${BASELINE}): this checkout / baseline`);
    console.log(
      `  throughput ${fmt(o.mibps / b.mibps, 2)}x | CPU/GiB ${fmt(o.cpuPerGiB! / b.cpuPerGiB!, 2)}x (lower is better) | CPU/tunnel ${fmt(o.cpuPerTunnelUs! / b.cpuPerTunnelUs!, 2)}x (lower is better)`,
    );
    console.log(
      `  new tunnels/s ${fmt(o.tps / b.tps, 2)}x | round trip p50 +${fmt(o.rtt.p50 - b.rtt.p50, 1)} µs | idle tunnel RSS ${fmt(o.rss! / b.rss!, 2)}x | GET/s ${fmt(o.getsPerSecond / b.getsPerSecond, 2)}x | POST/s ${fmt(o.postsPerSecond / b.postsPerSecond, 2)}x`,
    );
  }
  console.log(
    JSON.stringify({
      bench: "proxy",
      ...(BASELINE ? { baseline: BASELINE } : {}),
      cores: os.cpus().length,
      node: process.version,
      transferBytes: TRANSFER_BYTES,
      idleTunnels: IDLE_TUNNELS,
      results,
    }),
  );
  process.exit(0);
}

main().catch((err: Error) => {
  console.error(`bench:proxy failed: ${err.stack ?? err.message}`);
  process.exit(1);
});
