// HTTP/1.1 framing at the proxy's hop (RFC 9112): every message the proxy forwards is framed by what node's parser
// read, and re-framed by the proxy, so bytes a computer hides in a body never become a request of their own on the
// proxy's kept-alive connections to the gateway (which serve every synthetic site) or to a host. Each attack is
// written as raw bytes on a socket, where a client library would have normalised them.
import * as fs from "node:fs";
import * as http from "node:http";
import * as net from "node:net";
import * as tls from "node:tls";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ErrorRecord, RequestRecord } from "../../src/protocol/site-proxy";
import { cleanup, onCleanup } from "../helpers/processes";
import { connectThrough, curl, type ProxyProcess, startProxy } from "./helpers";
import { until } from "../helpers/until";
import { listenOnLoopback } from "../helpers/servers";

interface Seen {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: string;
  connection: number;
}

/** A gateway stand-in that records every request it parses, body included, and which connection carried it. */
async function startRecorder(
  answer: (req: http.IncomingMessage, res: http.ServerResponse) => void = (_req, res) => res.end("page"),
) {
  const seen: Seen[] = [];
  let connections = 0;
  const ids = new WeakMap<net.Socket, number>();
  const server = http.createServer((req, res) => {
    let body = "";
    req.setEncoding("latin1");
    req.on("data", (d: string) => (body += d));
    req.on("end", () => {
      seen.push({ method: req.method!, url: req.url!, headers: req.headers, body, connection: ids.get(req.socket)! });
      answer(req, res);
    });
  });
  server.on("connection", (socket) => ids.set(socket, ++connections));
  const port = await listenOnLoopback(server);
  return { seen, port, connections: () => connections };
}

/** Writes raw bytes to `socket` and collects everything until it closes or `quietMs` pass without bytes. */
function exchange(socket: net.Socket | tls.TLSSocket, bytes: string, quietMs = 700): Promise<string> {
  return new Promise((resolve) => {
    let text = "";
    let timer = setTimeout(() => done(), quietMs);
    const done = () => {
      clearTimeout(timer);
      socket.destroy();
      resolve(text);
    };
    socket.on("data", (d: Buffer) => {
      text += d.toString("latin1");
      clearTimeout(timer);
      timer = setTimeout(done, quietMs);
    });
    socket.on("error", () => {});
    socket.on("close", done);
    socket.write(bytes);
  });
}

function raw(proxy: ProxyProcess, bytes: string): Promise<string> {
  return exchange(net.connect(proxy.port, "127.0.0.1"), bytes);
}

function chunked(text: string): string {
  return `${Buffer.byteLength(text).toString(16)}\r\n${text}\r\n0\r\n\r\n`;
}

/** The request an attacker wants to reach a site the computer was never given: the gateway serves them all. */
const SMUGGLED = "GET /website/other/secret HTTP/1.1\r\nHost: gateway\r\n\r\n";

let gateway: Awaited<ReturnType<typeof startRecorder>>;
let proxy: ProxyProcess;

beforeAll(async () => {
  gateway = await startRecorder();
  proxy = await startProxy({
    gateway: `http://127.0.0.1:${gateway.port}`,
    sites: { shop: ["shop.test"] },
    reach: "none",
  });
});
afterAll(cleanup);

/** Every request the gateway parsed went to the computer's own site: nothing smuggled reached another one. */
function expectOnlyShop(since: number): void {
  expect(
    gateway.seen
      .slice(since)
      .map((r) => r.url)
      .filter((url) => !url.startsWith("/website/shop/")),
  ).toEqual([]);
}

describe("smuggling a second request to the gateway", () => {
  it("a chunked body on a GET is sent on chunked, never as bytes after an unframed request", async () => {
    const before = gateway.seen.length;
    const answer = await raw(
      proxy,
      `GET http://shop.test/a HTTP/1.1\r\nHost: shop.test\r\nTransfer-Encoding: chunked\r\n\r\n${chunked(SMUGGLED)}`,
    );
    expect(answer).toMatch(/^HTTP\/1\.1 200 /);
    await until("the gateway's request", () => gateway.seen.length > before || undefined);
    await new Promise((r) => setTimeout(r, 300));
    expectOnlyShop(before);
    const mine = gateway.seen.slice(before);
    expect(mine.map((r) => [r.method, r.url, r.body])).toEqual([["GET", "/website/shop/a", SMUGGLED]]);
  });

  it("a Content-Length nominated by Connection still frames the body", async () => {
    const before = gateway.seen.length;
    const answer = await raw(
      proxy,
      `POST http://shop.test/b HTTP/1.1\r\nHost: shop.test\r\nConnection: keep-alive, Content-Length\r\nContent-Length: ${SMUGGLED.length}\r\n\r\n${SMUGGLED}`,
    );
    expect(answer).toMatch(/^HTTP\/1\.1 200 /);
    await until("the gateway's request", () => gateway.seen.length > before || undefined);
    await new Promise((r) => setTimeout(r, 300));
    expectOnlyShop(before);
    expect(gateway.seen.slice(before).map((r) => [r.method, r.url, r.body])).toEqual([
      ["POST", "/website/shop/b", SMUGGLED],
    ]);
  });

  it("inside the TLS the proxy terminates for a synthetic name, a chunked body is sent on chunked too", async () => {
    const before = gateway.seen.length;
    const { socket, status } = await connectThrough(proxy.port, "shop.test:443");
    expect(status).toBe(200);
    const secure = tls.connect({ socket, servername: "shop.test", ca: fs.readFileSync(proxy.caCertPath) });
    await new Promise<void>((resolve, reject) => secure.once("secureConnect", resolve).once("error", reject));
    const answer = await exchange(
      secure,
      `GET /c HTTP/1.1\r\nHost: shop.test\r\nTransfer-Encoding: chunked\r\n\r\n${chunked(SMUGGLED)}`,
    );
    expect(answer).toMatch(/^HTTP\/1\.1 200 /);
    await until("the gateway's request", () => gateway.seen.length > before || undefined);
    await new Promise((r) => setTimeout(r, 300));
    expectOnlyShop(before);
    expect(gateway.seen.slice(before).map((r) => [r.method, r.url, r.body])).toEqual([
      ["GET", "/website/shop/c", SMUGGLED],
    ]);
  });

  it("bytes sent after an upgrade request reach the gateway only once it switched protocols", async () => {
    // The stand-in does not upgrade: it answers the request as a plain GET and would read what follows as the
    // next request on the same connection.
    const before = gateway.seen.length;
    const answer = await raw(
      proxy,
      `GET http://shop.test/ws HTTP/1.1\r\nHost: shop.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n${SMUGGLED}`,
    );
    expect(answer).toMatch(/^HTTP\/1\.1 200 /);
    await until("the gateway's request", () => gateway.seen.length > before || undefined);
    await new Promise((r) => setTimeout(r, 300));
    expectOnlyShop(before);
    expect(gateway.seen.slice(before).map((r) => r.url)).toEqual(["/website/shop/ws"]);
  });
});

describe("requests whose framing is broken", () => {
  const broken: [string, string][] = [
    [
      "Transfer-Encoding and Content-Length",
      "POST http://shop.test/ HTTP/1.1\r\nHost: shop.test\r\nTransfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n0\r\n\r\n",
    ],
    [
      "a last coding other than chunked",
      "POST http://shop.test/ HTTP/1.1\r\nHost: shop.test\r\nTransfer-Encoding: chunked, gzip\r\n\r\n0\r\n\r\n",
    ],
    [
      "a coding besides chunked",
      "POST http://shop.test/ HTTP/1.1\r\nHost: shop.test\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
    ],
    [
      "chunked twice",
      "POST http://shop.test/ HTTP/1.1\r\nHost: shop.test\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    ],
    [
      "Transfer-Encoding in HTTP/1.0",
      "POST http://shop.test/ HTTP/1.0\r\nHost: shop.test\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
    ],
    [
      "two Content-Lengths",
      "POST http://shop.test/ HTTP/1.1\r\nHost: shop.test\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc",
    ],
    [
      "a list as Content-Length",
      "POST http://shop.test/ HTTP/1.1\r\nHost: shop.test\r\nContent-Length: 3, 3\r\n\r\nabc",
    ],
    ["a signed Content-Length", "POST http://shop.test/ HTTP/1.1\r\nHost: shop.test\r\nContent-Length: +3\r\n\r\nabc"],
    ["obs-fold", "GET http://shop.test/ HTTP/1.1\r\nHost: shop.test\r\nX-A: b\r\n c\r\n\r\n"],
    [
      "obs-fold hiding chunked",
      "POST http://shop.test/ HTTP/1.1\r\nHost: shop.test\r\nTransfer-Encoding: x\r\n chunked\r\n\r\n0\r\n\r\n",
    ],
    ["bare LF line ends", "GET http://shop.test/ HTTP/1.1\nHost: shop.test\n\n"],
    ["a bare LF inside the head", "GET http://shop.test/ HTTP/1.1\r\nHost: shop.test\nX: y\r\n\r\n"],
    [
      "a bare LF in a chunk",
      "POST http://shop.test/ HTTP/1.1\r\nHost: shop.test\r\nTransfer-Encoding: chunked\r\n\r\n3\nabc\n0\n\n",
    ],
    ["two Host headers", "GET http://shop.test/ HTTP/1.1\r\nHost: shop.test\r\nHost: other.test\r\n\r\n"],
    [
      "a space before the colon",
      "POST http://shop.test/ HTTP/1.1\r\nHost: shop.test\r\nTransfer-Encoding : chunked\r\n\r\n0\r\n\r\n",
    ],
  ];
  for (const [what, bytes] of broken) {
    it(`answers ${what} with 400 and closes the connection, sending nothing on`, async () => {
      const before = gateway.seen.length;
      const answer = await raw(proxy, bytes + SMUGGLED.replace("/website/other/secret", "http://shop.test/after"));
      expect(answer).toMatch(/^HTTP\/1\.1 400 /);
      expect(answer).toMatch(/^X-Agentenv-Site-Proxy: bad-request$/im);
      expect(answer.match(/HTTP\/1\.1 /g)).toHaveLength(1); // nothing after the refusal was read as a request
      await new Promise((r) => setTimeout(r, 200));
      expect(gateway.seen.slice(before)).toEqual([]);
    });
  }

  it("refuses broken framing inside the TLS it terminates too", async () => {
    const before = gateway.seen.length;
    for (const [, bytes] of broken.slice(0, 5)) {
      const { socket } = await connectThrough(proxy.port, "shop.test:443");
      const secure = tls.connect({ socket, servername: "shop.test", ca: fs.readFileSync(proxy.caCertPath) });
      await new Promise<void>((resolve, reject) => secure.once("secureConnect", resolve).once("error", reject));
      const answer = await exchange(secure, bytes.replace("http://shop.test/", "/"));
      expect(answer).toMatch(/^HTTP\/1\.1 400 /);
    }
    expect(gateway.seen.slice(before)).toEqual([]);
  });

  it("logs each refusal as an error line with status 400", async () => {
    const record = await until("a framing error line", () =>
      proxy
        .records()
        .find((r): r is ErrorRecord => r.event === "error" && /Transfer-Encoding must be chunked alone/.test(r.error)),
    );
    expect(record).toMatchObject({ status: 400, method: "POST", client: "127.0.0.1" });
  });
});

/** Closes `server` and every connection it still has (the proxy keeps its connections to hosts alive). */
function closeOnCleanup(server: net.Server): void {
  const sockets = new Set<net.Socket>();
  server.on("connection", (socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });
  onCleanup(
    () =>
      new Promise((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(resolve);
      }),
  );
}

/** A host that answers every request on a connection with the next of `answers`, counting connections. */
async function startRawHost(answers: string[]) {
  const state = { port: 0, connections: 0, requests: 0 };
  const server = net.createServer((socket) => {
    state.connections++;
    let buffered = "";
    socket.on("data", (d: Buffer) => {
      buffered += d.toString("latin1");
      while (buffered.includes("\r\n\r\n")) {
        buffered = buffered.slice(buffered.indexOf("\r\n\r\n") + 4);
        socket.write(answers[Math.min(state.requests++, answers.length - 1)]);
      }
    });
    socket.on("error", () => {});
  });
  closeOnCleanup(server);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  state.port = (server.address() as net.AddressInfo).port;
  return state;
}

describe("answers whose framing is broken", () => {
  let hostProxy: ProxyProcess;
  beforeAll(async () => {
    hostProxy = await startProxy({ reach: "allow-all" });
  });

  const brokenAnswers: [string, string][] = [
    [
      "Transfer-Encoding and Content-Length",
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n",
    ],
    ["chunked twice", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"],
    ["a coding besides chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n"],
    ["Transfer-Encoding in HTTP/1.0", "HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"],
    ["two Content-Lengths", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok"],
    ["a malformed Content-Length", "HTTP/1.1 200 OK\r\nContent-Length: 2x\r\n\r\nok"],
    ["obs-fold", "HTTP/1.1 200 OK\r\nX-A: b\r\n c\r\nContent-Length: 2\r\n\r\nok"],
    ["bare LF", "HTTP/1.1 200 OK\nContent-Length: 2\n\nok"],
  ];
  const good = "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\ngood";
  for (const [what, answer] of brokenAnswers) {
    it(`answers 502 for a host's answer with ${what}, and never sends another request on that connection`, async () => {
      const host = await startRawHost([answer, good]);
      const first = await curl(hostProxy.url, `http://127.0.0.1:${host.port}/first`);
      expect(first.status).toBe(502);
      expect(first.headers["x-agentenv-site-proxy"]).toBe("failed");
      const second = await curl(hostProxy.url, `http://127.0.0.1:${host.port}/second`);
      expect([second.status, second.body]).toEqual([200, "good"]);
      expect(host.connections, "the second request came on a new connection").toBe(2);
    });
  }

  it("drops a kept-alive connection on which the host said something unasked", async () => {
    // After its answer the host sends a second one nobody asked for: that connection is not used again, so the
    // stray answer can never be taken for the next request's.
    let connections = 0;
    const server = net.createServer((socket) => {
      connections++;
      let requests = 0;
      socket.on("data", (d: Buffer) => {
        if (!d.includes("\r\n\r\n")) return;
        socket.write(`HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nok-${++requests}`);
        if (requests === 1)
          setTimeout(() => socket.writable && socket.write("HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nEVIL"), 100);
      });
      socket.on("error", () => {});
    });
    closeOnCleanup(server);
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const port = (server.address() as net.AddressInfo).port;
    expect((await curl(hostProxy.url, `http://127.0.0.1:${port}/one`)).body).toBe("ok-1");
    await new Promise((r) => setTimeout(r, 300));
    const second = await curl(hostProxy.url, `http://127.0.0.1:${port}/two`);
    expect([second.status, second.body]).toEqual([200, "ok-1"]);
    expect(connections, "the second request went on a new connection").toBe(2);
  });
});

describe("what a host is sent", () => {
  let hostProxy: ProxyProcess;
  let origin: Awaited<ReturnType<typeof startRecorder>>;
  beforeAll(async () => {
    origin = await startRecorder((req, res) => res.end(`vhost ${req.headers.host}`));
    hostProxy = await startProxy({ reach: ["allowed.test"], resolve: { "allowed.test": ["127.0.0.1"] } });
  });

  it("gets the Host that was checked, not a conflicting Host header naming another virtual host", async () => {
    const answer = await raw(
      hostProxy,
      `GET http://allowed.test:${origin.port}/ HTTP/1.1\r\nHost: forbidden.test\r\nConnection: close\r\n\r\n`,
    );
    expect(answer).toMatch(/^HTTP\/1\.1 200 /);
    expect(answer).toContain(`vhost allowed.test:${origin.port}`);
    expect(origin.seen[origin.seen.length - 1].headers.host).toBe(`allowed.test:${origin.port}`);
    const record = await hostProxy.waitForRecord<RequestRecord>(
      "the request line",
      (r) => r.event === "request" && r.hostHeader === "forbidden.test",
    );
    expect(record).toMatchObject({ method: "GET", host: "allowed.test", port: origin.port, status: 200 });
  });

  it("drops a header nominated by Connection, but a nominated Host still names the checked host", async () => {
    const answer = await raw(
      hostProxy,
      `GET http://allowed.test:${origin.port}/n HTTP/1.1\r\nHost: forbidden.test\r\nConnection: close, Host, X-Secret\r\nX-Secret: 1\r\n\r\n`,
    );
    expect(answer).toMatch(/^HTTP\/1\.1 200 /);
    const seen = origin.seen[origin.seen.length - 1];
    expect(seen.headers.host).toBe(`allowed.test:${origin.port}`);
    expect(seen.headers["x-secret"]).toBeUndefined();
  });

  it("sends a non-idempotent request once: a POST meeting a closed kept-alive connection is a 502, not a second POST", async () => {
    let posts = 0;
    const server = net.createServer((socket) => {
      let requests = 0;
      socket.on("data", (d: Buffer) => {
        const text = d.toString();
        if (!text.includes("\r\n\r\n")) return;
        if (text.startsWith("POST")) posts++;
        if (++requests === 1)
          socket.write("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: keep-alive\r\n\r\nfresh");
        else socket.destroy();
      });
      socket.on("error", () => {});
    });
    closeOnCleanup(server);
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const port = (server.address() as net.AddressInfo).port;
    expect((await curl(hostProxy.url, `http://allowed.test:${port}/warm`)).status).toBe(200);
    const post = await curl(hostProxy.url, `http://allowed.test:${port}/pay`, ["-X", "POST"]);
    expect(post.status).toBe(502);
    expect(posts).toBe(1);
  });
});
