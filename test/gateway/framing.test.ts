// The gateway's forwarding of upstream answers (undici, framed by llhttp) against upstreams
// that speak raw bytes: every way HTTP/1.1 frames a response body, informational answers, and
// answers it must refuse, each followed by a request proving the kept-alive connection is (or
// is not) reused correctly, and that the client's own connection stays in step.
import http from "node:http";
import net, { type AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { rawExchange } from "../helpers/servers";
import { CONTROL, CONTROL_LINE, request, startGateway, type GatewayProcess } from "./helpers";

/** Writes `text` a byte at a time, each in its own packet (a head split anywhere, CR and LF apart included). */
function trickle(socket: net.Socket, text: string): void {
  socket.setNoDelay(true);
  let at = 0;
  const next = () => {
    if (at >= text.length || socket.destroyed) return;
    socket.write(text[at++], "latin1");
    setTimeout(next, 1);
  };
  next();
}

/**
 * Answers each request head with `answers[path]` (`<close>` at the end: then closes; `<trickle>` first: byte by byte);
 * counts connections.
 */
function startRawUpstream(answers: Record<string, string>): Promise<{
  port: number;
  connections: () => number;
  served: Array<{ connection: number; path: string }>;
  close(): void;
}> {
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
        else if (answer.startsWith("<trickle>")) trickle(socket, answer.slice("<trickle>".length));
        else socket.write(answer, "latin1");
      }
    });
    socket.on("error", () => undefined);
  });
  return new Promise((resolve) =>
    server.listen(0, "127.0.0.1", () =>
      resolve({
        port: (server.address() as AddressInfo).port,
        connections: () => connections,
        served,
        close: () => server.close(),
      }),
    ),
  );
}

const OK = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";

/** Answers whose framing the gateway refuses: 502, logged, and their connection never reused. Keyed by the rule. */
const REFUSED: Record<string, string> = {
  "/te-and-cl": "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
  "/cl-and-te": "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
  "/repeated-cl": "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok",
  "/conflicting-cl": "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok",
  "/cl-list": "HTTP/1.1 200 OK\r\nContent-Length: 2, 2\r\n\r\nok",
  "/cl-sign": "HTTP/1.1 200 OK\r\nContent-Length: +2\r\n\r\nok",
  "/cl-hex": "HTTP/1.1 200 OK\r\nContent-Length: 0x2\r\n\r\nok",
  "/te-gzip": "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nbytes until close<close>",
  "/te-gzip-chunked": "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
  "/te-twice":
    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
  "/bare-lf-status": "HTTP/1.1 200 OK\nContent-Length: 2\r\n\r\nok",
  "/bare-lf-header": "HTTP/1.1 200 OK\r\nX-A: 1\nContent-Length: 2\r\n\r\nok",
  "/bare-lf-head-end": "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\nok",
  "/bare-cr-header": "HTTP/1.1 200 OK\r\nX-A: 1\rContent-Length: 2\r\n\r\nok",
  "/bare-lf-chunk": "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\nok\n0\n\n",
  "/space-before-colon": "HTTP/1.1 200 OK\r\nContent-Length : 2\r\n\r\nok",
  "/nul-in-value": "HTTP/1.1 200 OK\r\nX-A: a\0b\r\nContent-Length: 2\r\n\r\nok",
  "/garbage": "HTTP/1.1 200 OK\r\nBad Header Line\r\n\r\n",
  "/switching-unasked": "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n",
  "/continue-unasked": "HTTP/1.1 100 Continue\r\n\r\n" + OK,
  "/obs-fold": "HTTP/1.1 200 OK\r\nX-Folded: first\r\n second\r\nContent-Length: 2\r\n\r\nok",
  "/obs-fold-tab": "HTTP/1.1 200 OK\r\nX-Folded: first\r\n\tsecond\r\nContent-Length: 2\r\n\r\nok",
  "/http10-te": "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
  "/hints-then-bare-lf":
    "HTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\nHTTP/1.1 200 OK\nContent-Length: 2\r\n\r\nok",
  "/trickled-bare-lf": "<trickle>HTTP/1.1 200 OK\r\nX-A: 1\r\nContent-Length: 2\r\n\nok",
  "/bad-chunk-size": "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nok\r\n0\r\n\r\n",
};

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
      "/until-close":
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nall of it, until the connection closes<close>",
      "/early-hints": "HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n" + OK,
      "/trickled":
        "<trickle>HTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\nHTTP/1.1 200 OK\r\nX-A: 1\r\nContent-Length: 2\r\n\r\nok",
      "/too-long": "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokEXTRA",
      "/no-content": "HTTP/1.1 204 No Content\r\n\r\n",
      "/not-modified": 'HTTP/1.1 304 Not Modified\r\nETag: "1"\r\n\r\n',
      "/not-modified-with-length": "HTTP/1.1 304 Not Modified\r\nContent-Length: 1234\r\n\r\n",
      "/upload": "HTTP/1.1 413 Payload Too Large\r\nContent-Length: 8\r\n\r\ntoo big!",
      ...REFUSED,
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

  it("forwards an answer whose head arrives a byte at a time, and reuses the connection", async () => {
    const { answer, reused } = await thenOk("/trickled");
    expect(answer.status).toBe(200);
    expect(answer.headers["x-a"]).toBe("1");
    expect(answer.body).toBe("ok");
    expect(reused).toBe(true);
  });

  it("skips an informational answer (103) and forwards the final one", async () => {
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

  it("forwards a 304 with the representation's Content-Length and keeps the client's connection in step", async () => {
    const response = (
      await rawExchange(
        gateway.port,
        `GET /svc/raw/not-modified-with-length HTTP/1.1\r\nHost: gw\r\n${CONTROL_LINE}\r\nGET /svc/raw/ok HTTP/1.1\r\nHost: gw\r\n${CONTROL_LINE}Connection: close\r\n\r\n`,
      )
    ).toString("latin1");
    expect(response).toMatch(/^HTTP\/1\.1 304 Not Modified\r\n(.*\r\n)*Content-Length: 1234\r\n/);
    expect(response).toMatch(/\r\n\r\nHTTP\/1\.1 200 OK\r\n(.*\r\n)*\r\nok$/);
  });

  it.each(Object.keys(REFUSED))("refuses %s with 502, logs it, and never reuses that connection", async (path) => {
    const { answer, reused } = await thenOk(path);
    expect(answer.status).toBe(502);
    expect(JSON.parse(answer.body)).toMatchObject({ error: "upstream failed", site: "raw" });
    expect(reused).toBe(false);
    const line = await gateway.waitForLog((entry) => entry.event === "upstream-refused" && entry.path === path);
    expect(line).toMatchObject({ site: "raw", method: "GET" });
    expect(String(line.reason)).not.toBe("");
  });

  it("frames the client's answer itself: the upstream's length when it had one, else chunked", async () => {
    const length = (
      await rawExchange(
        gateway.port,
        `GET /svc/raw/ok HTTP/1.1\r\nHost: gw\r\n${CONTROL_LINE}Connection: close\r\n\r\n`,
      )
    ).toString("latin1");
    expect(length).toMatch(/\r\nContent-Length: 2\r\n/);
    expect(length).not.toMatch(/\r\nTransfer-Encoding:/i);
    const chunked = (
      await rawExchange(
        gateway.port,
        `GET /svc/raw/chunked HTTP/1.1\r\nHost: gw\r\n${CONTROL_LINE}Connection: close\r\n\r\n`,
      )
    ).toString("latin1");
    expect(chunked).toMatch(/\r\nTransfer-Encoding: chunked\r\n/);
    expect(chunked).not.toMatch(/\r\nContent-Length:/i);
    expect(chunked).not.toContain("X-Sum"); // trailers stay on their hop
  });

  it("does not reuse a connection whose upstream sent more than it announced", async () => {
    const { answer, reused } = await thenOk("/too-long");
    expect(answer.body).toBe("ok");
    expect(reused).toBe(false);
  });

  it("forwards an answer that comes before the request body is sent, and does not reuse that connection", async () => {
    const before = upstream.connections();
    const answer = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = http.request(
        `${gateway.url}/svc/raw/upload`,
        { method: "POST", agent: false, headers: CONTROL },
        (res) => {
          let body = "";
          res.on("data", (chunk) => (body += chunk));
          res.on("end", () => resolve({ status: res.statusCode!, body }));
        },
      );
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
