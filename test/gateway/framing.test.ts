// The gateway's own upstream client (src/gateway/upstream.ts) against upstreams that speak
// raw bytes: every way HTTP/1.1 frames a response body, informational answers, and answers
// it must refuse, each followed by a request proving the kept-alive connection is (or is
// not) reused correctly.
import http from "node:http";
import net, { type AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { request, startGateway, type GatewayProcess } from "./helpers";

/** Answers each request head with `answers[path]`; counts connections. */
function startRawUpstream(answers: Record<string, string>): Promise<{ port: number; connections: () => number; served: Array<{ connection: number; path: string }>; close(): void }> {
  let connections = 0;
  const served: Array<{ connection: number; path: string }> = [];
  const server = net.createServer((socket) => {
    const connection = ++connections;
    let buffered = "";
    socket.on("data", (chunk) => {
      buffered += chunk.toString("latin1");
      let end;
      while ((end = buffered.indexOf("\r\n\r\n")) !== -1) {
        const path = buffered.slice(0, end).split(" ")[1];
        served.push({ connection, path });
        buffered = buffered.slice(end + 4);
        const answer = answers[path] ?? "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n";
        if (answer.endsWith("<close>")) socket.end(answer.slice(0, -"<close>".length), "latin1");
        else socket.write(answer, "latin1");
      }
    });
    socket.on("error", () => undefined);
  });
  return new Promise((resolve) =>
    server.listen(0, "127.0.0.1", () => resolve({ port: (server.address() as AddressInfo).port, connections: () => connections, served, close: () => server.close() })),
  );
}

const OK = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";

describe("gateway upstream framing", () => {
  let gateway: GatewayProcess;
  let upstream: Awaited<ReturnType<typeof startRawUpstream>>;

  beforeAll(async () => {
    upstream = await startRawUpstream({
      "/ok": OK,
      "/chunked":
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\n\r\n" +
        "5;ext=1\r\nhello\r\n" +
        "1\r\n \r\n" +
        "5\r\nworld\r\n" +
        "0\r\nX-Sum: 42\r\n\r\n",
      "/until-close": "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nall of it, until the connection closes<close>",
      "/early-hints": "HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\nHTTP/1.1 100 Continue\r\n\r\n" + OK,
      "/conflicting": "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok",
      "/too-long": "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokEXTRA",
      "/no-content": "HTTP/1.1 204 No Content\r\n\r\n",
      "/not-modified": "HTTP/1.1 304 Not Modified\r\nContent-Length: 1234\r\n\r\n",
      "/garbage": "HTTP/1.1 200 OK\r\nBad Header Line\r\n\r\n",
      "/upload": "HTTP/1.1 413 Payload Too Large\r\nContent-Length: 8\r\n\r\ntoo big!",
    });
    gateway = await startGateway({ sites: { raw: { server: `http://127.0.0.1:${upstream.port}` } } });
  });
  afterAll(async () => {
    await gateway?.stop();
    upstream?.close();
  });

  /** Runs `path`, then /ok; returns the first answer and whether /ok went on the same upstream connection. */
  const thenOk = async (path: string, options: Parameters<typeof request>[1] = {}) => {
    const answer = await request(`${gateway.url}/svc/raw${path}`, options);
    const ok = await request(`${gateway.url}/svc/raw/ok`);
    expect(ok.body).toBe("ok");
    const [first, second] = upstream.served.slice(-2);
    expect([first.path, second.path]).toEqual([path, "/ok"]);
    return { answer, reused: first.connection === second.connection };
  };

  it("decodes a chunked body (extensions, trailers) and reuses the connection", async () => {
    const { answer, reused } = await thenOk("/chunked");
    expect(answer.status).toBe(200);
    expect(answer.body).toBe("hello world");
    expect(reused).toBe(true);
  });

  it("reads a body delimited by the connection's close, then opens a new connection", async () => {
    const { answer, reused } = await thenOk("/until-close");
    expect(answer.body).toBe("all of it, until the connection closes");
    expect(reused).toBe(false);
  });

  it("skips informational answers (103, 100) and forwards the final one", async () => {
    const { answer, reused } = await thenOk("/early-hints");
    expect(answer.status).toBe(200);
    expect(answer.body).toBe("ok");
    expect(reused).toBe(true);
  });

  it("forwards 204 and 304 without a body, and the connection stays usable", async () => {
    const noContent = await thenOk("/no-content");
    expect(noContent.answer.status).toBe(204);
    expect(noContent.reused).toBe(true);
    const notModified = await thenOk("/not-modified");
    expect(notModified.answer.status).toBe(304);
    expect(notModified.answer.body).toBe("");
    expect(notModified.reused).toBe(true);
  });

  it("refuses conflicting Content-Length and malformed header lines with 502", async () => {
    for (const path of ["/conflicting", "/garbage"]) {
      const { answer } = await thenOk(path);
      expect(answer.status, path).toBe(502);
      expect(JSON.parse(answer.body), path).toMatchObject({ error: "upstream failed", site: "raw" });
    }
  });

  it("does not reuse a connection whose upstream sent more than it announced", async () => {
    const { answer, reused } = await thenOk("/too-long");
    expect(answer.body).toBe("ok");
    expect(reused).toBe(false);
  });

  it("forwards an answer that comes before the request body is sent, and does not reuse that connection", async () => {
    const before = upstream.connections();
    const answer = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = http.request(`${gateway.url}/svc/raw/upload`, { method: "POST", agent: false }, (res) => {
        let body = "";
        res.on("data", (chunk) => (body += chunk));
        res.on("end", () => resolve({ status: res.statusCode!, body }));
      });
      req.on("error", reject);
      req.write(Buffer.alloc(64 * 1024, "a"));
      setTimeout(() => req.end(Buffer.alloc(1024, "b")), 100);
    });
    expect(answer).toEqual({ status: 413, body: "too big!" });
    const ok = await request(`${gateway.url}/svc/raw/ok`);
    expect(ok.body).toBe("ok");
    const upload = upstream.served.findLast((s) => s.path === "/upload")!;
    const after = upstream.served.at(-1)!;
    expect(after.path).toBe("/ok");
    expect(after.connection).not.toBe(upload.connection);
    expect(upstream.connections()).toBeGreaterThan(before);
  });
});
