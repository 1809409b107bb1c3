// A small Docker Engine API client (node http, no docker CLI): the local engine's unix socket, or an engine on
// another machine over SSH, where each HTTP connection is an `ssh <host> docker system dial-stdio` (the docker
// CLI's own ssh:// transport), so the remote engine's socket is never exposed on the network.
import { spawn } from "node:child_process";
import http from "node:http";
import { Duplex, PassThrough, type Readable } from "node:stream";
import type { SshEndpoint } from "../plan/ssh";
import { prepareSsh, sshArgs } from "./ssh";

export const DEFAULT_DOCKER_SOCKET = "/var/run/docker.sock";

/** Where an engine is: unset or `unix:///path` for a local socket, `ssh://user@host[:port]` for a remote one. */
export interface EngineTarget {
  host?: string;
  /** Extra `ssh` options for an ssh:// host (`-o ...` pairs). */
  sshOptions?: string[];
  /**
   * The host as src/plan/ssh.ts reaches it (its pinned host key, one shared connection): when set, `host` only
   * names the engine, and every connection goes through this endpoint.
   */
  ssh?: SshEndpoint;
}

export class DockerApiError extends Error {
  constructor(
    readonly status: number,
    readonly method: string,
    readonly path: string,
    message: string,
  ) {
    super(`Docker Engine API ${method} ${path}: ${status} ${message}`);
  }
}

export interface DockerApi {
  /** Where the engine is, for messages. */
  readonly where: string;
  /** JSON in, JSON out; statuses >= 400 throw DockerApiError with the engine's message. */
  request<T = any>(method: string, path: string, body?: unknown): Promise<T>;
  /** The raw body (e.g. logs, archives). */
  raw(method: string, path: string): Promise<Buffer>;
  /** Sends `body` as the request body and returns the response as it arrives (image builds and loads). */
  stream(method: string, path: string, body: Readable, headers?: Record<string, string>): Promise<http.IncomingMessage>;
  /** Closes kept-alive connections (ssh processes). */
  close(): void;
}

/** The socket path of a local target: `unix://` URL, DOCKER_HOST when it is one, or the default socket. */
function localSocket(host: string | undefined): string {
  const chosen = host ?? (process.env.DOCKER_HOST?.startsWith("unix://") ? process.env.DOCKER_HOST : undefined);
  return chosen ? chosen.slice("unix://".length) : DEFAULT_DOCKER_SOCKET;
}

/** `ssh` arguments that run `docker system dial-stdio` on an ssh:// host. */
export function dialStdioArgs(host: string, sshOptions: string[] = []): string[] {
  const url = new URL(host);
  if (url.protocol !== "ssh:" || !url.hostname) throw new Error(`engine host ${host}: expected ssh://user@host[:port]`);
  const destination = `${url.username ? `${decodeURIComponent(url.username)}@` : ""}${url.hostname.replace(/^\[|\]$/g, "")}`;
  return [...sshOptions, ...(url.port ? ["-p", url.port] : []), "--", destination, "docker", "system", "dial-stdio"];
}

/** One connection to an ssh:// engine: the ssh process's stdout and stdin as a socket-like duplex. */
function sshConnection(host: string, sshOptions: string[] | undefined, endpoint?: SshEndpoint): Duplex {
  const args = endpoint ? sshArgs(endpoint, ["docker", "system", "dial-stdio"]) : dialStdioArgs(host, sshOptions);
  const child = spawn("ssh", args, { stdio: ["pipe", "pipe", "pipe"] });
  let stderr = "";
  child.stderr.on("data", (c: Buffer) => (stderr = (stderr + c.toString("utf8")).slice(-2000)));
  // The answer ends only once ssh has exited: a failed ssh (a refused host key, say) then ends the connection
  // with its own message rather than as a bare hang-up.
  // Both sides go through pass-throughs: ssh's own pipes closing (it exited) must not end the connection before
  // its exit code and message are known.
  const readable = new PassThrough();
  child.stdout.pipe(readable, { end: false });
  const writable = new PassThrough();
  writable.pipe(child.stdin);
  const duplex = Duplex.from({ readable, writable });
  // Closing a connection ends its ssh process, which aborts the pipes' pending reads and writes: expected then.
  child.stdout.on("error", () => undefined);
  child.stdin.on("error", () => undefined);
  child.on("error", (e) => duplex.destroy(new Error(`ssh to ${host} did not start (${e.message}); is ssh installed?`)));
  child.on("close", (code) => {
    if (code !== 0 && code !== null)
      duplex.destroy(new Error(`ssh to ${host} exited ${code}: ${stderr.trim().split("\n").at(-1) ?? ""}`));
    else readable.end();
  });
  duplex.on("close", () => child.kill());
  // A connection the agent drops while idle is destroyed with an abort: nobody is waiting on it then.
  duplex.on("error", () => undefined);
  // http.Agent treats its connections as sockets.
  Object.assign(duplex, {
    setKeepAlive: () => duplex,
    setNoDelay: () => duplex,
    setTimeout: () => duplex,
    unref: () => duplex,
    ref: () => duplex,
  });
  return duplex;
}

export function dockerApi(target: EngineTarget | string = {}): DockerApi {
  const { host, sshOptions, ssh } =
    typeof target === "string" ? { host: `unix://${target}`, sshOptions: undefined, ssh: undefined } : target;
  const remote = host?.startsWith("ssh://") ?? false;
  if (host !== undefined && !remote && !host.startsWith("unix://"))
    throw new Error(`engine host ${host}: expected unix:///path or ssh://user@host`);
  const socketPath = remote ? undefined : localSocket(host);
  const where = remote ? host! : socketPath!;
  const agent = remote
    ? new http.Agent({ keepAlive: true, maxSockets: 8 })
    : new http.Agent({ keepAlive: true, maxSockets: 16 });
  if (remote && ssh === undefined)
    (agent as unknown as { createConnection: () => Duplex }).createConnection = () => sshConnection(host!, sshOptions);
  if (remote && ssh !== undefined) {
    // The host's files and its shared connection first (once per client), then each connection is a session on it.
    let prepared: Promise<void> | undefined;
    (
      agent as unknown as { createConnection: (o: unknown, done: (e: Error | null, s?: Duplex) => void) => undefined }
    ).createConnection = (_o, done) => {
      prepared ??= prepareSsh(ssh);
      prepared.then(
        () => done(null, sshConnection(host!, undefined, ssh)),
        (e: Error) => done(e),
      );
      return undefined;
    };
  }

  const open = (method: string, path: string, headers: Record<string, string | number>) =>
    http.request({
      agent,
      ...(socketPath ? { socketPath } : { host: "docker" }),
      method,
      path,
      headers: { host: "docker", ...headers },
    });
  const unreachable = (e: Error) =>
    new Error(
      remote
        ? `Docker Engine API at ${where} is not reachable (${e.message})`
        : `Docker Engine API at ${where} is not reachable (${e.message}); start dockerd`,
    );

  const send = (method: string, path: string, body?: unknown): Promise<{ status: number; data: Buffer }> =>
    new Promise((resolve, reject) => {
      const payload = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
      const req = open(
        method,
        path,
        payload ? { "content-type": "application/json", "content-length": payload.length } : {},
      );
      req.on("response", (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, data: Buffer.concat(chunks) }));
        res.on("error", reject);
      });
      req.on("error", (e) => reject(unreachable(e)));
      req.end(payload);
    });
  return {
    where,
    async request(method, path, body) {
      const data = checked(method, path, await send(method, path, body));
      return data.length ? JSON.parse(data.toString("utf8")) : undefined;
    },
    async raw(method, path) {
      return checked(method, path, await send(method, path));
    },
    stream(method, path, body, headers = {}) {
      return new Promise((resolve, reject) => {
        const req = open(method, path, { "transfer-encoding": "chunked", ...headers });
        req.on("response", async (res) => {
          if ((res.statusCode ?? 0) < 400) return resolve(res);
          const chunks: Buffer[] = [];
          for await (const c of res) chunks.push(c as Buffer);
          try {
            checked(method, path, { status: res.statusCode ?? 0, data: Buffer.concat(chunks) });
          } catch (e) {
            reject(e);
          }
        });
        req.on("error", (e) => reject(unreachable(e)));
        body.on("error", (e) => req.destroy(e));
        body.pipe(req);
      });
    },
    close() {
      agent.destroy();
    },
  };
}

function checked(method: string, path: string, r: { status: number; data: Buffer }): Buffer {
  if (r.status >= 400) {
    let message = r.data.toString("utf8");
    try {
      message = JSON.parse(message).message ?? message;
    } catch {
      /* plain text */
    }
    throw new DockerApiError(r.status, method, path, message.trim());
  }
  return r.data;
}

/** Container logs as text (the engine multiplexes stdout/stderr in 8-byte-headed frames without a TTY). */
export async function containerLogs(api: DockerApi, id: string, tail = 50): Promise<string> {
  const buf = await api.raw("GET", `/containers/${encodeURIComponent(id)}/logs?stdout=1&stderr=1&tail=${tail}`);
  const out: Buffer[] = [];
  let i = 0;
  while (i + 8 <= buf.length && (buf[i] === 1 || buf[i] === 2) && buf[i + 1] === 0) {
    const size = buf.readUInt32BE(i + 4);
    out.push(buf.subarray(i + 8, i + 8 + size));
    i += 8 + size;
  }
  return (i === 0 ? buf : Buffer.concat(out)).toString("utf8");
}

/** True when `error` is the engine saying the object is not there. */
export function isNotFound(error: unknown): boolean {
  return error instanceof DockerApiError && error.status === 404;
}
