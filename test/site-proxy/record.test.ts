// Recording a live site: a host the config names is opened at the site proxy (TLS terminated with a leaf from the env
// CA, HTTP/2 to the browser) and each request sent on to the real host over TLS verified against the trust store (here
// the stand-in's own certificate, as `trust`); its exchanges go in the request log with their cookies' values left out.
// A live host not named stays a tunnel, never decrypted; a host whose certificate the trust store does not vouch for
// is refused.
import { execFileSync } from "node:child_process";
import * as fs from "node:fs";
import * as https from "node:https";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseRequestLog, type RequestLogEntry } from "../../src/protocol/request-log";
import type { ConnectionRecord } from "../../src/protocol/site-proxy";
import { cleanup, tempDir } from "../helpers/processes";
import { until } from "../helpers/until";
import { curl, type ProxyProcess, startProxy, TEST_TOKEN } from "./helpers";
import { listenOnLoopback } from "../helpers/servers";
import { WebSocketServer } from "ws";
import { chromiumTrusting } from "../helpers/chromium";

let proxy: ProxyProcess;
let originPort: number;
let trusted: string;

/** A self-signed certificate for `names` (its own trust anchor). */
function certificate(dir: string, names: string[]): { cert: string; key: string } {
  const cert = path.join(dir, `${names[0]}.pem`);
  const key = path.join(dir, `${names[0]}-key.pem`);
  execFileSync(
    "openssl",
    [
      ...["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert, "-days", "1"],
      ...["-subj", `/CN=${names[0]}`, "-addext", `subjectAltName=${names.map((n) => `DNS:${n}`).join(",")}`],
    ],
    { stdio: "ignore" },
  );
  return { cert, key };
}

/** A page whose WebSocket to its own origin says hello and shows the echo. */
const ECHO_PAGE = `<!doctype html><title>echo</title><p id="echo">waiting</p><script>
  const socket = new WebSocket("wss://" + location.host + "/echo");
  socket.onopen = () => socket.send("hello");
  socket.onmessage = (m) => {
    document.getElementById("echo").textContent = String(m.data);
    socket.close();
  };
  socket.onerror = () => (document.getElementById("echo").textContent = "websocket failed");
</script>`;

async function startOrigin(tls: { cert: string; key: string }): Promise<number> {
  const server = https.createServer({ cert: fs.readFileSync(tls.cert), key: fs.readFileSync(tls.key) }, (req, res) => {
    if (req.url?.startsWith("/credentials")) {
      // A session in every form a site sends one: a nameless cookie, a named one, and a header of its own.
      res.setHeader("Set-Cookie", ["nameless-secret-value; Path=/", "sid=named-secret-value; Path=/; HttpOnly"]);
      res.writeHead(200, { "Content-Type": "text/plain", "X-Auth-Token": "answer-secret-token" });
      return void res.end("signed in");
    }
    if (req.url === "/authorization") {
      res.writeHead(200, { "Content-Type": "text/plain" });
      return void res.end(`authorization=${req.headers.authorization ?? "none"}`);
    }
    if (req.url === "/echo-page") {
      res.writeHead(200, { "Content-Type": "text/html" });
      return void res.end(ECHO_PAGE);
    }
    res.writeHead(200, { "Content-Type": "text/plain", "Set-Cookie": "session=live-secret-session; Path=/; Secure" });
    res.end(`live ${req.url} cookie=${req.headers.cookie ?? ""}`);
  });
  const echo = new WebSocketServer({ noServer: true });
  server.on("upgrade", (req, socket, head) =>
    echo.handleUpgrade(req, socket, head, (ws) => ws.on("message", (data) => ws.send(`echo ${String(data)}`))),
  );
  return listenOnLoopback(server);
}

beforeAll(async () => {
  const dir = tempDir();
  const live = certificate(dir, ["live.test", "other.test", "kept.test"]);
  trusted = live.cert;
  originPort = await startOrigin(live);
  proxy = await startProxy({
    reach: "allow-all",
    resolve: {
      "live.test": ["127.0.0.1"],
      "other.test": ["127.0.0.1"],
      "untrusted.test": ["127.0.0.1"],
      "kept.test": ["127.0.0.1"],
    },
    // kept.test keeps its credentials in the log (keepCredentials), as a site that opts in does.
    record: { hosts: ["live.test", "untrusted.test", "kept.test"], keepCredentials: ["kept.test"], trust: trusted },
    control: { host: "127.0.0.1", port: 0, cdp: "127.0.0.1:9" },
    requestLog: { dir: path.join(dir, "requests"), computer: "agent" },
  });
});
afterAll(cleanup);

async function served(): Promise<RequestLogEntry[]> {
  const control = `http://127.0.0.1:${proxy.startup.control!.port}`;
  const response = await fetch(`${control}/requests`, { headers: { authorization: `Bearer ${TEST_TOKEN}` } });
  return parseRequestLog(await response.text());
}

describe("recording a live site", () => {
  it("opens its HTTPS with the env CA, sends each request on over verified TLS, and logs it without its cookies", async () => {
    const url = `https://live.test:${originPort}/page?q=1`;
    const result = await curl(proxy.url, url, [
      "--cacert",
      proxy.caCertPath,
      "-v",
      "-H",
      "Cookie: sid=abc; theme=dark",
    ]);
    expect(result.exitCode).toBe(0);
    expect(result.stderr).toMatch(/issuer: CN=multienv env CA/);
    expect(result.body).toBe("live /page?q=1 cookie=sid=abc; theme=dark");
    const entry = await until("the live page's entry", async () => (await served()).find((e) => e.request.url === url));
    expect(entry.response.status).toBe(200);
    expect(entry.response.content.text).toBe("live /page?q=1 cookie=sid=abc; theme=dark");
    // A live site's session cookies never reach the log (the body is the site's to say, and is kept).
    expect(entry.request.cookies).toEqual([
      { name: "sid", value: "[redacted]" },
      { name: "theme", value: "[redacted]" },
    ]);
    expect(entry.request.headers.find((h) => h.name.toLowerCase() === "cookie")?.value).toBe(
      "sid=[redacted]; theme=[redacted]",
    );
    expect(entry.response.cookies).toEqual([
      expect.objectContaining({ name: "session", value: "[redacted]", path: "/", secure: true }),
    ]);
    expect(JSON.stringify(entry.response.headers)).not.toContain("live-secret-session");
    const tunnel = await proxy.waitForRecord<ConnectionRecord>(
      "the recorded tunnel's line",
      (r) => r.event === "connection" && r.method === "CONNECT" && r.host === "live.test",
    );
    expect(tunnel.recorded).toBe(true);
  });

  it("leaves out its credentials in every form: cookies named or nameless, Authorization of any scheme, other headers", async () => {
    const secrets = {
      Bearer: "Bearer bearer-secret-value",
      Basic: `Basic ${Buffer.from("user:basic-secret-value").toString("base64")}`,
      Custom: "SessionKey custom-secret-value",
    };
    for (const [scheme, authorization] of Object.entries(secrets)) {
      const result = await curl(proxy.url, `https://live.test:${originPort}/credentials?${scheme}`, [
        ...["--cacert", proxy.caCertPath],
        ...["-H", `Authorization: ${authorization}`],
        ...["-H", "Cookie: bare-secret-cookie; sid=named-request-secret"],
        ...["-H", "X-Api-Key: api-key-secret-value"],
        ...["-H", "X-CSRF-Token: csrf-secret-value"],
        ...["-H", "X-Trace: kept-as-it-is"],
      ]);
      expect(result.body).toBe("signed in");
    }
    const entries = await until("the three entries", async () => {
      const found = (await served()).filter((e) => e.request.url.includes("/credentials?"));
      return found.length === 3 ? found : undefined;
    });
    for (const entry of entries) {
      const said = JSON.stringify(entry);
      for (const secret of [
        "bearer-secret-value",
        Buffer.from("user:basic-secret-value").toString("base64"),
        "custom-secret-value",
        "bare-secret-cookie",
        "named-request-secret",
        "api-key-secret-value",
        "csrf-secret-value",
        "nameless-secret-value",
        "named-secret-value",
        "answer-secret-token",
      ])
        expect(said).not.toContain(secret);
      const header = (headers: { name: string; value: string }[], name: string) =>
        headers.filter((h) => h.name.toLowerCase() === name).map((h) => h.value);
      expect(header(entry.request.headers, "authorization")).toEqual(["[redacted]"]);
      expect(header(entry.request.headers, "x-api-key")).toEqual(["[redacted]"]);
      expect(header(entry.request.headers, "cookie")).toEqual(["[redacted]; sid=[redacted]"]);
      expect(header(entry.request.headers, "x-trace")).toEqual(["kept-as-it-is"]);
      expect(header(entry.response.headers, "set-cookie")).toEqual([
        "[redacted]; Path=/",
        "sid=[redacted]; Path=/; HttpOnly",
      ]);
      expect(header(entry.response.headers, "x-auth-token")).toEqual(["[redacted]"]);
      expect(entry.response.cookies.map((c) => [c.name, c.value])).toEqual([
        ["", "[redacted]"],
        ["sid", "[redacted]"],
      ]);
    }
  });

  it("keeps the credentials of a site that keeps them (keepCredentials)", async () => {
    const url = `https://kept.test:${originPort}/credentials`;
    await curl(proxy.url, url, [
      ...["--cacert", proxy.caCertPath],
      ...["-H", "Authorization: Bearer bearer-kept-value"],
      ...["-H", "Cookie: sid=cookie-kept-value"],
    ]);
    const entry = await until("the kept site's entry", async () => (await served()).find((e) => e.request.url === url));
    expect(entry.request.headers).toContainEqual({ name: "authorization", value: "Bearer bearer-kept-value" });
    expect(entry.request.cookies).toEqual([{ name: "sid", value: "cookie-kept-value" }]);
    expect(entry.response.headers).toContainEqual({ name: "X-Auth-Token", value: "answer-secret-token" });
    expect(entry.response.cookies.map((c) => c.value)).toEqual(["nameless-secret-value", "named-secret-value"]);
  });

  it("keeps HTTP/2 to the browser", async () => {
    const url = `https://live.test:${originPort}/h2`;
    const result = await curl(proxy.url, url, ["--cacert", proxy.caCertPath, "--http2", "-v"]);
    expect(result.exitCode).toBe(0);
    expect(result.stderr).toMatch(/ALPN: server accepted h2/);
    const entry = await until("the h2 entry", async () => (await served()).find((e) => e.request.url === url));
    expect(entry.request.httpVersion).toBe("HTTP/2.0");
    expect(entry.response.content.text).toBe("live /h2 cookie=");
  });

  it("never sends the computer's control token on to the host as a credential, over HTTP/1.1 or HTTP/2", async () => {
    const url = `https://live.test:${originPort}/authorization`;
    for (const version of ["--http1.1", "--http2"]) {
      const tls = ["--cacert", proxy.caCertPath, version];
      const token = await curl(proxy.url, url, [...tls, "-H", `Authorization: Bearer ${TEST_TOKEN}`]);
      expect(token.body, version).toBe("authorization=none");
      const own = await curl(proxy.url, url, [...tls, "-H", "Authorization: Bearer the-site-own-token"]);
      expect(own.body, version).toBe("authorization=Bearer the-site-own-token");
    }
  });

  it("keeps a page's WebSocket working in Chromium, its messages in the log once the page closes it", async () => {
    const browser = await chromiumTrusting(proxy.caCertPath, proxy.url);
    try {
      const page = await browser.newPage();
      await page.goto(`https://live.test:${originPort}/echo-page`);
      await page.waitForFunction('document.getElementById("echo").textContent !== "waiting"', undefined, {
        timeout: 10_000,
      });
      expect(await page.textContent("#echo")).toBe("echo hello");
      // Written when the socket closes, while the browser (and its HTTP/2 connection to the proxy) lives on.
      const entry = await until("the WebSocket's entry", async () =>
        (await served()).find((e) => e.request.url.endsWith("/echo") && e._webSocketMessages !== undefined),
      );
      expect(entry._webSocketMessages!.map((m) => [m.type, m.data])).toEqual([
        ["send", "hello"],
        ["receive", "echo hello"],
      ]);
    } finally {
      await browser.close();
    }
  });

  it("leaves a live host it does not record a tunnel, never decrypted and never logged", async () => {
    // The browser's TLS reaches the host itself: its own certificate, not one of the env CA.
    const url = `https://other.test:${originPort}/secret`;
    const result = await curl(proxy.url, url, ["--cacert", trusted, "-v"]);
    expect(result.exitCode).toBe(0);
    expect(result.stderr).toMatch(/issuer: CN=live\.test/);
    expect(result.body).toBe("live /secret cookie=");
    await proxy.waitForRecord(
      "the tunnel's line",
      (r) => r.event === "connection" && r.method === "CONNECT" && r.host === "other.test",
    );
    expect((await served()).filter((e) => e.request.url.includes("other.test"))).toEqual([]);
  });

  it("refuses a recorded host whose certificate the trust store does not vouch for", async () => {
    // untrusted.test answers with live.test's certificate, which does not name it.
    const url = `https://untrusted.test:${originPort}/`;
    const result = await curl(proxy.url, url, ["--cacert", proxy.caCertPath]);
    expect(result.status).toBe(502);
    const entry = await until("the refusal's entry", async () => (await served()).find((e) => e.request.url === url));
    expect(entry._multienv.end).toBe("proxy answer");
    expect(entry.response.content.text).toMatch(/TLS with untrusted\.test/);
  });
});

describe("a recorded site's own trust (recordTrust)", () => {
  let scoped: ProxyProcess;
  let port: number;

  beforeAll(async () => {
    const dir = tempDir();
    // One certificate naming both hosts, trusted for staging.test alone.
    const staging = certificate(dir, ["staging.test", "elsewhere.test"]);
    port = await startOrigin(staging);
    scoped = await startProxy({
      reach: "allow-all",
      resolve: { "staging.test": ["127.0.0.1"], "elsewhere.test": ["127.0.0.1"] },
      record: {
        hosts: ["staging.test", "elsewhere.test"],
        trustFor: [{ hosts: ["staging.test"], pem: fs.readFileSync(staging.cert, "utf8") }],
      },
    });
  });

  it("verifies the site's TLS against its own certificates besides the system's, for its names alone", async () => {
    const ok = await curl(scoped.url, `https://staging.test:${port}/page`, ["--cacert", scoped.caCertPath]);
    expect(ok.status).toBe(200);
    expect(ok.body).toBe("live /page cookie=");
    // The same certificate is not trusted for another recorded host, though it names it.
    const refused = await curl(scoped.url, `https://elsewhere.test:${port}/page`, ["--cacert", scoped.caCertPath]);
    expect(refused.status).toBe(502);
    expect(refused.body).toMatch(/TLS with elsewhere\.test/);
  });
});
