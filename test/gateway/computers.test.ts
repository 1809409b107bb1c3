// A computer's Chrome DevTools endpoint (and its site proxy's log) through the gateway, against a
// real headless Chromium behind a stand-in for the computer's site-proxy control listener, which
// (like the real one) answers only the computer's own control token.
import http from "node:http";
import net, { type AddressInfo } from "node:net";
import { chromium } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WebSocket } from "ws";
import { bearer, computerAgentToken, computerControlToken } from "../../src/protocol/auth";
import { startChromium, type Chromium } from "../helpers/chromium";
import { cleanup } from "../helpers/processes";
import { startUpstream, type Upstream } from "../helpers/servers";
import { request, startGateway, TOKEN, type GatewayProcess } from "./helpers";

const AUTH = { Authorization: `Bearer ${TOKEN}` };

/** One CDP command over a WebSocket: resolves with its result. */
function cdpCommand(
  socket: WebSocket,
  method: string,
  params: Record<string, unknown> = {},
): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    const id = Math.floor(Math.random() * 1e9);
    const onMessage = (data: Buffer) => {
      const message = JSON.parse(data.toString());
      if (message.id !== id) return;
      socket.off("message", onMessage);
      if (message.error) reject(new Error(message.error.message));
      else resolve(message.result);
    };
    socket.on("message", onMessage);
    socket.send(JSON.stringify({ id, method, params }));
  });
}

interface ControlListener {
  url: string;
  /** The Authorization header of every request and upgrade it received. */
  authorizations: Array<string | undefined>;
  close(): Promise<void>;
}

/**
 * The site proxy's control listener as the gateway meets it: `Authorization: Bearer
 * <computerControlToken>` required (401 otherwise), `/cdp/...` relayed to DevTools at
 * `devtoolsPort` (HTTP and WebSocket upgrades), `GET /log` served by `log`.
 */
async function startControlListener(
  computer: string,
  devtoolsPort: number,
  log: http.RequestListener,
): Promise<ControlListener> {
  const expected = bearer(computerControlToken(TOKEN, computer));
  const authorizations: Array<string | undefined> = [];
  const allowed = (req: http.IncomingMessage) => {
    authorizations.push(req.headers.authorization);
    return req.headers.authorization === expected;
  };
  const devtoolsHeaders = (req: http.IncomingMessage) => {
    const headers: string[] = [];
    for (let i = 0; i < req.rawHeaders.length; i += 2)
      if (req.rawHeaders[i].toLowerCase() !== "authorization") headers.push(req.rawHeaders[i], req.rawHeaders[i + 1]);
    return headers;
  };
  const server = http.createServer((req, res) => {
    if (!allowed(req)) return void res.writeHead(401).end();
    if (req.url === "/log") return log(req, res);
    if (req.url === "/connections/end")
      return void res
        .writeHead(200, { "Content-Type": "application/json" })
        .end(JSON.stringify({ ended: 2, method: req.method }));
    if (!req.url?.startsWith("/cdp/")) return void res.writeHead(404).end();
    const upstream = http.request(
      {
        host: "127.0.0.1",
        port: devtoolsPort,
        method: req.method,
        path: req.url.slice("/cdp".length),
        headers: devtoolsHeaders(req) as unknown as http.OutgoingHttpHeaders,
        setHost: false,
        agent: false,
      },
      (answer) => {
        res.writeHead(answer.statusCode!, answer.headers);
        answer.pipe(res);
      },
    );
    upstream.on("error", () => res.destroy());
    req.pipe(upstream);
  });
  server.on("upgrade", (req, socket, head) => {
    if (!allowed(req) || !req.url?.startsWith("/cdp/"))
      return void socket.end("HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\n\r\n");
    const devtools = net.connect(devtoolsPort, "127.0.0.1", () => {
      const raw = devtoolsHeaders(req);
      let text = `${req.method} ${req.url!.slice("/cdp".length)} HTTP/1.1\r\n`;
      for (let i = 0; i < raw.length; i += 2) text += `${raw[i]}: ${raw[i + 1]}\r\n`;
      devtools.write(text + "\r\n");
      if (head.length) devtools.write(head);
      devtools.pipe(socket);
      socket.pipe(devtools);
    });
    devtools.on("error", () => socket.destroy());
    socket.on("error", () => devtools.destroy());
    socket.on("close", () => devtools.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    authorizations,
    close: () =>
      new Promise((done) => {
        server.close(() => done());
        server.closeAllConnections();
      }),
  };
}

describe("gateway /computers/<name>", () => {
  let browser: Chromium;
  let control: ControlListener;
  let nologControl: ControlListener;
  let page: Upstream;
  let gateway: GatewayProcess;

  beforeAll(async () => {
    browser = await startChromium();
    control = await startControlListener("agent", browser.port, (req, res) => {
      res.writeHead(200, { "Content-Type": "application/x-ndjson", "X-Path": req.url ?? "" });
      res.write('{"event":"startup"}\n');
      setTimeout(() => res.end('{"event":"connection","host":"shop.test"}\n'), 50);
    });
    nologControl = await startControlListener("nolog", browser.port, (_req, res) => res.writeHead(404).end());
    page = await startUpstream((_req, res) => res.end("<title>through the gateway</title>"));
    gateway = await startGateway({
      sites: {},
      computers: {
        agent: {
          cdp: `${control.url}/cdp`,
          proxyLog: `${control.url}/log`,
          endConnections: `${control.url}/connections/end`,
        },
        nolog: { cdp: `${nologControl.url}/cdp` },
      },
    });
  });
  afterAll(async () => {
    await gateway?.stop();
    await Promise.all([control?.close(), nologControl?.close(), page?.close()]);
    await cleanup();
  });

  it("serves /json/version with the WebSocket URL rewritten to the gateway's", async () => {
    const answer = await request(`${gateway.url}/computers/agent/cdp/json/version`, { headers: AUTH });
    expect(answer.status).toBe(200);
    const version = JSON.parse(answer.body);
    expect(version.Browser).toMatch(/Chrome/);
    expect(version.webSocketDebuggerUrl).toMatch(
      new RegExp(`^ws://127\\.0\\.0\\.1:${gateway.port}/computers/agent/cdp/devtools/browser/[0-9a-f-]+$`),
    );
  });

  it("rewrites every target's WebSocket URL in /json/list", async () => {
    const targets = JSON.parse(
      (await request(`${gateway.url}/computers/agent/cdp/json/list`, { headers: AUTH })).body,
    ) as Array<Record<string, string>>;
    expect(targets.length).toBeGreaterThan(0);
    for (const target of targets.filter((t) => t.webSocketDebuggerUrl)) {
      expect(
        target.webSocketDebuggerUrl.startsWith(`ws://127.0.0.1:${gateway.port}/computers/agent/cdp/devtools/`),
      ).toBe(true);
    }
  });

  it("passes the DevTools WebSocket through, with the token", async () => {
    const version = JSON.parse(
      (await request(`${gateway.url}/computers/agent/cdp/json/version`, { headers: AUTH })).body,
    );
    const socket = new WebSocket(version.webSocketDebuggerUrl, { headers: AUTH });
    await new Promise((resolve, reject) => {
      socket.once("open", resolve);
      socket.once("error", reject);
    });
    const result = await cdpCommand(socket, "Browser.getVersion");
    expect(String(result.product)).toMatch(/Chrome/);
    socket.close();
  });

  /** Drives the agent computer's browser with Playwright over its DevTools route, sending `headers`. */
  async function browseThroughGateway(headers: Record<string, string>): Promise<void> {
    const connected = await chromium.connectOverCDP(`${gateway.url}/computers/agent/cdp`, { headers, timeout: 15_000 });
    try {
      const context = connected.contexts()[0] ?? (await connected.newContext());
      const tab = await context.newPage();
      await tab.goto(page.url);
      expect(await tab.title()).toBe("through the gateway");
      await tab.close();
    } finally {
      await connected.close();
    }
  }

  it("lets an agent drive its computer's browser with Playwright and the computer's agent token alone", async () => {
    const agentAuth = { Authorization: `Bearer ${computerAgentToken(TOKEN, "agent")}` };
    await browseThroughGateway(agentAuth);
    // The same token opens nothing else: not this computer's proxy log, not another computer's DevTools.
    expect(
      (await request(`${gateway.url}/computers/agent/proxy-log`, { headers: agentAuth, control: false })).status,
    ).toBe(401);
    expect(
      (await request(`${gateway.url}/computers/nolog/cdp/json/version`, { headers: agentAuth, control: false })).status,
    ).toBe(401);
  });

  it("lets Playwright drive the browser over CDP through the gateway", async () => {
    await browseThroughGateway(AUTH);
  });

  it("answers an unknown computer with 404 JSON", async () => {
    const answer = await request(`${gateway.url}/computers/nobody/cdp/json/version`, { headers: AUTH });
    expect(answer.status).toBe(404);
    expect(JSON.parse(answer.body)).toEqual({ error: "unknown computer", computer: "nobody" });
  });

  it("streams the site proxy's log", async () => {
    const answer = await request(`${gateway.url}/computers/agent/proxy-log`, { headers: AUTH });
    expect(answer.status).toBe(200);
    expect(answer.headers["x-path"]).toBe("/log");
    expect(
      answer.body
        .trim()
        .split("\n")
        .map((line) => JSON.parse(line).event),
    ).toEqual(["startup", "connection"]);
    const none = await request(`${gateway.url}/computers/nolog/proxy-log`, { headers: AUTH });
    expect(none.status).toBe(404);
  });

  it("ends a computer's connections with POST alone, on a computer whose site proxy can", async () => {
    const answer = await request(`${gateway.url}/computers/agent/connections/end`, { method: "POST", headers: AUTH });
    expect(answer.status).toBe(200);
    expect(JSON.parse(answer.body)).toEqual({ ended: 2, method: "POST" });
    expect((await request(`${gateway.url}/computers/agent/connections/end`, { headers: AUTH })).status).toBe(405);
    expect(
      (await request(`${gateway.url}/computers/nolog/connections/end`, { method: "POST", headers: AUTH })).status,
    ).toBe(404);
    expect(
      (await request(`${gateway.url}/computers/agent/connections/end/more`, { method: "POST", headers: AUTH })).status,
    ).toBe(404);
  });

  it("authenticates to each computer's control listener with that computer's token, never the control token", async () => {
    expect((await request(`${gateway.url}/computers/nolog/cdp/json/version`, { headers: AUTH })).status).toBe(200);
    // Every path above reached the control listeners: DevTools JSON, WebSocket upgrades, Playwright's traffic, the log.
    expect(control.authorizations.length).toBeGreaterThan(4);
    expect(new Set(control.authorizations)).toEqual(new Set([bearer(computerControlToken(TOKEN, "agent"))]));
    expect(new Set(nologControl.authorizations)).toEqual(new Set([bearer(computerControlToken(TOKEN, "nolog"))]));
    for (const seen of [...control.authorizations, ...nologControl.authorizations]) expect(seen).not.toContain(TOKEN);
  });
});
