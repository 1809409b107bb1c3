// The gateway's two listeners: the published one (the runner's: everything) and the browse one
// (the computers' site proxies: synthetic sites' /website/<site>/ and nothing else), each bound
// only where the config says. Loopback has many addresses (127.0.0.0/8), which stand in for
// the networks a deploy binds them on.
import http from "node:http";
import net from "node:net";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WebSocket, WebSocketServer } from "ws";
import { echoHandler, startUpstream, type Echo, type Upstream } from "../helpers/servers";
import { CONTROL_LINE, request, startGateway, TOKEN, type GatewayProcess } from "./helpers";

interface Bound {
  listener: "published" | "browse";
  host: string;
  address: string;
  port: number;
}

function refused(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(port, host);
    socket.once("connect", () => {
      socket.destroy();
      resolve(false);
    });
    socket.once("error", () => resolve(true));
  });
}

describe("gateway listeners", () => {
  let gateway: GatewayProcess;
  let frontend: Upstream;
  let server: Upstream;
  let wss: WebSocketServer;
  let dir: string;
  let browse: Bound[];
  const contacted: string[] = [];

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "multienv-listeners-"));
    const echo = echoHandler("frontend", (req) => contacted.push(`frontend ${req.url}`));
    frontend = await startUpstream((req, res) => {
      if (req.url === "/stream") {
        res.writeHead(200, { "Content-Type": "text/plain" });
        res.write("first\n");
        setTimeout(() => res.end("second\n"), 100);
        return;
      }
      echo(req, res);
    });
    wss = new WebSocketServer({ server: frontend.server });
    wss.on("connection", (socket, req) => {
      socket.send(`hello ${req.url}`);
      socket.on("message", (data) => socket.send(`echo ${data.toString()}`));
    });
    server = await startUpstream(echoHandler("server", (req) => contacted.push(`server ${req.url}`)));
    gateway = await startGateway({
      browse: { hosts: ["127.0.0.2", "127.0.0.3"], port: 0 },
      capturesDir: dir,
      sites: { shop: { server: server.url, frontend: frontend.url }, github: { server: server.url, live: true } },
      computers: { agent: { cdp: `${server.url}/cdp`, proxyLog: `${server.url}/log` } },
    });
    browse = (gateway.logs.find((line) => line.event === "listening")!.listeners as Bound[]).filter(
      (b) => b.listener === "browse",
    );
  });
  afterAll(async () => {
    await gateway?.stop();
    wss?.close();
    await Promise.all([frontend?.close(), server?.close()]);
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const browseUrl = (i = 0) => `http://${browse[i].address}:${browse[i].port}`;

  it("binds the published listener and each browse host where the config says, and nowhere else", async () => {
    const listening = gateway.logs.find((line) => line.event === "listening")!;
    expect(listening.listeners).toEqual([
      { listener: "published", host: "127.0.0.1", address: "127.0.0.1", port: gateway.port },
      { listener: "browse", host: "127.0.0.2", address: "127.0.0.2", port: expect.any(Number) },
      { listener: "browse", host: "127.0.0.3", address: "127.0.0.3", port: expect.any(Number) },
    ]);
    for (const b of browse) {
      expect(await refused("127.0.0.1", b.port), `browse port ${b.port} on 127.0.0.1`).toBe(true);
      expect(await refused(b.address, b.port)).toBe(false);
    }
    expect(await refused("127.0.0.2", gateway.port)).toBe(true);
  });

  it("serves a synthetic site's pages on the browse listener: any method, bodies, streaming", async () => {
    for (const i of [0, 1]) {
      const page = await request(`${browseUrl(i)}/website/shop/cart?x=1`);
      expect(page.status).toBe(200);
      expect(page.headers["x-upstream"]).toBe("frontend");
      expect((JSON.parse(page.body) as Echo).url).toBe("/cart?x=1");
    }
    const posted = await request(`${browseUrl()}/website/shop/form`, { method: "PUT", body: "a=1" });
    expect(JSON.parse(posted.body)).toMatchObject({ method: "PUT", url: "/form", body: "a=1" });
    const chunks: string[] = [];
    await new Promise<void>((resolve, reject) => {
      http
        .get(`${browseUrl()}/website/shop/stream`, { agent: false }, (res) => {
          res.setEncoding("utf8");
          res.on("data", (chunk: string) => chunks.push(chunk));
          res.on("end", resolve);
        })
        .on("error", reject);
    });
    expect(chunks.join("")).toBe("first\nsecond\n");
    expect(chunks.length).toBeGreaterThan(1);
  });

  it("passes a WebSocket upgrade to a synthetic site on the browse listener", async () => {
    const socket = new WebSocket(`ws://${browse[0].address}:${browse[0].port}/website/shop/live`);
    const messages: string[] = [];
    await new Promise<void>((resolve, reject) => {
      socket.on("message", (data) => {
        messages.push(data.toString());
        if (messages.length === 1) socket.send("ping");
        else resolve();
      });
      socket.on("error", reject);
    });
    socket.close();
    expect(messages).toEqual(["hello /live", "echo ping"]);
  });

  it("answers 404 on the browse listener for everything else, whatever Authorization says, contacting nothing", async () => {
    const before = contacted.length;
    const paths = [
      "/svc/shop/api",
      "/svc/github/session",
      "/website/github/",
      "/website/nope/",
      "/traffic/v1/captures",
      "/traffic/v1/captures/shop-server.pcap0",
      "/.well-known/agent-env.json",
      "/healthz",
      "/computers/agent/cdp/json/version",
      "/computers/agent/proxy-log",
      "/computers/agent/connections/end",
      "/svc%2Fshop/x",
      "/",
    ];
    for (const path of paths) {
      for (const auth of ["", `Authorization: Bearer ${TOKEN}\r\n`]) {
        const response = await new Promise<string>((resolve, reject) => {
          const socket = net.connect(browse[0].port, browse[0].address);
          let answer = "";
          socket.on("data", (chunk) => (answer += chunk.toString("latin1")));
          socket.on("end", () => resolve(answer));
          socket.on("error", reject);
          socket.write(`GET ${path} HTTP/1.1\r\nHost: shop.test\r\n${auth}Connection: close\r\n\r\n`);
        });
        expect(response.split("\r\n")[0], `${path} ${auth}`).toBe("HTTP/1.1 404 Not Found");
      }
      const line = await gateway.waitForLog(
        (entry) => entry.event === "request-refused" && entry.listener === "browse" && entry.target === path,
      );
      expect(line).toMatchObject({ status: 404, method: "GET" });
    }
    expect(contacted.length).toBe(before);
  });

  /** The first line of the answer to `bytes` sent raw at `port` on `host`, once the gateway closes the connection. */
  const rawStatusLine = (host: string, port: number, bytes: string) =>
    new Promise<string>((resolve, reject) => {
      const socket = net.connect(port, host);
      let answer = "";
      socket.on("data", (chunk) => (answer += chunk.toString("latin1")));
      socket.on("close", () => resolve(answer.split("\r\n")[0]));
      socket.on("error", reject);
      socket.write(bytes);
    });

  it("answers CONNECT on each listener with 405 and a line, never a silent close, contacting nothing", async () => {
    const before = contacted.length;
    for (const [listener, host, port] of [
      ["browse", browse[0].address, browse[0].port],
      ["published", "127.0.0.1", gateway.port],
    ] as const) {
      for (const target of ["example.org:443", "shop.test:80", "/website/shop/"]) {
        const status = await rawStatusLine(host, port, `CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n\r\n`);
        expect(status, `${listener} ${target}`).toBe("HTTP/1.1 405 Method Not Allowed");
        const line = await gateway.waitForLog(
          (entry) => entry.event === "request-refused" && entry.listener === listener && entry.target === target,
        );
        expect(line).toMatchObject({ status: 405, method: "CONNECT" });
      }
    }
    expect(contacted.length).toBe(before);
  });

  it("answers an Expect it does not meet with 417 and a line, contacting nothing", async () => {
    const before = contacted.length;
    const status = await rawStatusLine(
      browse[0].address,
      browse[0].port,
      `POST /website/shop/form HTTP/1.1\r\nHost: shop.test\r\n${CONTROL_LINE}Expect: 200-ok\r\nConnection: close\r\nContent-Length: 3\r\n\r\na=1`,
    );
    expect(status).toBe("HTTP/1.1 417 Expectation Failed");
    const line = await gateway.waitForLog(
      (entry) => entry.event === "request-refused" && entry.listener === "browse" && entry.status === 417,
    );
    expect(line).toMatchObject({ method: "POST", target: "/website/shop/form" });
    expect(contacted.length).toBe(before);
  });

  it("refuses upgrades on the browse listener outside /website/<site>/", async () => {
    for (const path of ["/svc/shop/ws", "/computers/agent/cdp/devtools/browser/x"]) {
      const status = await new Promise<number>((resolve) => {
        const socket = new WebSocket(`ws://${browse[0].address}:${browse[0].port}${path}`, {
          headers: { Authorization: `Bearer ${TOKEN}` },
        });
        socket.on("unexpected-response", (_req, res) => resolve(res.statusCode!));
        socket.on("error", () => undefined);
      });
      expect(status, path).toBe(404);
    }
  });

  it("still serves everything on the published listener", async () => {
    expect((await request(`${gateway.url}/svc/shop/api`)).headers["x-upstream"]).toBe("server");
    expect((await request(`${gateway.url}/website/shop/`)).headers["x-upstream"]).toBe("frontend");
    expect((await request(`${gateway.url}/.well-known/agent-env.json`)).status).toBe(200);
    expect(
      (await request(`${gateway.url}/traffic/v1/captures`, { headers: { Authorization: `Bearer ${TOKEN}` } })).status,
    ).toBe(200);
  });

  it("resolves a host name in the config and binds the address it names", async () => {
    const named = await startGateway({
      listen: { host: "localhost", port: 0 },
      browse: { hosts: ["localhost"], port: 0 },
      sites: { shop: { server: server.url, frontend: frontend.url } },
    });
    try {
      const listeners = named.logs.find((line) => line.event === "listening")!.listeners as Bound[];
      expect(listeners.length).toBeGreaterThanOrEqual(2);
      for (const b of listeners) {
        expect(b.host).toBe("localhost");
        expect(["127.0.0.1", "::1"]).toContain(b.address);
      }
      const published = listeners.find((b) => b.listener === "published" && b.address === "127.0.0.1")!;
      expect((await request(`http://127.0.0.1:${published.port}/svc/shop/x`)).headers["x-upstream"]).toBe("server");
    } finally {
      await named.stop();
    }
  });
});
