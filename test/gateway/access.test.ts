// Who may use which route, tried as a client holding one credential would: raw bytes on a socket to the gateway
// process, on both listeners. A computer's agent token opens that computer's DevTools and nothing else; the control
// token opens every route of the published listener, which wants it everywhere but /healthz.
import { mkdtempSync, rmSync } from "node:fs";
import http from "node:http";
import type { Duplex } from "node:stream";
import net, { type AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WebSocketServer } from "ws";
import { bearer, computerAgentToken, computerControlToken } from "../../src/protocol/auth";
import { echoHandler, startUpstream, type Upstream } from "../helpers/servers";
import { CONTROL_LINE, startGateway, TOKEN, type GatewayProcess } from "./helpers";

const AGENT = computerAgentToken(TOKEN, "agent");
const OTHER = computerAgentToken(TOKEN, "other");
const WS_UPGRADE =
  "Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n";

/** Writes `bytes` to host:port and resolves with what came back up to the end of the answer's head. */
function head(host: string, port: number, bytes: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, host);
    let text = "";
    socket.setTimeout(5_000, () => socket.destroy(new Error(`no answer to ${bytes.split("\r\n")[0]}`)));
    socket.on("data", (chunk) => {
      text += chunk.toString("latin1");
      if (text.includes("\r\n\r\n")) {
        socket.destroy();
        resolve(text);
      }
    });
    socket.on("error", reject);
    socket.on("end", () => resolve(text));
    socket.write(bytes, "latin1");
  });
}

const status = (answer: string) => Number(answer.split(" ")[1]);

/**
 * A computer's site-proxy control listener as the gateway meets it: its own token required; DevTools' JSON at
 * /cdp/json/version, a WebSocket accepted at /cdp/devtools/..., a log at /log, ending connections at
 * /connections/end.
 */
async function startControl(computer: string): Promise<{ url: string; close(): Promise<void> }> {
  const expected = bearer(computerControlToken(TOKEN, computer));
  const server = http.createServer((req, res) => {
    if (req.headers.authorization !== expected) return void res.writeHead(401).end();
    if (req.url === "/cdp/json/version")
      return void res
        .writeHead(200, { "Content-Type": "application/json" })
        .end(JSON.stringify({ webSocketDebuggerUrl: "ws://127.0.0.1:9222/devtools/browser/b" }));
    res.writeHead(200, { "Content-Type": "text/plain" }).end(`${computer} ${req.url}`);
  });
  const upgraded = new Set<Duplex>();
  const sockets = new WebSocketServer({ noServer: true });
  server.on("upgrade", (req, socket, head) => {
    upgraded.add(socket);
    if (req.headers.authorization !== expected) return void socket.end("HTTP/1.1 401 Unauthorized\r\n\r\n");
    // A real WebSocket handshake: the gateway relays an agent's DevTools messages itself, so it opens its own
    // WebSocket to the computer's and checks the answer's Sec-WebSocket-Accept, as it would DevTools'.
    sockets.handleUpgrade(req, socket, head, () => {});
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      new Promise((done) => {
        server.close(() => done());
        server.closeAllConnections();
        for (const socket of upgraded) socket.destroy();
      }),
  };
}

describe("gateway access: the agent token and the control token", () => {
  let gateway: GatewayProcess;
  let site: Upstream;
  let agentControl: Awaited<ReturnType<typeof startControl>>;
  let otherControl: Awaited<ReturnType<typeof startControl>>;
  let captures: string;
  let browse: { address: string; port: number };
  const seenBySite: string[] = [];

  beforeAll(async () => {
    site = await startUpstream(echoHandler("site", (req) => seenBySite.push(req.url ?? "")));
    agentControl = await startControl("agent");
    otherControl = await startControl("other");
    captures = mkdtempSync(join(tmpdir(), "access-captures-"));
    const computer = (control: string) => ({
      cdp: `${control}/cdp`,
      proxyLog: `${control}/log`,
      endConnections: `${control}/connections/end`,
    });
    gateway = await startGateway({
      browse: { hosts: ["127.0.0.2"], port: 0 },
      sites: { shop: { server: site.url, frontend: site.url } },
      capturesDir: captures,
      computers: { agent: computer(agentControl.url), other: computer(otherControl.url) },
    });
    const listeners = gateway.logs.find((line) => line.event === "listening")!.listeners as Array<{
      listener: string;
      address: string;
      port: number;
    }>;
    browse = listeners.find((b) => b.listener === "browse")!;
  });
  afterAll(async () => {
    await Promise.all([site?.close(), agentControl?.close(), otherControl?.close()]);
    await gateway?.stop();
    rmSync(captures, { recursive: true, force: true });
  });

  const published = (bytes: string) => head("127.0.0.1", gateway.port, bytes);

  it("opens its own computer's DevTools with the agent token: JSON and the WebSocket, as Bearer or in the own header", async () => {
    for (const credential of [`Authorization: Bearer ${AGENT}\r\n`, `X-Multienv-Token: ${AGENT}\r\n`]) {
      const json = await published(
        `GET /computers/agent/cdp/json/version HTTP/1.1\r\nHost: gw\r\n${credential}Connection: close\r\n\r\n`,
      );
      expect(status(json), credential).toBe(200);
      const upgrade = await published(
        `GET /computers/agent/cdp/devtools/browser/b HTTP/1.1\r\nHost: gw\r\n${WS_UPGRADE}${credential}\r\n`,
      );
      expect(status(upgrade), credential).toBe(101);
    }
  });

  /** Every route but the agent computer's DevTools, on the published listener: [request line, extra head lines]. */
  const elsewhere: Array<[string, string]> = [
    ["GET /computers/other/cdp/json/version", ""],
    ["GET /computers/other/cdp/devtools/browser/b", WS_UPGRADE],
    ["GET /computers/agent/proxy-log", ""],
    ["POST /computers/agent/connections/end", "Content-Length: 0\r\n"],
    ["GET /traffic/v1/captures", ""],
    ["GET /traffic/v1/captures/shop-server.pcap0", ""],
    ["GET /svc/shop/data", ""],
    ["POST /svc/shop/reset", "Content-Length: 0\r\n"],
    ["GET /website/shop/", ""],
    ["GET /svc/shop/ws", WS_UPGRADE],
    ["GET /.well-known/agent-env.json", ""],
    ["GET /healthz", ""],
    ["GET /nowhere", ""],
  ];
  const b64 = (text: string) => Buffer.from(text).toString("base64");
  /** The agent token as a client may write it, the control token beside it or not. */
  const agentCredentials = [
    `Authorization: Bearer ${AGENT}\r\n`,
    `X-Multienv-Token: ${AGENT}\r\n`,
    `Authorization: Basic ${b64(`agent:${AGENT}`)}\r\n`,
    `Authorization: Bearer%20${AGENT}\r\n`,
    `${CONTROL_LINE}Authorization: Bearer ${AGENT}\r\n`,
  ];

  it("refuses the agent token on every other route of the published listener: 401 and a request-refused line", async () => {
    const before = seenBySite.length;
    for (const [line, extra] of elsewhere) {
      for (const credential of agentCredentials) {
        const answer = await published(
          `${line} HTTP/1.1\r\nHost: gw\r\n${extra}${credential}Connection: close\r\n\r\n`,
        );
        expect(status(answer), `${line} with ${credential}`).toBe(401);
        expect(answer, line).toMatch(/WWW-Authenticate: Bearer realm="multienv"/i);
      }
      const target = line.split(" ")[1];
      await gateway.waitForLog(
        (entry) =>
          entry.event === "request-refused" &&
          entry.status === 401 &&
          entry.target === target &&
          entry.reason === "agent token refused here",
      );
    }
    expect(seenBySite.length).toBe(before);
    expect(JSON.stringify(gateway.logs)).not.toContain(AGENT);
  });

  it("refuses another computer's agent token on this computer's DevTools", async () => {
    const answer = await published(
      `GET /computers/agent/cdp/json/version HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer ${OTHER}\r\nConnection: close\r\n\r\n`,
    );
    expect(status(answer)).toBe(401);
  });

  it("refuses the agent token on the browse listener, where a computer's own browser would send it", async () => {
    const before = seenBySite.length;
    for (const credential of agentCredentials) {
      for (const line of ["GET /website/shop/", "GET /computers/agent/cdp/json/version", "GET /svc/shop/data"]) {
        const answer = await head(
          browse.address,
          browse.port,
          `${line} HTTP/1.1\r\nHost: shop.test\r\n${credential}Connection: close\r\n\r\n`,
        );
        expect(status(answer), `${line} with ${credential}`).toBe(401);
      }
    }
    await gateway.waitForLog(
      (entry) => entry.event === "request-refused" && entry.listener === "browse" && entry.status === 401,
    );
    expect(seenBySite.length).toBe(before);
    // Without it, the browse listener serves a synthetic site's pages as before.
    const page = await head(
      browse.address,
      browse.port,
      "GET /website/shop/p HTTP/1.1\r\nHost: shop.test\r\nConnection: close\r\n\r\n",
    );
    expect(status(page)).toBe(200);
  });

  it("wants the control token on every route of the published listener but /healthz: /svc/ (session, data, reset), /website/, the card", async () => {
    const before = seenBySite.length;
    for (const [line, extra] of [
      ["GET /svc/shop/session", ""],
      ["GET /svc/shop/data", ""],
      ["POST /svc/shop/reset", "Content-Length: 0\r\n"],
      ["GET /svc/shop/ws", WS_UPGRADE],
      ["GET /website/shop/", ""],
      ["GET /.well-known/agent-env.json", ""],
      ["GET /computers/agent/cdp/json/version", ""],
    ]) {
      for (const credential of [
        "",
        "Authorization: Bearer wrong-token-of-thirty-two-characters\r\n",
        `X-Multienv-Token: ${TOKEN}x\r\n`,
      ]) {
        const answer = await published(
          `${line} HTTP/1.1\r\nHost: gw\r\n${extra}${credential}Connection: close\r\n\r\n`,
        );
        expect(status(answer), `${line} with ${credential}`).toBe(401);
      }
      const target = line.split(" ")[1];
      await gateway.waitForLog(
        (entry) => entry.event === "request-refused" && entry.status === 401 && entry.target === target,
      );
    }
    expect(seenBySite.length).toBe(before);
    const health = await published("GET /healthz HTTP/1.1\r\nHost: gw\r\nConnection: close\r\n\r\n");
    expect([200, 503]).toContain(status(health));
  });

  it("takes the control token in its own header, so a site's own Authorization reaches the site, and the header does not", async () => {
    const answer = (
      await published(
        `GET /svc/shop/data HTTP/1.1\r\nHost: gw\r\n${CONTROL_LINE}Authorization: Bearer the-site-own-token\r\nConnection: close\r\n\r\n`,
      )
    ).toString();
    expect(status(answer)).toBe(200);
    const raw = await new Promise<string>((resolve, reject) => {
      const socket = net.connect(gateway.port, "127.0.0.1");
      let text = "";
      socket.on("data", (chunk) => (text += chunk.toString("latin1")));
      socket.on("end", () => resolve(text));
      socket.on("error", reject);
      socket.write(
        `GET /svc/shop/data HTTP/1.1\r\nHost: gw\r\n${CONTROL_LINE}Authorization: Bearer the-site-own-token\r\nConnection: close\r\n\r\n`,
      );
    });
    const echoed = JSON.parse(raw.slice(raw.indexOf("\r\n\r\n") + 4)) as { rawHeaders: string[] };
    const names = echoed.rawHeaders.filter((_, i) => i % 2 === 0).map((name) => name.toLowerCase());
    expect(names).not.toContain("x-multienv-token");
    expect(echoed.rawHeaders[names.indexOf("authorization") * 2 + 1]).toBe("Bearer the-site-own-token");
    expect(raw).not.toContain(TOKEN);
    // As Bearer, the control token opens the route and is removed.
    const bearerAnswer = await published(
      `GET /svc/shop/data HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer ${TOKEN}\r\nConnection: close\r\n\r\n`,
    );
    expect(status(bearerAnswer)).toBe(200);
  });
});
