// A minimal Docker Engine API client over the engine's unix socket (node http, no docker CLI):
// what the e2e deploy (engine-deploy.ts) and its tests need, nothing more.
import http from "node:http";

export const DEFAULT_DOCKER_SOCKET = "/var/run/docker.sock";

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
  /** JSON in, JSON out; statuses >= 400 throw DockerApiError with the engine's message. */
  request<T = any>(method: string, path: string, body?: unknown): Promise<T>;
  /** The raw body (e.g. logs, archives). */
  raw(method: string, path: string): Promise<Buffer>;
}

export function dockerApi(socketPath = process.env.DOCKER_SOCKET ?? DEFAULT_DOCKER_SOCKET): DockerApi {
  const send = (method: string, path: string, body?: unknown): Promise<{ status: number; data: Buffer }> =>
    new Promise((resolve, reject) => {
      const payload = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
      const req = http.request(
        { socketPath, method, path, headers: payload ? { "content-type": "application/json", "content-length": payload.length } : {} },
        (res) => {
          const chunks: Buffer[] = [];
          res.on("data", (c: Buffer) => chunks.push(c));
          res.on("end", () => resolve({ status: res.statusCode ?? 0, data: Buffer.concat(chunks) }));
          res.on("error", reject);
        },
      );
      req.on("error", (e) => reject(new Error(`Docker Engine API at ${socketPath} is not reachable (${e.message}); start dockerd`)));
      req.end(payload);
    });
  const check = (method: string, path: string, r: { status: number; data: Buffer }): Buffer => {
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
  };
  return {
    async request(method, path, body) {
      const data = check(method, path, await send(method, path, body));
      return data.length ? JSON.parse(data.toString("utf8")) : undefined;
    },
    async raw(method, path) {
      return check(method, path, await send(method, path));
    },
  };
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
