// The control listener: the log, the CA certificate and the browser's DevTools under /cdp/ (HTTP and WebSocket
// upgrades), each only with `Authorization: Bearer $MULTIENV_SITE_PROXY_TOKEN` (401 and a log line otherwise). The
// listeners bind the one address their host names, resolved at start while the DNS catches up. DevTools is a
// stand-in here that checks the Host header as Chromium does (test/browser has the real one).
import * as fs from "node:fs";
import * as http from "node:http";
import * as net from "node:net";
import { spawn } from "node:child_process";
import WebSocket, { WebSocketServer } from "ws";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseLiveSiteProxyLog, type ErrorRecord } from "../../src/protocol/site-proxy";
import { cleanup, onCleanup, ROOT } from "../helpers/processes";
import { connectThrough, curl, PROXY_BIN, type ProxyProcess, startProxy, TEST_TOKEN } from "./helpers";
import { startDns, startEchoServer, startHttpServer } from "../helpers/servers";
import { until } from "../helpers/until";

interface DevtoolsStandIn {
  port: number;
  seen: { url: string; headers: http.IncomingHttpHeaders }[];
}

/** Answers like Chromium's DevTools: only for a Host that is an address or localhost, ws URLs built from it. */
async function startDevtools(): Promise<DevtoolsStandIn> {
  const seen: DevtoolsStandIn["seen"] = [];
  const server = http.createServer((req, res) => {
    seen.push({ url: req.url!, headers: req.headers });
    const host = req.headers.host ?? "";
    if (!/^(localhost|\d+\.\d+\.\d+\.\d+|\[[0-9a-f:]+\])(:\d+)?$/i.test(host)) {
      res.writeHead(500).end("Host header is specified and is not an IP address or localhost.");
      return;
    }
    res.writeHead(200, { "Content-Type": "application/json" });
    res.end(JSON.stringify({ Browser: "StandIn/1", webSocketDebuggerUrl: `ws://${host}/devtools/browser/abc` }));
  });
  const sockets = new WebSocketServer({ noServer: true });
  server.on("upgrade", (req, socket, head) => {
    seen.push({ url: req.url!, headers: req.headers });
    sockets.handleUpgrade(req, socket, head, (ws) => ws.on("message", (data) => ws.send(`devtools: ${data}`)));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  onCleanup(
    () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        for (const c of sockets.clients) c.terminate();
        server.close(resolve);
      }),
  );
  return { port: (server.address() as net.AddressInfo).port, seen };
}

let devtools: DevtoolsStandIn;
let proxy: ProxyProcess;
let control: string;
const auth = { Authorization: `Bearer ${TEST_TOKEN}` };

beforeAll(async () => {
  devtools = await startDevtools();
  proxy = await startProxy({ control: { host: "127.0.0.1", port: 0, cdp: `127.0.0.1:${devtools.port}` } });
  control = `http://127.0.0.1:${proxy.startup.control!.port}`;
});
afterAll(cleanup);

/** Opens a WebSocket through the control listener; resolves with the first message after sending `hello`. */
function wsRoundTrip(headers: Record<string, string>): Promise<string> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`ws://127.0.0.1:${proxy.startup.control!.port}/cdp/devtools/browser/abc`, { headers });
    ws.on("open", () => ws.send("hello"));
    ws.on("message", (data) => {
      resolve(String(data));
      ws.close();
    });
    ws.on("unexpected-response", (_req, res) => reject(new Error(`status ${res.statusCode}`)));
    ws.on("error", reject);
  });
}

describe("the control listener's token", () => {
  const wrong: [string, Record<string, string>][] = [
    ["no Authorization", {}],
    ["a wrong token", { Authorization: `Bearer ${TEST_TOKEN.slice(0, -1)}x` }],
    ["the token with more after it", { Authorization: `Bearer ${TEST_TOKEN}x` }],
    ["the token as Basic", { Authorization: `Basic ${Buffer.from(`x:${TEST_TOKEN}`).toString("base64")}` }],
    ["the bare token", { Authorization: TEST_TOKEN }],
  ];
  for (const [what, headers] of wrong) {
    it(`answers 401 to ${what}, on every path, and logs it`, async () => {
      const before = devtools.seen.length;
      const logged = proxy.records().length;
      for (const path of ["/log", "/ca.pem", "/cdp/json/version", "/cdp/json/new?about:blank", "/nothing"]) {
        const res = await fetch(`${control}${path}`, { headers, method: path.includes("new") ? "PUT" : "GET" });
        expect(res.status, path).toBe(401);
        expect(res.headers.get("www-authenticate")).toMatch(/^Bearer /);
      }
      await expect(wsRoundTrip(headers)).rejects.toThrow(/status 401/);
      expect(devtools.seen.length, "DevTools saw nothing").toBe(before);
      const unauthorized = await until("a 401 line per request", () => {
        const lines = proxy
          .records()
          .slice(logged)
          .filter((r): r is ErrorRecord => r.event === "error" && r.status === 401);
        return lines.length >= 6 ? lines : undefined;
      });
      expect(unauthorized.map((r) => r.error)).toContain(
        `control: GET /cdp/json/version ${headers.Authorization ? "with a wrong" : "without"} bearer token`,
      );
      expect(JSON.stringify(unauthorized)).not.toContain(TEST_TOKEN);
    });
  }

  it("serves the log and the CA certificate with the token (the scheme in any case)", async () => {
    const log = await fetch(`${control}/log`, { headers: { Authorization: `bearer ${TEST_TOKEN}` } });
    expect(log.status).toBe(200);
    expect(parseLiveSiteProxyLog(await log.text())[0]).toMatchObject({
      event: "startup",
      pid: proxy.startup.pid,
      control: { cdp: `127.0.0.1:${devtools.port}` },
    });
    const ca = await fetch(`${control}/ca.pem`, { headers: auth });
    expect(await ca.text()).toBe(fs.readFileSync(proxy.caCertPath, "utf8"));
    expect((await fetch(`${control}/other`, { headers: auth })).status).toBe(404);
    expect((await fetch(`${control}/log`, { headers: auth, method: "POST" })).status).toBe(405);
  });
});

describe("the log in pieces", () => {
  it("answers a Range from a byte on, or of the last bytes, with 206 and the log's size; past its end 416", async () => {
    const whole = fs.readFileSync(proxy.logPath);
    const size = whole.length;
    const from = await fetch(`${control}/log`, { headers: { ...auth, Range: "bytes=5-" } });
    expect(from.status).toBe(206);
    expect(from.headers.get("content-range")).toBe(`bytes 5-${size - 1}/${size}`);
    expect(Buffer.from(await from.arrayBuffer())).toEqual(whole.subarray(5));
    const last = await fetch(`${control}/log`, { headers: { ...auth, Range: "bytes=-10" } });
    expect(last.status).toBe(206);
    expect(Buffer.from(await last.arrayBuffer())).toEqual(whole.subarray(size - 10));
    const past = await fetch(`${control}/log`, { headers: { ...auth, Range: `bytes=${size + 100}-` } });
    expect(past.status).toBe(416);
    expect(past.headers.get("content-range")).toBe(`bytes */${size}`);
    // Any other form is answered with the whole log.
    const other = await fetch(`${control}/log`, { headers: { ...auth, Range: "bytes=0-3,5-9" } });
    expect(other.status).toBe(200);
    expect((await other.arrayBuffer()).byteLength).toBeGreaterThanOrEqual(size);
  });
});

describe("the computer's token on the forward port", () => {
  it("never goes on to a host or the gateway, in any form a site could decode back; a site's own credential does", async () => {
    const upstream = await startHttpServer();
    const guarded = await startProxy({
      gateway: upstream.url,
      sites: { shop: ["shop.test"] },
      control: { host: "127.0.0.1", port: 0, cdp: `127.0.0.1:${devtools.port}` },
    });
    const base64 = (text: string) => Buffer.from(text).toString("base64");
    const sentOn = async (target: string, authorization: string) => {
      const socket = net.connect(guarded.port, "127.0.0.1");
      socket.on("error", () => undefined);
      socket.write(
        `GET ${target} HTTP/1.1\r\nHost: ${new URL(target).host}\r\nAuthorization: ${authorization}\r\nConnection: close\r\n\r\n`,
      );
      await new Promise((resolve) => socket.on("close", resolve).resume());
      return upstream.requests.at(-1)!.headers.authorization;
    };
    for (const target of [`${upstream.url}/host`, "http://shop.test/page"]) {
      for (const value of [
        `Bearer ${TEST_TOKEN}`,
        `Bearer%20${TEST_TOKEN}`,
        `Bearer+${TEST_TOKEN}`,
        `Bearer%09${TEST_TOKEN}`,
        `Basic ${base64(`x:${TEST_TOKEN}`)}`,
        `Bearer ${base64(TEST_TOKEN)}`,
      ])
        expect(await sentOn(target, value), `${target} ${value}`).toBeUndefined();
      expect(await sentOn(target, "Bearer the-site-own-token")).toBe("Bearer the-site-own-token");
    }
  });
});

describe("DevTools through the control listener", () => {
  it("passes what the gateway sends (Host: localhost) to DevTools, without the token", async () => {
    const res = await fetch(`${control}/cdp/json/version`, {
      headers: { ...auth, Host: "localhost", Accept: "application/json" },
    });
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({
      Browser: "StandIn/1",
      webSocketDebuggerUrl: "ws://localhost/devtools/browser/abc",
    });
    const seen = devtools.seen[devtools.seen.length - 1];
    expect(seen.url).toBe("/json/version");
    expect(seen.headers.host).toBe("localhost");
    expect(seen.headers.authorization).toBeUndefined();
  });

  it("sends DevTools Host: localhost whatever Host the client named, so its Host check passes", async () => {
    const res = await curl("", `${control}/cdp/json/version`, [
      "--noproxy",
      "*",
      "-H",
      `Authorization: Bearer ${TEST_TOKEN}`,
      "-H",
      "Host: proxy-link.test:9000",
    ]);
    expect(res.status).toBe(200);
    expect(devtools.seen[devtools.seen.length - 1].headers.host).toBe("localhost");
  });

  it("relays a WebSocket upgrade to DevTools, without the token", async () => {
    expect(await wsRoundTrip(auth)).toBe("devtools: hello");
    const seen = devtools.seen.filter((r) => r.url === "/devtools/browser/abc");
    expect(seen.length).toBeGreaterThan(0);
    expect(seen[seen.length - 1].headers.authorization).toBeUndefined();
    expect(seen[seen.length - 1].headers.host).toBe("localhost");
  });

  it("answers 502 when DevTools is not there", async () => {
    const lonely = await startProxy({ control: { host: "127.0.0.1", port: 0, cdp: "127.0.0.1:1" } });
    const res = await fetch(`http://127.0.0.1:${lonely.startup.control!.port}/cdp/json/version`, { headers: auth });
    expect(res.status).toBe(502);
  });
});

describe("listeners named by host name", () => {
  it("resolves listen.host and control.host at start, waiting for the DNS to know them, and binds those addresses alone", async () => {
    const answers: Record<string, string[]> = {};
    const dns = await startDns(answers);
    // The names resolve only a second after the proxy started: Docker's DNS learning a container's aliases.
    setTimeout(() => Object.assign(answers, { "proxy.test": ["127.0.0.2"], "control.test": ["127.0.0.3"] }), 1_000);
    const named = await startProxy({
      listen: { host: "proxy.test", port: 0 },
      control: { host: "control.test", port: 0, cdp: `127.0.0.1:${devtools.port}` },
      dnsServers: [dns.server],
    });
    expect(named.startup.proxy.host).toBe("127.0.0.2");
    expect(named.startup.control).toMatchObject({ host: "127.0.0.3" });
    expect(dns.queries.filter((q) => q === "proxy.test").length).toBeGreaterThan(1);
    // Whether a request sent to host:port reaches this proxy (its log names the probe). Another test's server may
    // hold the same port on another loopback address, so a connection alone proves nothing.
    let probes = 0;
    const reachesProxy = async (host: string, port: number) => {
      const probe = `probe-${++probes}.test`;
      await new Promise<void>((resolve) => {
        const s = net.connect(port, host);
        s.on("connect", () => s.write(`GET http://${probe}/ HTTP/1.1\r\nHost: ${probe}\r\n\r\n`));
        s.on("error", () => resolve());
        s.on("close", () => resolve());
        setTimeout(() => s.destroy(), 500);
      });
      return named.records().some((r) => "host" in r && r.host === probe);
    };
    expect(await reachesProxy("127.0.0.1", named.startup.proxy.port)).toBe(false);
    expect(await reachesProxy("127.0.0.2", named.startup.proxy.port)).toBe(true);
    const other = await fetch(`http://127.0.0.1:${named.startup.control!.port}/log`, { headers: auth }).then(
      (r) => r.status,
      () => "refused",
    );
    expect(other).not.toBe(200);
    const log = await fetch(`http://127.0.0.3:${named.startup.control!.port}/log`, { headers: auth });
    expect(log.status).toBe(200);
  });

  it("gives up on a name that never resolves with one line naming the field, exit status 2", async () => {
    const config = {
      listen: { host: "never.test", port: 0 },
      gateway: "http://127.0.0.1:9",
      sites: {},
      reach: "none",
      log: "/tmp/never-written.log",
      dnsServers: ["127.0.0.1:1"],
    };
    const child = spawn(process.execPath, [PROXY_BIN], {
      cwd: ROOT,
      env: { ...process.env, MULTIENV_SITE_PROXY_CONFIG: JSON.stringify(config) },
      stdio: ["ignore", "pipe", "pipe"],
    });
    onCleanup(() => child.kill("SIGKILL"));
    let stderr = "";
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    const started = Date.now();
    const status = await new Promise<number | null>((resolve) => child.once("exit", resolve));
    expect(status).toBe(2);
    expect(Date.now() - started).toBeGreaterThanOrEqual(4_500);
    expect(stderr).toMatch(
      /^multienv-site-proxy: MULTIENV_SITE_PROXY_CONFIG\.listen\.host: "never\.test" does not resolve .* after 5000 ms; give an address or a name this container resolves\n$/,
    );
  });
});

describe("ending every connection (POST /connections/end)", () => {
  it("ends an idle tunnel, a keep-alive request connection and its pooled upstream, and answers once all their lines are in the log", async () => {
    const echo = await startEchoServer();
    const origin = await startHttpServer();
    const tunnel = await connectThrough(proxy.port, `127.0.0.1:${echo.port}`);
    expect(tunnel.status).toBe(200);
    tunnel.socket.write("hello");
    await new Promise((resolve) => tunnel.socket.once("data", resolve));
    // A plain-HTTP request on a keep-alive connection: both it and the proxy's upstream stay open afterwards.
    const client = net.connect(proxy.port, "127.0.0.1");
    client.write(`GET http://127.0.0.1:${origin.port}/kept HTTP/1.1\r\nHost: 127.0.0.1:${origin.port}\r\n\r\n`);
    await new Promise((resolve) => client.once("data", resolve));
    const closed = (socket: net.Socket) => new Promise((resolve) => socket.once("close", resolve));
    const ends = [closed(tunnel.socket), closed(client)];
    const before = proxy.records().filter((r) => r.event === "connection").length;

    const answer = await fetch(`${control}/connections/end`, { method: "POST", headers: auth });
    expect(answer.status).toBe(200);
    expect(((await answer.json()) as { ended: number }).ended).toBeGreaterThanOrEqual(3);
    // No waiting: the answer came after the lines were written.
    const lines = proxy
      .records()
      .filter((r) => r.event === "connection")
      .slice(before);
    expect(lines.map((r) => `${(r as { method: string }).method} ${(r as { port: number }).port}`).sort()).toEqual(
      [`CONNECT ${echo.port}`, `HTTP ${origin.port}`].sort(),
    );
    await Promise.all(ends);
  });

  it("takes POST alone, with the token alone", async () => {
    expect((await fetch(`${control}/connections/end`, { headers: auth })).status).toBe(405);
    expect((await fetch(`${control}/connections/end`, { method: "POST" })).status).toBe(401);
    expect(
      (
        await fetch(`${control}/connections/end`, {
          method: "POST",
          headers: { Authorization: `Bearer ${TEST_TOKEN}x` },
        })
      ).status,
    ).toBe(401);
  });

  it("is not on the proxy listener: there it is a request like any other, refused as one", async () => {
    const res = await curl(proxy.url, "http://127.0.0.1:1/connections/end", ["-X", "POST"]);
    expect(res.status).not.toBe(200);
  });
});

describe("marking an episode (POST /connections/end?episode=<n>)", () => {
  it("writes the episode line after the lines of every connection it ended", async () => {
    const echo = await startEchoServer();
    const tunnel = await connectThrough(proxy.port, `127.0.0.1:${echo.port}`);
    expect(tunnel.status).toBe(200);
    const answer = await fetch(`${control}/connections/end?episode=2`, { method: "POST", headers: auth });
    expect(answer.status).toBe(200);
    const records = proxy.records();
    const markAt = records.findIndex((r) => r.event === "episode");
    expect(records[markAt]).toMatchObject({ event: "episode", episode: 2 });
    const tunnelAt = records.findIndex((r) => r.event === "connection" && (r as { port: number }).port === echo.port);
    expect(tunnelAt).toBeGreaterThanOrEqual(0);
    expect(tunnelAt).toBeLessThan(markAt);
  });

  it("marks a self-test's start and end", async () => {
    for (const phase of ["start", "end"])
      expect(
        (await fetch(`${control}/connections/end?selfTest=${phase}`, { method: "POST", headers: auth })).status,
      ).toBe(200);
    expect(
      proxy
        .records()
        .filter((r) => r.event === "self-test")
        .map((r) => (r as { phase: string }).phase),
    ).toEqual(["start", "end"]);
  });

  it("refuses any mark but one episode, a whole number from 1, or one self-test phase, marking nothing", async () => {
    const before = proxy.records().filter((r) => r.event === "episode").length;
    for (const bad of [
      "episode=0",
      "episode=-1",
      "episode=1.5",
      "episode=x",
      "episode=",
      "episode=99999999999",
      "episode=2&episode=3",
      "episode=2&selfTest=start",
      "selfTest=middle",
      "other=1",
    ]) {
      expect((await fetch(`${control}/connections/end?${bad}`, { method: "POST", headers: auth })).status, bad).toBe(
        400,
      );
    }
    expect(proxy.records().filter((r) => r.event === "episode").length).toBe(before);
  });
});
