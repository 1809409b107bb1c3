// Small upstream requests the gateway makes on its own behalf (cards, /ready, DevTools JSON, telling a site proxy
// who holds its computer): the whole (small) body, bounded in time and size.
import http from "node:http";

export interface Fetched {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

const MAX_BODY = 4 * 1024 * 1024;

export interface SmallRequestOptions {
  timeoutMs: number;
  headers?: Record<string, string>;
  agent?: http.Agent;
}

export function getSmall(url: URL, options: SmallRequestOptions): Promise<Fetched> {
  return requestSmall("GET", url, options);
}

/** A request with no body, its answer read whole. */
export function requestSmall(method: string, url: URL, options: SmallRequestOptions): Promise<Fetched> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method, headers: options.headers, agent: options.agent }, (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on("data", (chunk: Buffer) => {
        size += chunk.length;
        if (size > MAX_BODY) req.destroy(new Error(`body larger than ${MAX_BODY} bytes`));
        else chunks.push(chunk);
      });
      res.on("end", () => {
        clearTimeout(timer);
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) });
      });
      res.on("error", reject);
    });
    const timer = setTimeout(
      () => req.destroy(new Error(`no answer within ${options.timeoutMs} ms`)),
      options.timeoutMs,
    );
    req.on("error", (error) => {
      clearTimeout(timer);
      reject(error);
    });
    req.end();
  });
}
