// Test helpers for the site proxy: the real proxy process (or its supervisor) on loopback, a DNS server on
// loopback so no test asks the machine's own resolver, a gateway and origin servers, and curl as the client.
import { type ChildProcess, execFile, execFileSync, spawn } from "node:child_process";
import * as dgram from "node:dgram";
import * as fs from "node:fs";
import * as http from "node:http";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import { chromium, type Browser } from "playwright-core";
import { CHROMIUM_FLAGS } from "../../src/browser/launcher";
import { parseLiveSiteProxyLog, type SiteProxyLogRecord, type StartupRecord } from "../../src/protocol/site-proxy";

export const ROOT = path.resolve(__dirname, "../..");
export const PROXY_BIN = path.join(ROOT, "bin/multienv-site-proxy.js");
export const SUPERVISOR = path.join(ROOT, "src/site-proxy/supervisor.ts");

const cleanups: (() => unknown)[] = [];
/** Runs everything registered with `onCleanup`, newest first; call from afterEach/afterAll. */
export async function cleanup(): Promise<void> {
  while (cleanups.length > 0) await cleanups.pop()!();
}
export function onCleanup(fn: () => unknown): void {
  cleanups.push(fn);
}

export function tempDir(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "site-proxy-test-"));
  onCleanup(() => fs.rmSync(dir, { recursive: true, force: true, maxRetries: 10, retryDelay: 100 }));
  return dir;
}

/** Headless Chromium that trusts `caCertPath` alone (an NSS database of its own) and uses the proxy at `proxyUrl`. */
export async function chromiumTrusting(
  caCertPath: string,
  proxyUrl: string,
  extraArgs: string[] = [],
): Promise<Browser> {
  const home = tempDir();
  const nssdb = path.join(home, ".pki/nssdb");
  fs.mkdirSync(nssdb, { recursive: true });
  execFileSync("certutil", ["-d", `sql:${nssdb}`, "-N", "--empty-password"]);
  execFileSync("certutil", ["-d", `sql:${nssdb}`, "-A", "-t", "C,,", "-n", "multienv env CA", "-i", caCertPath]);
  return chromium.launch({
    executablePath: "/usr/bin/chromium",
    env: { ...process.env, HOME: home },
    args: [...CHROMIUM_FLAGS, `--proxy-server=${proxyUrl}`, ...extraArgs],
  });
}

/** A Chromium with the computer's flags and no proxy: a client of a page served here, not a computer. */
export function chromiumDirect(): Promise<Browser> {
  return chromium.launch({ executablePath: "/usr/bin/chromium", args: CHROMIUM_FLAGS });
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

export async function waitFor<T>(
  what: string,
  probe: () => T | undefined | Promise<T | undefined>,
  timeoutMs = 5_000,
): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > until) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(25);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// A DNS server on loopback answering A queries from a table; any other name is NXDOMAIN.

export interface TestDns {
  server: string; // host:port for dnsServers
  queries: string[];
}

function readName(message: Buffer, offset: number): { name: string; end: number } {
  const labels: string[] = [];
  while (message[offset] !== 0) {
    const length = message[offset];
    labels.push(message.subarray(offset + 1, offset + 1 + length).toString("ascii"));
    offset += 1 + length;
  }
  return { name: labels.join(".").toLowerCase(), end: offset + 1 };
}

export async function startDns(answers: Record<string, string[]>): Promise<TestDns> {
  const socket = dgram.createSocket("udp4");
  const queries: string[] = [];
  socket.on("message", (query, peer) => {
    const { name, end } = readName(query, 12);
    const type = query.readUInt16BE(end);
    queries.push(name);
    const known = answers[name];
    const records = known && type === 1 ? known : [];
    const header = Buffer.alloc(12);
    query.copy(header, 0, 0, 2); // id
    header.writeUInt16BE(0x8180 | (known ? 0 : 3), 2); // response, recursion available, NOERROR or NXDOMAIN
    header.writeUInt16BE(1, 4);
    header.writeUInt16BE(records.length, 6);
    const question = query.subarray(12, end + 4);
    const answerRecords = records.map((address) => {
      const record = Buffer.alloc(16);
      record.writeUInt16BE(0xc00c, 0); // the name, by pointer to the question
      record.writeUInt16BE(1, 2); // A
      record.writeUInt16BE(1, 4); // IN
      record.writeUInt32BE(60, 6);
      record.writeUInt16BE(4, 10);
      address.split(".").forEach((octet, i) => record.writeUInt8(Number(octet), 12 + i));
      return record;
    });
    socket.send(Buffer.concat([header, question, ...answerRecords]), peer.port, peer.address);
  });
  await new Promise<void>((resolve) => socket.bind(0, "127.0.0.1", resolve));
  onCleanup(() => socket.close());
  return { server: `127.0.0.1:${socket.address().port}`, queries };
}

// ---------------------------------------------------------------------------------------------------------------
// Servers on loopback.

export interface RecordedRequest {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  rawHeaders: string[];
  /** Which connection (by order of arrival) carried the request. */
  connection: number;
}

export interface TestHttpServer {
  port: number;
  url: string;
  requests: RecordedRequest[];
  connections: number;
  server: http.Server;
}

/** An HTTP server that records each request and answers `body(req)` as text/html. */
export async function startHttpServer(
  body: (req: http.IncomingMessage, res: http.ServerResponse) => string = (req) =>
    `<html><body>hello from ${req.url}</body></html>`,
  host = "127.0.0.1",
  port = 0,
): Promise<TestHttpServer> {
  const state: TestHttpServer = {
    port: 0,
    url: "",
    requests: [],
    connections: 0,
    server: undefined as unknown as http.Server,
  };
  const ids = new WeakMap<net.Socket, number>();
  const server = http.createServer((req, res) => {
    state.requests.push({
      method: req.method!,
      url: req.url!,
      headers: req.headers,
      rawHeaders: req.rawHeaders,
      connection: ids.get(req.socket)!,
    });
    req.resume();
    req.on("end", () => {
      const text = body(req, res);
      if (!res.headersSent) res.writeHead(200, { "Content-Type": "text/html; charset=utf-8", "X-Origin": "test" });
      res.end(text);
    });
  });
  server.on("connection", (socket) => ids.set(socket, ++state.connections));
  await new Promise<void>((resolve, reject) => server.once("error", reject).listen(port, host, resolve));
  state.port = (server.address() as net.AddressInfo).port;
  state.url = `http://${host}:${state.port}`;
  state.server = server;
  onCleanup(
    () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(resolve);
      }),
  );
  return state;
}

/** A TCP server that echoes every byte back. */
export async function startEchoServer(
  host = "127.0.0.1",
): Promise<{ port: number; server: net.Server; sockets: Set<net.Socket> }> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
    socket.on("error", () => socket.destroy());
    socket.pipe(socket);
  });
  await new Promise<void>((resolve) => server.listen({ port: 0, host, backlog: 4096 }, resolve));
  onCleanup(
    () =>
      new Promise((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve(undefined));
      }),
  );
  return { port: (server.address() as net.AddressInfo).port, server, sockets };
}

/**
 * A loopback address and port where connection attempts hang: a listener whose accept queue is full and never drained.
 */
export async function startHangingAddress(host = "127.0.0.3"): Promise<{ host: string; port: number }> {
  const child = spawn(
    "python3",
    [
      "-c",
      `
import socket, sys, time
s = socket.socket(); s.bind((${JSON.stringify(host)}, 0)); s.listen(0)
port = s.getsockname()[1]
fill = []
for _ in range(4):
    c = socket.socket(); c.setblocking(False)
    try: c.connect((${JSON.stringify(host)}, port))
    except BlockingIOError: pass
    fill.append(c)
time.sleep(0.2)
print(port, flush=True)
time.sleep(3600)
`,
    ],
    { stdio: ["ignore", "pipe", "inherit"] },
  );
  onCleanup(() => child.kill("SIGKILL"));
  const port = await new Promise<number>((resolve, reject) => {
    child.stdout.once("data", (data: Buffer) => resolve(Number(data.toString().trim())));
    child.once("exit", () => reject(new Error("the hanging listener exited")));
  });
  return { host, port };
}

/** A port where nothing listens (connections are refused). */
export async function closedPort(host = "127.0.0.1"): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  const port = (server.address() as net.AddressInfo).port;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

// ---------------------------------------------------------------------------------------------------------------
// The proxy process.

export interface ProxyProcess {
  child: ChildProcess;
  startup: StartupRecord;
  port: number;
  url: string;
  dir: string;
  logPath: string;
  caCertPath: string;
  /** What the process wrote on stderr so far. */
  stderr(): string;
  records(): SiteProxyLogRecord[];
  waitForRecord<T extends SiteProxyLogRecord>(
    what: string,
    match: (r: SiteProxyLogRecord) => boolean,
    timeoutMs?: number,
  ): Promise<T>;
  stop(): Promise<void>;
}

export interface StartOptions {
  /** Run the supervisor (the container's entrypoint) instead of the proxy itself. */
  supervise?: boolean;
  /** Raise the open files limit first, through bash's ulimit. */
  ulimit?: number;
  /** MULTIENV_SITE_PROXY_TOKEN (TEST_TOKEN by default), e.g. the token a gateway derives for its computer. */
  token?: string;
}

/** The control listener's token in every test proxy's environment. */
export const TEST_TOKEN = "test-control-token-0123456789abcdef";

function readStartup(child: ChildProcess, stderr: () => string): Promise<StartupRecord> {
  return new Promise((resolve, reject) => {
    let text = "";
    const onData = (data: Buffer) => {
      text += data.toString();
      for (const line of text.split("\n")) {
        if (!line.startsWith("{")) continue;
        const record = JSON.parse(line) as SiteProxyLogRecord;
        if (record.event === "startup") {
          child.stdout!.off("data", onData);
          child.stdout!.resume();
          return resolve(record);
        }
      }
    };
    child.stdout!.on("data", onData);
    child.once("exit", (code) => reject(new Error(`the proxy exited (${code}) before its startup line: ${stderr()}`)));
  });
}

export async function startProxy(config: Record<string, unknown>, options: StartOptions = {}): Promise<ProxyProcess> {
  const dir = tempDir();
  const logPath = path.join(dir, "site-proxy.log");
  // Lookups go to a loopback port where no DNS server listens unless a test gives its own: a test never asks the
  // machine's resolver, and a name it forgot to answer fails at once instead of leaking out. The tests' origins
  // listen on 127.0.0.1, which stands in for a public address (allowAddresses); every other loopback address stays
  // refused, and a test of the address check itself gives its own allowAddresses.
  const full = {
    listen: { host: "127.0.0.1", port: 0 },
    gateway: "http://127.0.0.1:9",
    sites: {},
    reach: "allow-all",
    log: logPath,
    dnsServers: ["127.0.0.1:1"],
    allowAddresses: ["127.0.0.1/32"],
    ...config,
  };
  const command = options.supervise
    ? [process.execPath, "--require", "tsx/cjs", SUPERVISOR, PROXY_BIN]
    : [process.execPath, PROXY_BIN];
  const [file, args] = options.ulimit
    ? [
        "bash",
        ["-c", `ulimit -n ${options.ulimit} 2>/dev/null || ulimit -n "$(ulimit -Hn)"; exec "$@"`, "bash", ...command],
      ]
    : [command[0], command.slice(1)];
  const child = spawn(file, args as string[], {
    cwd: ROOT,
    env: {
      ...process.env,
      MULTIENV_SITE_PROXY_CONFIG: JSON.stringify(full),
      MULTIENV_SITE_PROXY_TOKEN: options.token ?? TEST_TOKEN,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once("exit", resolve));
    child.kill("SIGTERM");
    const timer = setTimeout(() => child.kill("SIGKILL"), 3_000);
    await exited;
    clearTimeout(timer);
  };
  onCleanup(stop);
  let stderr = "";
  child.stderr!.on("data", (d: Buffer) => (stderr += d.toString()));
  const startup = await readStartup(child, () => stderr);
  const records = () => (fs.existsSync(logPath) ? parseLiveSiteProxyLog(fs.readFileSync(logPath, "utf8")) : []);
  return {
    child,
    startup,
    port: startup.proxy.port,
    url: `http://127.0.0.1:${startup.proxy.port}`,
    dir,
    logPath: full.log as string,
    caCertPath: startup.caCert,
    stderr: () => stderr,
    records,
    waitForRecord: <T extends SiteProxyLogRecord>(
      what: string,
      match: (r: SiteProxyLogRecord) => boolean,
      timeoutMs = 5_000,
    ) => waitFor(what, () => records().find(match) as T | undefined, timeoutMs),
    stop,
  };
}

// ---------------------------------------------------------------------------------------------------------------
// curl as the client.

export interface CurlResult {
  /** The origin's status, or 0 when there was none (a refused CONNECT). */
  status: number;
  /** The proxy's answer to CONNECT, or 0 without one. */
  connectStatus: number;
  /** Headers of the last response block curl saw (lower-case names). */
  headers: Record<string, string>;
  body: string;
  stderr: string;
  exitCode: number;
}

export function curl(proxyUrl: string, url: string, extra: string[] = []): Promise<CurlResult> {
  return curlToFile([
    "-sS",
    "-x",
    proxyUrl,
    "-D",
    "-",
    "-o",
    "BODY",
    "-w",
    "\n%{http_code} %{http_connect}",
    "--max-time",
    "20",
    ...extra,
    url,
  ]);
}

function curlToFile(args: string[]): Promise<CurlResult> {
  const bodyFile = path.join(os.tmpdir(), `curl-body-${process.pid}-${Math.random().toString(36).slice(2)}`);
  const realArgs = args.map((a) => (a === "BODY" ? bodyFile : a));
  return new Promise((resolve) => {
    execFile("curl", realArgs, { encoding: "utf8" }, (err, stdout, stderr) => {
      const body = fs.existsSync(bodyFile) ? fs.readFileSync(bodyFile, "utf8") : "";
      fs.rmSync(bodyFile, { force: true });
      const lines = stdout.split("\n");
      const [status, connectStatus] = (lines.pop() ?? "0 0").split(" ").map(Number);
      const blocks = lines
        .join("\n")
        .split(/\r?\n\r?\n/)
        .filter((b) => b.trim() !== "");
      const headers: Record<string, string> = {};
      for (const line of (blocks[blocks.length - 1] ?? "").split(/\r?\n/).slice(1)) {
        const colon = line.indexOf(":");
        if (colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
      }
      resolve({
        status,
        connectStatus,
        headers,
        body,
        stderr,
        exitCode: err ? ((err as { code?: number }).code ?? 1) : 0,
      });
    });
  });
}

/** Opens a CONNECT tunnel through the proxy by hand: resolves with the socket once the proxy says 200. */
export function connectThrough(
  proxyPort: number,
  target: string,
): Promise<{ socket: net.Socket; status: number; head: string }> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(proxyPort, "127.0.0.1");
    let received = Buffer.alloc(0);
    socket.once("error", reject);
    socket.write(`CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n\r\n`);
    const onData = (data: Buffer) => {
      received = Buffer.concat([received, data]);
      const end = received.indexOf("\r\n\r\n");
      if (end < 0) return;
      socket.off("data", onData);
      socket.off("error", reject);
      const head = received.subarray(0, end).toString();
      const rest = received.subarray(end + 4);
      if (rest.length > 0) socket.unshift(rest);
      resolve({ socket, status: Number(head.split(" ")[1]), head });
    };
    socket.on("data", onData);
  });
}
