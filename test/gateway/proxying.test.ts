// The gateway is a faithful proxy.
import http from "node:http";
import net, { type AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WebSocket, WebSocketServer } from "ws";
import { echoHandler, headerValues, rawExchange, startUpstream, type Echo, type Upstream } from "../helpers/servers";
import { CONTROL, CONTROL_LINE, request, startGateway, type GatewayProcess } from "./helpers";

/** An upstream speaking raw bytes, so the test controls the response head exactly. */
function startRawUpstream(response: Buffer): Promise<{ port: number; requests: Buffer[]; close(): void }> {
  const requests: Buffer[] = [];
  const server = net.createServer((socket) => {
    let received = Buffer.alloc(0);
    socket.on("data", (chunk) => {
      received = Buffer.concat([received, chunk]);
      if (received.includes("\r\n\r\n")) {
        requests.push(received);
        socket.end(response);
      }
    });
    socket.on("error", () => undefined);
  });
  return new Promise((resolve) =>
    server.listen(0, "127.0.0.1", () =>
      resolve({ port: (server.address() as AddressInfo).port, requests, close: () => server.close() }),
    ),
  );
}

describe("gateway faithful proxying", () => {
  let gateway: GatewayProcess;
  let echo: Upstream;
  let streaming: Upstream;
  let raw: Awaited<ReturnType<typeof startRawUpstream>>;
  let wss: WebSocketServer;
  const echoRequests: http.IncomingMessage[] = [];
  /** Set by a test: the streaming upstream finishes its body when this resolves. */
  let release: Promise<void> = Promise.resolve();
  /** Resolved by the streaming upstream with the first request-body chunk it receives. */
  let firstBodyChunk: (chunk: string) => void = () => undefined;

  const rawResponse = Buffer.concat([
    Buffer.from(
      "HTTP/1.1 200 OK\r\n" +
        "Content-Type: text/plain\r\n" +
        "Set-Cookie: a=1; Path=/\r\n" +
        "Set-Cookie: b=2; Path=/\r\n" +
        "Connection: close, X-Resp-Hop\r\n" +
        "X-Resp-Hop: secret\r\n" +
        "Keep-Alive: timeout=3\r\n" +
        "Proxy-Authenticate: Basic realm=x\r\n" +
        "Trailer: X-Checksum\r\n",
      "latin1",
    ),
    Buffer.from("X-Title: caf"),
    Buffer.from([0xc3, 0xa9, 0x20, 0xe2, 0x82, 0xac]),
    Buffer.from("\r\nContent-Length: 5\r\n\r\nhello"),
  ]);

  beforeAll(async () => {
    echo = await startUpstream(echoHandler("echo", (req) => echoRequests.push(req)));
    wss = new WebSocketServer({ server: echo.server });
    wss.on("connection", (socket, req) => {
      socket.send(`hello ${req.url}`);
      socket.on("message", (data, isBinary) =>
        socket.send(isBinary ? data : `echo ${data.toString()}`, { binary: isBinary }),
      );
    });
    streaming = await startUpstream((req, res) => {
      if (req.url === "/head-first") {
        res.writeHead(200, { "Content-Type": "text/event-stream" });
        res.flushHeaders();
        release.then(() => res.end("data: late\n\n"));
        return;
      }
      if (req.url === "/download") {
        res.writeHead(200, { "Content-Type": "text/plain" });
        res.write("first-chunk\n");
        release.then(() => res.end("last-chunk\n"));
        return;
      }
      const chunks: Buffer[] = [];
      req.on("data", (chunk: Buffer) => {
        if (chunks.length === 0) firstBodyChunk(chunk.toString());
        chunks.push(chunk);
      });
      req.on("end", () => res.end(`received ${Buffer.concat(chunks).toString()}`));
    });
    raw = await startRawUpstream(rawResponse);
    gateway = await startGateway({
      sites: {
        shop: { server: echo.url },
        stream: { server: streaming.url },
        raw: { server: `http://127.0.0.1:${raw.port}` },
      },
    });
  });
  afterAll(async () => {
    await gateway?.stop();
    wss?.close();
    raw?.close();
    await Promise.all([echo?.close(), streaming?.close()]);
  });

  it("streams the response: the first bytes reach the client before the upstream has finished", async () => {
    let finish!: () => void;
    release = new Promise((resolve) => (finish = resolve));
    const body = await new Promise<string>((resolve, reject) => {
      http
        .get(`${gateway.url}/svc/stream/download`, { agent: false, headers: CONTROL }, (res) => {
          let text = "";
          res.setEncoding("utf8");
          res.on("data", (chunk: string) => {
            text += chunk;
            // Only now, with the first chunk at the client, may the upstream finish.
            if (text === "first-chunk\n") finish();
          });
          res.on("end", () => resolve(text));
        })
        .on("error", reject);
    });
    expect(body).toBe("first-chunk\nlast-chunk\n");
  }, 10_000);

  it("sends the head of an answer whose body is slow at once, before any body byte", async () => {
    let finish!: () => void;
    release = new Promise((resolve) => (finish = resolve));
    const body = await new Promise<string>((resolve, reject) => {
      http
        .get(`${gateway.url}/svc/stream/head-first`, { agent: false, headers: CONTROL }, (res) => {
          // Only now, with the head at the client, may the upstream send its body.
          expect(res.headers["content-type"]).toBe("text/event-stream");
          finish();
          let text = "";
          res.on("data", (chunk) => (text += chunk));
          res.on("end", () => resolve(text));
        })
        .on("error", reject);
    });
    expect(body).toBe("data: late\n\n");
  }, 10_000);

  it("streams the request body: the upstream sees the first part before the client has sent the rest", async () => {
    const upstreamGotFirst = new Promise<string>((resolve) => (firstBodyChunk = resolve));
    const answer = new Promise<string>((resolve, reject) => {
      const req = http.request(
        `${gateway.url}/svc/stream/upload`,
        { method: "POST", agent: false, headers: { ...CONTROL, "Content-Type": "text/plain" } },
        (res) => {
          let text = "";
          res.on("data", (chunk) => (text += chunk));
          res.on("end", () => resolve(text));
        },
      );
      req.on("error", reject);
      req.write("part-one;");
      upstreamGotFirst.then(() => req.end("part-two"));
    });
    expect(await upstreamGotFirst).toBe("part-one;");
    expect(await answer).toBe("received part-one;part-two");
  });

  it("passes the path's percent-encoding, dot segments and the query exactly as sent", async () => {
    const target = "/a%2Fb//c/../%7Euser/caf%C3%A9;v=1?q=a%20b&r=%2F&&s=%E2%82%AC+x";
    const response = await rawExchange(
      gateway.port,
      `GET /svc/shop${target} HTTP/1.1\r\nHost: gw.test\r\n${CONTROL_LINE}Connection: close\r\n\r\n`,
    );
    const text = response.toString("latin1");
    expect(text.startsWith("HTTP/1.1 200")).toBe(true);
    expect((JSON.parse(text.slice(text.indexOf("\r\n\r\n") + 4)) as Echo).url).toBe(target);
  });

  it("refuses an escaped slash inside the route prefix with 400 and contacts no upstream", async () => {
    const before = echoRequests.length;
    for (const path of [
      "/svc/shop%2Fadmin/x",
      "/svc%2Fshop/x",
      "/svc/shop%2f",
      "/website%2Fshop/",
      "/svc/shop%5Cx/y",
    ]) {
      const response = (
        await rawExchange(
          gateway.port,
          `GET ${path} HTTP/1.1\r\nHost: gw.test\r\n${CONTROL_LINE}Connection: close\r\n\r\n`,
        )
      ).toString("latin1");
      expect(response.split("\r\n")[0], path).toBe("HTTP/1.1 400 Bad Request");
      expect(response, path).toContain("application/json");
    }
    expect(echoRequests.length).toBe(before);
  });

  it("drops hop-by-hop request headers, keeps repeated ones and non-ASCII bytes, and adds X-Forwarded-*", async () => {
    const request = Buffer.concat([
      Buffer.from(
        "GET /svc/shop/h HTTP/1.1\r\n" +
          "Host: shop.test:8443\r\n" +
          CONTROL_LINE +
          "Connection: close, X-Hop-Named\r\n" +
          "X-Hop-Named: gone\r\n" +
          "Keep-Alive: timeout=5\r\n" +
          "TE: trailers\r\n" +
          "Trailer: X-Checksum\r\n" +
          "Proxy-Authorization: Basic c2VjcmV0\r\n" +
          "Proxy-Connection: keep-alive\r\n" +
          "HTTP2-Settings: AAMAAABkAAQAoAAAAAIAAAAA\r\n" +
          "Cookie: a=1\r\n" +
          "Cookie: b=2\r\n" +
          "X-Forwarded-For: 10.1.2.3\r\n" +
          "X-Name: caf",
        "latin1",
      ),
      Buffer.from([0xc3, 0xa9, 0x20, 0xff]),
      Buffer.from("\r\n\r\n"),
    ]);
    const response = (await rawExchange(gateway.port, request)).toString("latin1");
    const seen = JSON.parse(
      Buffer.from(response.slice(response.indexOf("\r\n\r\n") + 4), "latin1").toString("utf8"),
    ) as Echo;
    const names = seen.rawHeaders.filter((_, i) => i % 2 === 0).map((name) => name.toLowerCase());
    for (const hop of [
      "x-hop-named",
      "keep-alive",
      "te",
      "trailer",
      "proxy-authorization",
      "proxy-connection",
      "http2-settings",
    ])
      expect(names, hop).not.toContain(hop);
    expect(headerValues(seen.rawHeaders, "connection")).not.toContain("close, X-Hop-Named");
    // The gateway's own credential header stays with the gateway.
    expect(names).not.toContain("x-multienv-token");
    expect(headerValues(seen.rawHeaders, "cookie")).toEqual(["a=1", "b=2"]);
    // node hands header bytes over as latin1 characters: compare the bytes.
    expect(Buffer.from(headerValues(seen.rawHeaders, "x-name")[0], "latin1")).toEqual(
      Buffer.concat([Buffer.from("caf"), Buffer.from([0xc3, 0xa9, 0x20, 0xff])]),
    );
    expect(headerValues(seen.rawHeaders, "host")).toEqual(["shop.test:8443"]);
    expect(headerValues(seen.rawHeaders, "x-forwarded-for")).toEqual(["10.1.2.3, 127.0.0.1"]);
    expect(headerValues(seen.rawHeaders, "x-forwarded-host")).toEqual(["shop.test:8443"]);
    expect(headerValues(seen.rawHeaders, "x-forwarded-proto")).toEqual(["http"]);
  });

  it("drops hop-by-hop response headers, keeps two Set-Cookie and non-ASCII bytes", async () => {
    const response = await rawExchange(
      gateway.port,
      `GET /svc/raw/ HTTP/1.1\r\nHost: gw.test\r\n${CONTROL_LINE}Connection: close\r\n\r\n`,
    );
    const head = response.subarray(0, response.indexOf("\r\n\r\n")).toString("latin1");
    const lines = head.split("\r\n");
    expect(lines[0]).toBe("HTTP/1.1 200 OK");
    expect(lines.filter((line) => line.toLowerCase().startsWith("set-cookie:"))).toEqual([
      "Set-Cookie: a=1; Path=/",
      "Set-Cookie: b=2; Path=/",
    ]);
    for (const hop of ["x-resp-hop", "keep-alive", "proxy-authenticate", "trailer"]) {
      expect(
        lines.some((line) => line.toLowerCase().startsWith(`${hop}:`)),
        hop,
      ).toBe(false);
    }
    const title = lines.find((line) => line.startsWith("X-Title: "))!;
    expect(Buffer.from(title.slice("X-Title: ".length), "latin1")).toEqual(
      Buffer.concat([Buffer.from("caf"), Buffer.from([0xc3, 0xa9, 0x20, 0xe2, 0x82, 0xac])]),
    );
    expect(response.subarray(response.indexOf("\r\n\r\n") + 4).toString()).toBe("hello");
  });

  it("answers HEAD with the upstream's head and no body, keeping the connection usable", async () => {
    const response = (
      await rawExchange(
        gateway.port,
        `HEAD /svc/shop/thing HTTP/1.1\r\nHost: gw.test\r\n${CONTROL_LINE}\r\nGET /svc/shop/after HTTP/1.1\r\nHost: gw.test\r\n${CONTROL_LINE}Connection: close\r\n\r\n`,
      )
    ).toString("latin1");
    const [headResponse, rest] = response.split(/\r\n\r\n(?=HTTP\/1\.1)/);
    expect(headResponse.split("\r\n")[0]).toBe("HTTP/1.1 200 OK");
    expect(headResponse).toMatch(/\r\nX-Upstream: echo/);
    expect(rest.split("\r\n")[0]).toBe("HTTP/1.1 200 OK");
    expect(rest).toContain('"url":"/after"');
    expect(echoRequests.some((req) => req.method === "HEAD" && req.url === "/thing")).toBe(true);
  });

  it("passes a WebSocket upgrade through, messages both ways", async () => {
    const socket = new WebSocket(`ws://127.0.0.1:${gateway.port}/svc/shop/socket?room=1`, { headers: CONTROL });
    const received: string[] = [];
    const done = new Promise<void>((resolve, reject) => {
      socket.on("message", (data, isBinary) => {
        received.push(isBinary ? `binary:${(data as Buffer).toString("hex")}` : data.toString());
        if (received.length === 1) socket.send("ping from client");
        if (received.length === 2) socket.send(Buffer.from([0, 1, 2, 255]), { binary: true });
        if (received.length === 3) resolve();
      });
      socket.on("error", reject);
    });
    await done;
    socket.close();
    expect(received).toEqual(["hello /socket?room=1", "echo ping from client", "binary:000102ff"]);
  });

  it("relays an upstream's refusal of an upgrade", async () => {
    const status = await new Promise<number>((resolve) => {
      const socket = new WebSocket(`ws://127.0.0.1:${gateway.port}/svc/stream/not-a-socket`, { headers: CONTROL });
      socket.on("unexpected-response", (_req, res) => resolve(res.statusCode!));
      socket.on("error", () => undefined);
    });
    // The streaming upstream answers a plain 200 to anything that is not /download.
    expect(status).toBe(200);
  });

  it("forwards a POST body with Content-Length intact", async () => {
    const answer = await request(`${gateway.url}/svc/shop/form`, {
      method: "POST",
      headers: { "Content-Type": "application/x-www-form-urlencoded" },
      body: "a=1&b=%C3%A9",
    });
    const seen = JSON.parse(answer.body) as Echo;
    expect(seen.body).toBe("a=1&b=%C3%A9");
    expect(headerValues(seen.rawHeaders, "content-length")).toEqual(["12"]);
  });
});
