// docs/design.md "Site proxy": a synthetic name always wins (also inside a wildcard the computer reaches), and goes to
// the gateway's /website/<site>/ with X-Forwarded-Host/-Proto; CONNECT to it is TLS terminated with a leaf for exactly
// that name from the env CA, which a browser trusting the CA loads without a certificate error.
import * as crypto from "node:crypto";
import * as fs from "node:fs";
import * as net from "node:net";
import * as tls from "node:tls";
import { WebSocketServer } from "ws";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { chromiumTrusting } from "../helpers/chromium";
import { cleanup } from "../helpers/processes";
import { connectThrough, curl, type ProxyProcess, startProxy } from "./helpers";
import { startDns, startHttpServer, type TestHttpServer } from "../helpers/servers";

let gateway: TestHttpServer;
const upgrades: { url: string; forwardedHost: unknown; forwardedProto: unknown }[] = [];
let live: TestHttpServer;
let proxy: ProxyProcess;

beforeAll(async () => {
  gateway = await startHttpServer((req) =>
    req.url === "/website/shop/live"
      ? `<html><body>waiting</body><script>
          const socket = new WebSocket("wss://shop.test/socket");
          socket.onopen = () => socket.send("hi");
          socket.onmessage = (m) => (document.body.textContent = "echo: " + m.data);
          socket.onerror = () => (document.body.textContent = "websocket failed");
        </script></html>`
      : `<html><head><title>shop</title></head><body>the shop at ${req.url}</body></html>`,
  );
  // The gateway passes WebSocket upgrades to a synthetic site; this one echoes.
  const sockets = new WebSocketServer({ noServer: true });
  gateway.server.on("upgrade", (req, socket, head) => {
    upgrades.push({
      url: req.url!,
      forwardedHost: req.headers["x-forwarded-host"],
      forwardedProto: req.headers["x-forwarded-proto"],
    });
    sockets.handleUpgrade(req, socket, head, (ws) => ws.on("message", (data) => ws.send(String(data))));
  });
  live = await startHttpServer(() => "the live site itself");
  const dns = await startDns({ "www.live.test": ["127.0.0.1"], "shop.live.test": ["127.0.0.1"] });
  proxy = await startProxy({
    gateway: gateway.url,
    sites: { shop: ["shop.test", "*.shop.test"], docs: ["shop.live.test"] },
    // The computer reaches the live wildcard *.live.test; shop.live.test inside it is still the synthetic site's.
    reach: ["*.live.test"],
    dnsServers: [dns.server],
  });
});
afterAll(cleanup);

function lastGatewayRequest() {
  return gateway.requests[gateway.requests.length - 1];
}

describe("synthetic names", () => {
  it("sends plain HTTP for a synthetic name to the gateway's /website/<site>/ path, query and encoding kept", async () => {
    const result = await curl(proxy.url, "http://shop.test/cart/a%2Fb?item=1&x=%20");
    expect(result.status).toBe(200);
    expect(result.body).toContain("the shop at /website/shop/cart/a%2Fb?item=1&x=%20");
    const seen = lastGatewayRequest();
    expect(seen.url).toBe("/website/shop/cart/a%2Fb?item=1&x=%20");
    expect(seen.headers["x-forwarded-host"]).toBe("shop.test");
    expect(seen.headers["x-forwarded-proto"]).toBe("http");
    expect(seen.headers["host"]).toBe(new URL(gateway.url).host);
  });

  it("routes names under a synthetic wildcard to its site", async () => {
    const result = await curl(proxy.url, "http://api.eu.shop.test:8080/v1");
    expect(result.status).toBe(200);
    expect(lastGatewayRequest().url).toBe("/website/shop/v1");
    expect(lastGatewayRequest().headers["x-forwarded-host"]).toBe("api.eu.shop.test:8080");
  });

  it("gives a synthetic name inside a live wildcard the computer reaches to the synthetic site, not the live host", async () => {
    const viaSynthetic = await curl(proxy.url, "http://shop.live.test/");
    expect(viaSynthetic.body).toContain("the shop at /website/docs/");
    const liveHost = await curl(proxy.url, `http://www.live.test:${live.port}/`);
    expect(liveHost.body).toBe("the live site itself");
  });

  it("terminates TLS for CONNECT to a synthetic name with a leaf for exactly that name, issued by the env CA and cached", async () => {
    const caPem = fs.readFileSync(proxy.caCertPath, "utf8");
    const peers: tls.PeerCertificate[] = [];
    for (let i = 0; i < 2; i++) {
      const { socket, status } = await connectThrough(proxy.port, "shop.test:443");
      expect(status).toBe(200);
      const secure = tls.connect({ socket, servername: "shop.test", ca: caPem });
      await new Promise<void>((resolve, reject) => secure.once("secureConnect", resolve).once("error", reject));
      expect(secure.authorized).toBe(true);
      peers.push(secure.getPeerCertificate());
      secure.write("GET /orders?id=7 HTTP/1.1\r\nHost: shop.test\r\nConnection: close\r\n\r\n");
      const answer = await new Promise<string>((resolve) => {
        let text = "";
        secure.on("data", (d: Buffer) => (text += d.toString()));
        secure.on("close", () => resolve(text));
      });
      expect(answer).toContain("the shop at /website/shop/orders?id=7");
    }
    expect(peers[0].subjectaltname).toBe("DNS:shop.test");
    expect(peers[0].subject.CN).toBe("shop.test");
    expect(new crypto.X509Certificate(caPem).subject).toContain(peers[0].issuer.CN);
    expect(peers[1].serialNumber).toBe(peers[0].serialNumber); // the leaf is issued once and kept
    expect(lastGatewayRequest().headers["x-forwarded-proto"]).toBe("https");
    expect(lastGatewayRequest().headers["x-forwarded-host"]).toBe("shop.test");
  });

  it("serves several requests in one TLS session to the gateway (curl with the CA)", async () => {
    // curl pairs -o with URLs in order: the helper's body file takes /one, /dev/null takes /two.
    const result = await curl(proxy.url, "https://shop.test/two", [
      "--cacert",
      proxy.caCertPath,
      "-v",
      "https://shop.test/one",
      "-o",
      "/dev/null",
    ]);
    expect(result.exitCode).toBe(0);
    expect(result.body).toContain("/website/shop/one");
    expect(result.stderr).toMatch(/Re-using existing connection/);
    expect(gateway.requests.slice(-2).map((r) => r.url)).toEqual(["/website/shop/one", "/website/shop/two"]);
  });

  it("reads a tunnel to a synthetic name that starts in the clear as plain HTTP (ws:// through CONNECT)", async () => {
    const { socket, status } = await connectThrough(proxy.port, "shop.test:80");
    expect(status).toBe(200);
    socket.write("GET /plain?x=1 HTTP/1.1\r\nHost: shop.test\r\nConnection: close\r\n\r\n");
    const answer = await new Promise<string>((resolve) => {
      let text = "";
      socket.on("data", (d: Buffer) => (text += d.toString()));
      socket.on("close", () => resolve(text));
    });
    expect(answer).toMatch(/^HTTP\/1\.1 200 /);
    expect(answer).toContain("the shop at /website/shop/plain?x=1");
    expect(lastGatewayRequest().headers["x-forwarded-proto"]).toBe("http");
    expect(lastGatewayRequest().headers["x-forwarded-host"]).toBe("shop.test");
  });

  it("loads https://shop.test/ in headless Chromium trusting the env CA, without a certificate error", async () => {
    const browser = await chromiumTrusting(proxy.caCertPath, proxy.url);
    try {
      const page = await browser.newPage();
      const certificateErrors: string[] = [];
      page.on("requestfailed", (r) => certificateErrors.push(`${r.url()}: ${r.failure()?.errorText}`));
      const response = await page.goto("https://shop.test/");
      expect(certificateErrors).toEqual([]);
      expect(response?.status()).toBe(200);
      expect(await page.textContent("body")).toBe("the shop at /website/shop/");
      const security = await response!.securityDetails();
      expect(security?.subjectName).toBe("shop.test");
      expect(security?.issuer).toMatch(/multienv env CA/);
      expect(lastGatewayRequest().headers["x-forwarded-proto"]).toBe("https");

      // A page's WebSocket to its own synthetic name goes through the same tunnel machinery to the gateway.
      await page.goto("https://shop.test/live");
      // The script is part of the body's text until a message or an error replaces it.
      await page.waitForFunction('!document.body.textContent.startsWith("waiting")', undefined, { timeout: 10_000 });
      expect(await page.textContent("body")).toBe("echo: hi");
      expect(upgrades).toContainEqual({
        url: "/website/shop/socket",
        forwardedHost: "shop.test",
        forwardedProto: "https",
      });
    } finally {
      await browser.close();
    }
  });
});

describe("the env CA's certificate on the forward port", () => {
  /** One raw request on `socket` (already connected, or a tunnel), its whole answer. */
  function exchange(socket: net.Socket, request: string): Promise<string> {
    return new Promise((resolve) => {
      let text = "";
      socket.on("data", (d: Buffer) => {
        text += d.toString("latin1");
        const end = text.indexOf("\r\n\r\n");
        const length = /content-length: (\d+)/i.exec(text.slice(0, end));
        if (end >= 0 && (length === null || text.length >= end + 4 + Number(length[1]))) resolve(text);
      });
      socket.on("end", () => resolve(text));
      socket.write(request);
    });
  }

  it("answers GET /multienv/ca.pem asked of the proxy itself with the CA certificate, and nothing but GET or HEAD", async () => {
    const pem = fs.readFileSync(proxy.caCertPath, "latin1");
    const direct = net.connect(proxy.port, "127.0.0.1");
    const got = await exchange(direct, "GET /multienv/ca.pem HTTP/1.1\r\nHost: site-proxy\r\n\r\n");
    direct.destroy();
    expect(got.split("\r\n")[0]).toBe("HTTP/1.1 200 OK");
    expect(got.slice(got.indexOf("\r\n\r\n") + 4)).toBe(pem);
    expect(pem).not.toContain("PRIVATE KEY");
    const post = net.connect(proxy.port, "127.0.0.1");
    const posted = await exchange(
      post,
      "POST /multienv/ca.pem HTTP/1.1\r\nHost: site-proxy\r\nContent-Length: 0\r\n\r\n",
    );
    post.destroy();
    expect(posted.split("\r\n")[0]).toMatch(/^HTTP\/1\.1 400 /);
  });

  it("sends that path inside a tunnel to a synthetic name on to the site, not to the proxy's own answer", async () => {
    const { socket, status } = await connectThrough(proxy.port, "shop.test:80");
    expect(status).toBe(200);
    const got = await exchange(socket, "GET /multienv/ca.pem HTTP/1.1\r\nHost: shop.test\r\n\r\n");
    socket.destroy();
    expect(got).toContain("the shop at /website/shop/multienv/ca.pem");
    expect(lastGatewayRequest().url).toBe("/website/shop/multienv/ca.pem");
  });
});
