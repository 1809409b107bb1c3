// Test helpers for the site proxy: the real proxy process (or its supervisor) on loopback, and curl or a raw
// connection through it as the client. Servers, Chromium and waiting are the kit's (test/helpers/).
import { type ChildProcess, execFile, spawn } from "node:child_process";
import * as fs from "node:fs";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import { parseLiveSiteProxyLog, type SiteProxyLogRecord, type StartupRecord } from "../../src/protocol/site-proxy";
import { onCleanup, ROOT, tempDir } from "../helpers/processes";
import { until } from "../helpers/until";

export const PROXY_BIN = path.join(ROOT, "bin/multienv-site-proxy.js");
export const SUPERVISOR = path.join(ROOT, "src/site-proxy/supervisor.ts");

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
    ) => until(what, () => records().find(match) as T | undefined, timeoutMs),
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
