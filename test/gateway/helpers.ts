// Test helpers: the real gateway process (bin/multienv-gateway.js) on loopback, real
// upstream servers, and a raw HTTP client for checks that need exact bytes on the wire.
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import http from "node:http";
import net, { type AddressInfo } from "node:net";
import { join } from "node:path";

export const TOKEN = "test-control-token-0123456789abcdef";
/** The control token in the gateway's own header, as a runner sends it beside a site's own Authorization. */
export const CONTROL = { "X-Multienv-Token": TOKEN };
/** CONTROL as a raw header line, for requests written byte for byte. */
export const CONTROL_LINE = `X-Multienv-Token: ${TOKEN}\r\n`;
const BIN = join(__dirname, "..", "..", "bin", "multienv-gateway.js");

export interface GatewayProcess extends ServiceProcess {
  url: string;
  port: number;
}

/** A service process (the gateway, a capture server) spawned with `args`, its JSON log lines collected. */
export interface ServiceProcess {
  process: ChildProcess;
  /** Every JSON line it printed so far. */
  logs: Array<Record<string, unknown>>;
  waitForLog(
    predicate: (line: Record<string, unknown>) => boolean,
    timeoutMs?: number,
  ): Promise<Record<string, unknown>>;
  /** Resolves with its `listening` line; rejects if it exits first. */
  listening: Promise<Record<string, unknown>>;
  stop(): Promise<void>;
}

/** Spawns `node <args>` with `env` added to this process's, collecting the JSON lines it prints. */
export function spawnService(args: string[], env: Record<string, string>): ServiceProcess {
  const child = spawn(process.execPath, args, { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
  const logs: Array<Record<string, unknown>> = [];
  const waiters: Array<() => void> = [];
  let buffered = "";
  let stderr = "";
  child.stdout!.setEncoding("utf8");
  child.stdout!.on("data", (text: string) => {
    buffered += text;
    let newline;
    while ((newline = buffered.indexOf("\n")) !== -1) {
      const line = buffered.slice(0, newline);
      buffered = buffered.slice(newline + 1);
      try {
        logs.push(JSON.parse(line));
      } catch {
        logs.push({ event: "unparsed", line });
      }
      for (const wake of waiters.splice(0)) wake();
    }
  });
  child.stderr!.on("data", (chunk) => (stderr += chunk));
  const waitForLog: ServiceProcess["waitForLog"] = (predicate, timeoutMs = 10_000) =>
    new Promise((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`no matching log line; have ${JSON.stringify(logs)}; stderr ${stderr}`)),
        timeoutMs,
      );
      const look = () => {
        const found = logs.find(predicate);
        if (found) {
          clearTimeout(timer);
          resolve(found);
        } else waiters.push(look);
      };
      look();
    });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const listening = new Promise<Record<string, unknown>>((resolve, reject) => {
    child.once("exit", (code) => reject(new Error(`${args.at(-1)} exited ${code}: ${stderr}`)));
    waitForLog((line) => line.event === "listening").then(resolve, reject);
  });
  listening.catch(() => undefined);
  return {
    process: child,
    logs,
    waitForLog,
    listening,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
      await exited;
    },
  };
}

/** Spawns the gateway with `config` (listen defaults to 127.0.0.1:0, one worker) and waits for its listening line. */
export async function startGateway(
  config: Record<string, unknown>,
  env: Record<string, string> = {},
): Promise<GatewayProcess> {
  const full = { listen: { host: "127.0.0.1", port: 0 }, workers: 1, ...config };
  const service = spawnService([BIN], {
    MULTIENV_GATEWAY_CONFIG: JSON.stringify(full),
    MULTIENV_CONTROL_TOKEN: TOKEN,
    ...env,
  });
  const port = (await service.listening).port as number;
  return { ...service, url: `http://127.0.0.1:${port}`, port };
}

/** Runs the gateway bin to completion with a given config text; for config errors. */
export function runGatewayExpectingExit(
  env: Record<string, string | undefined>,
): Promise<{ code: number | null; stderr: string; stdout: string }> {
  return new Promise((resolve) => {
    const merged: NodeJS.ProcessEnv = { ...process.env };
    delete merged.MULTIENV_GATEWAY_CONFIG;
    delete merged.MULTIENV_CONTROL_TOKEN;
    for (const [key, value] of Object.entries(env)) if (value !== undefined) merged[key] = value;
    const child = spawn(process.execPath, [BIN], { env: merged, stdio: ["ignore", "pipe", "pipe"] });
    let stderr = "";
    let stdout = "";
    child.stdout.on("data", (chunk) => (stdout += chunk));
    child.stderr.on("data", (chunk) => (stderr += chunk));
    const timer = setTimeout(() => child.kill("SIGKILL"), 15_000);
    child.once("exit", (code) => {
      clearTimeout(timer);
      resolve({ code, stderr, stdout });
    });
  });
}

export interface Upstream {
  server: http.Server;
  url: string;
  port: number;
  close(): Promise<void>;
}

export function startUpstream(handler: http.RequestListener): Promise<Upstream> {
  const server = http.createServer(handler);
  return new Promise((resolve) => {
    server.listen(0, "127.0.0.1", () => {
      const port = (server.address() as AddressInfo).port;
      resolve({
        server,
        port,
        url: `http://127.0.0.1:${port}`,
        close: () =>
          new Promise((done) => {
            server.close(() => done());
            server.closeAllConnections();
          }),
      });
    });
  });
}

/** Sends `request` bytes as they are and resolves with everything the server answered until it closed. */
export function rawExchange(port: number, request: string | Buffer, timeoutMs = 5_000): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, "127.0.0.1");
    const chunks: Buffer[] = [];
    socket.setTimeout(timeoutMs, () => socket.destroy(new Error("raw exchange timed out")));
    socket.on("data", (chunk) => chunks.push(chunk));
    socket.on("end", () => resolve(Buffer.concat(chunks)));
    socket.on("error", reject);
    socket.write(typeof request === "string" ? Buffer.from(request, "latin1") : request);
  });
}

export interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  rawHeaders: string[];
  body: string;
}

/**
 * One request through node's http client; `headers` may be a raw array to repeat names. It carries the control token
 * (CONTROL, which the published listener requires) unless `control` is false.
 */
export function request(
  url: string,
  options: {
    method?: string;
    headers?: Record<string, string> | string[];
    body?: string | Buffer;
    control?: boolean;
  } = {},
): Promise<Answer> {
  let headers = options.headers;
  if (options.control !== false)
    headers = Array.isArray(headers) ? [...headers, ...Object.entries(CONTROL).flat()] : { ...CONTROL, ...headers };
  // node adds no Host header of its own to a raw header array.
  if (Array.isArray(headers) && !headers.some((h, i) => i % 2 === 0 && h.toLowerCase() === "host"))
    headers = [...headers, "Host", new URL(url).host];
  return new Promise((resolve, reject) => {
    const req = http.request(
      url,
      { method: options.method ?? "GET", headers: headers as http.OutgoingHttpHeaders, agent: false },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (chunk) => chunks.push(chunk));
        res.on("end", () =>
          resolve({
            status: res.statusCode!,
            headers: res.headers,
            rawHeaders: res.rawHeaders,
            body: Buffer.concat(chunks).toString("utf8"),
          }),
        );
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.end(options.body);
  });
}

/** A server that answers every request with what it received, as JSON; `onRequest` sees each one. */
export function echoHandler(
  tag = "upstream",
  onRequest: (req: http.IncomingMessage) => void = () => undefined,
): http.RequestListener {
  return (req, res) => {
    onRequest(req);
    const chunks: Buffer[] = [];
    req.on("data", (chunk) => chunks.push(chunk));
    req.on("end", () => {
      const body = JSON.stringify({
        method: req.method,
        url: req.url,
        rawHeaders: req.rawHeaders,
        body: Buffer.concat(chunks).toString("latin1"),
      });
      res.writeHead(200, {
        "Content-Type": "application/json",
        "Content-Length": Buffer.byteLength(body),
        "X-Upstream": tag,
      });
      res.end(req.method === "HEAD" ? undefined : body);
    });
  };
}

export interface Echo {
  method: string;
  url: string;
  rawHeaders: string[];
  body: string;
}

/** Values of header `name` (any case) in a raw header array. */
export function headerValues(raw: string[], name: string): string[] {
  const out: string[] = [];
  for (let i = 0; i < raw.length; i += 2) if (raw[i].toLowerCase() === name.toLowerCase()) out.push(raw[i + 1]);
  return out;
}

/** The 24-byte header of a classic pcap file (little-endian, Ethernet): a capture that holds no packet yet. */
export const PCAP_HEADER = Buffer.from("d4c3b2a1020004000000000000000000ffff000001000000", "hex");

/**
 * Writes into `dir` what is named like `<container>`'s captures but is no regular file: `.pcap0` a FIFO (opening it
 * for reading would block), `.pcap1` a link to it, `.pcap2` a directory, `.pcap4` a link to a device; and `.pcap3`, a
 * real capture of PCAP_HEADER and 100 bytes. Returns the names of the ones that must never be served.
 */
export function hostileCaptureFiles(dir: string, container: string): string[] {
  execFileSync("mkfifo", [join(dir, `${container}.pcap0`)]);
  symlinkSync(join(dir, `${container}.pcap0`), join(dir, `${container}.pcap1`));
  mkdirSync(join(dir, `${container}.pcap2`));
  symlinkSync("/dev/zero", join(dir, `${container}.pcap4`));
  writeFileSync(join(dir, `${container}.pcap3`), Buffer.concat([PCAP_HEADER, Buffer.alloc(100, 1)]));
  return [0, 1, 2, 4].map((n) => `${container}.pcap${n}`);
}
