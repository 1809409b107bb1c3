// What the benches share to run their contenders as processes on loopback: free ports, waiting for a listener,
// nginx from a config of their own, and the gateway and site proxy from this checkout, their ports read back from
// their startup lines.
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import http2 from "node:http2";
import net from "node:net";
import tls from "node:tls";
import { join } from "node:path";

const REPO = join(__dirname, "..");

// The tests' own: one way to pick a free port.
export { freePort } from "../test/helpers/ports";

export async function waitForPort(port: number, timeoutMs = 10_000): Promise<void> {
  for (const deadline = Date.now() + timeoutMs; Date.now() < deadline;) {
    const up = await new Promise<boolean>((resolve) => {
      const socket = net.connect(port, "127.0.0.1");
      socket.once("connect", () => (socket.destroy(), resolve(true)));
      socket.once("error", () => resolve(false));
    });
    if (up) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`nothing listens on ${port}`);
}

/** nginx in the foreground with `body` as its config (pid and error log in `dir`). */
export function startNginx(dir: string, name: string, body: string): ChildProcess {
  const conf = join(dir, `${name}.conf`);
  writeFileSync(
    conf,
    `daemon off;
master_process on;
pid ${dir}/${name}.pid;
error_log ${dir}/${name}-error.log warn;
${body}
`,
  );
  const child = spawn("nginx", ["-c", conf, "-p", dir], { stdio: ["ignore", "ignore", "inherit"] });
  child.on("exit", (code) => code && console.error(`nginx ${name} exited ${code}; see ${dir}/${name}-error.log`));
  return child;
}

/**
 * nginx terminating TLS with HTTP/2 on `port` in front of `upstreamPort` (kept-alive HTTP/1.1), as a reverse proxy
 * passes a request on: the fair peer of the site proxy and the gateway behind it.
 */
export function startNginxTlsH2(
  dir: string,
  options: { port: number; upstreamPort: number; cert: string; key: string; keepalive: number; buffering: boolean },
): ChildProcess {
  return startNginx(
    dir,
    "tls-h2",
    `worker_processes auto;
events { worker_connections 4096; }
http {
  access_log off;
  keepalive_requests 1000000;
  upstream site { server 127.0.0.1:${options.upstreamPort}; keepalive ${options.keepalive}; }
  server {
    listen 127.0.0.1:${options.port} ssl http2 backlog=4096;
    ssl_certificate ${options.cert};
    ssl_certificate_key ${options.key};
    ssl_session_cache shared:SSL:1m;
    location / {
      proxy_pass http://site;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host $http_host;
      proxy_set_header X-Forwarded-Host $http_host;
      proxy_set_header X-Forwarded-Proto https;${options.buffering ? "" : "\n      proxy_buffering off;"}
    }
  }
}`,
  );
}

/** Starts a node process and resolves with it once a stdout line has `marker`, parsed as JSON. */
export function startNode<T>(
  args: string[],
  env: NodeJS.ProcessEnv,
  marker: string,
): Promise<{ child: ChildProcess; line: T }> {
  const child = spawn(process.execPath, args, {
    cwd: REPO,
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "inherit"],
  });
  return new Promise((resolve, reject) => {
    let text = "";
    const onData = (chunk: Buffer) => {
      text += chunk;
      const line = text.split("\n").find((l) => l.includes(marker));
      if (!line) return;
      child.stdout!.off("data", onData);
      child.stdout!.resume();
      resolve({ child, line: JSON.parse(line) as T });
    };
    child.stdout!.on("data", onData);
    child.once("exit", (code) => reject(new Error(`${args.join(" ")} exited ${code} before "${marker}"`)));
  });
}

/** The gateway from this checkout (`bin/multienv-gateway.js`, or `script` through tsx), with `config`. */
export async function startGateway(
  config: Record<string, unknown>,
  token: string,
  nodeArgs: string[] = [],
  script?: string,
): Promise<{ child: ChildProcess; port: number; workers: number }> {
  const args = script
    ? [...nodeArgs, "--require", "tsx/cjs", script]
    : [...nodeArgs, join(REPO, "bin", "multienv-gateway.js")];
  const { child, line } = await startNode<{ port: number; workers: number }>(
    args,
    { MULTIENV_CONTROL_TOKEN: token, MULTIENV_GATEWAY_CONFIG: JSON.stringify(config) },
    '"listening"',
  );
  return { child, port: line.port, workers: line.workers };
}

/**
 * A site proxy's config on loopback, as a computer's proxy is configured: any free port, `gateway` (a gateway's
 * browse listener) for the `sites` it routes, no reach beyond them, a resolver that answers nothing (every name it
 * serves is a site's), its log at `log`; `extra` adds what a bench varies (a request log).
 */
export function siteProxyOnLoopback(
  gateway: string,
  sites: Record<string, string[]>,
  log: string,
  extra: Record<string, unknown> = {},
): Record<string, unknown> {
  return {
    listen: { host: "127.0.0.1", port: 0 },
    gateway,
    sites,
    reach: "none",
    log,
    dnsServers: ["127.0.0.1:1"],
    ...extra,
  };
}

/** The site proxy from `checkout` (this one unless given), with `config` (its listen address and log path included). */
export async function startSiteProxy(
  config: Record<string, unknown>,
  nodeArgs: string[] = [],
  checkout = REPO,
): Promise<{ child: ChildProcess; port: number }> {
  const { child, line } = await startNode<{ proxy: { port: number } }>(
    [...nodeArgs, join(checkout, "bin", "multienv-site-proxy.js")],
    {
      MULTIENV_SITE_PROXY_CONFIG: JSON.stringify(config),
      MULTIENV_SITE_PROXY_TOKEN: "bench-site-proxy-token-0123456789abcdef",
    },
    '"startup"',
  );
  return { child, port: line.proxy.port };
}

/** CPU seconds (user + system, every thread) used so far by the processes `pids`, from /proc (10 ms ticks). */
export function cpuSeconds(pids: number[]): number {
  let ticks = 0;
  for (const pid of pids) {
    try {
      const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
      ticks += Number(fields[11]) + Number(fields[12]); // utime, stime (fields 14 and 15)
    } catch {
      // gone
    }
  }
  return ticks / 100; // USER_HZ
}

/** `pid` and its child processes (a cluster's workers, nginx's workers). */
export function processTree(pid: number): number[] {
  try {
    const children = readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8").trim().split(/\s+/).filter(Boolean);
    return [pid, ...children.map(Number)];
  } catch {
    return [pid];
  }
}

/**
 * Counts what the processes `pids` spend on the CPU while `work` runs, divided by the requests it says it made:
 * microseconds per request, a figure a busy machine does not move the way it moves latency (other processes take
 * turns on the cores, not this work's CPU time). The 10 ms ticks make it exact to 1% over a second of CPU.
 */
export async function cpuPerRequest<T extends { requests: number }>(
  pids: number[],
  work: () => T | Promise<T>,
): Promise<T & { cpuUsPerRequest: number; cpuSeconds: number }> {
  const before = cpuSeconds(pids);
  const result = await work();
  const used = cpuSeconds(pids) - before;
  return { ...result, cpuSeconds: used, cpuUsPerRequest: (used * 1e6) / Math.max(result.requests, 1) };
}

/** A TLS connection with ALPN h2 to `servername`, straight to `port` or through a CONNECT proxy at `proxyPort`. */
export function h2Connection(servername: string, port: number, proxyPort?: number): Promise<tls.TLSSocket> {
  const secure = (socket?: net.Socket) =>
    new Promise<tls.TLSSocket>((resolve, reject) => {
      const options = { servername, ALPNProtocols: ["h2"], rejectUnauthorized: false };
      const conversation = socket
        ? tls.connect({ ...options, socket })
        : tls.connect({ ...options, host: "127.0.0.1", port });
      conversation.once("secureConnect", () =>
        conversation.alpnProtocol === "h2" ? resolve(conversation) : reject(new Error(`${servername}: no h2`)),
      );
      conversation.once("error", reject);
    });
  if (proxyPort === undefined) return secure();
  return new Promise((resolve, reject) => {
    const socket = net.connect(proxyPort, "127.0.0.1");
    socket.once("error", reject);
    socket.once("connect", () =>
      socket.write(`CONNECT ${servername}:${port} HTTP/1.1\r\nHost: ${servername}:${port}\r\n\r\n`),
    );
    socket.once("data", (answer: Buffer) => {
      if (!/^HTTP\/1\.1 200/.test(answer.toString("latin1")))
        return reject(new Error(`CONNECT: ${answer.toString("latin1")}`));
      secure(socket).then(resolve, reject);
    });
  });
}

/**
 * `requests` GETs of `path` on one HTTP/2 connection, `concurrency` streams at a time (a page's worth), every answer
 * read to its end; the requests made and the median time of one.
 */
export async function h2Requests(
  connection: tls.TLSSocket,
  authority: string,
  path: string,
  requests: number,
  concurrency: number,
): Promise<{ requests: number; seconds: number; p50Ms: number; errors: number }> {
  const session = http2.connect(`https://${authority}`, { createConnection: () => connection });
  session.on("error", () => undefined);
  const times: number[] = [];
  let started = 0;
  let errors = 0;
  const begin = performance.now();
  const one = (): Promise<void> =>
    new Promise((resolve) => {
      const t = performance.now();
      const stream = session.request({ ":path": path });
      let status = 0;
      stream.on("response", (headers) => (status = Number(headers[":status"])));
      stream.on("data", () => undefined);
      stream.on("error", () => (errors++, resolve()));
      stream.on("end", () => {
        if (status !== 200) errors++;
        times.push(performance.now() - t);
        resolve();
      });
    });
  const lane = async () => {
    while (started < requests) {
      started++;
      await one();
    }
  };
  await Promise.all(Array.from({ length: concurrency }, lane));
  const seconds = (performance.now() - begin) / 1000;
  await new Promise<void>((resolve) => session.close(() => resolve()));
  times.sort((a, b) => a - b);
  return { requests, seconds, p50Ms: times[Math.floor(times.length / 2)] ?? NaN, errors };
}

/** A test CA and a leaf for shop.test, bench.test and 127.0.0.1, as nginx's certificate (PEM files in `dir`). */
export function testCertificate(dir: string): { cert: string; key: string } {
  const run = (...args: string[]) => execFileSync("openssl", args, { cwd: dir, stdio: ["ignore", "ignore", "pipe"] });
  run(
    "req",
    "-x509",
    "-newkey",
    "ec",
    "-pkeyopt",
    "ec_paramgen_curve:P-256",
    "-nodes",
    "-keyout",
    "ca-key.pem",
    "-out",
    "ca.pem",
    "-subj",
    "/CN=bench test CA",
    "-days",
    "2",
  );
  run(
    "req",
    "-newkey",
    "ec",
    "-pkeyopt",
    "ec_paramgen_curve:P-256",
    "-nodes",
    "-keyout",
    "leaf-key.pem",
    "-out",
    "leaf.csr",
    "-subj",
    "/CN=shop.test",
  );
  execFileSync("sh", ["-c", "printf 'subjectAltName=DNS:shop.test,DNS:bench.test,IP:127.0.0.1\\n' > leaf.ext"], {
    cwd: dir,
  });
  run(
    "x509",
    "-req",
    "-in",
    "leaf.csr",
    "-CA",
    "ca.pem",
    "-CAkey",
    "ca-key.pem",
    "-CAcreateserial",
    "-out",
    "leaf.pem",
    "-days",
    "2",
    "-extfile",
    "leaf.ext",
  );
  return { cert: join(dir, "leaf.pem"), key: join(dir, "leaf-key.pem") };
}
