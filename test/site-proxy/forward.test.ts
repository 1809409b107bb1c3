// docs/design.md "Site proxy": CONNECT to a host that is not synthetic is a byte tunnel, never decrypted; an
// absolute-form request is sent on in origin form with hop-by-hop headers dropped; keep-alive works between requests.
import { execFileSync } from "node:child_process";
import * as crypto from "node:crypto";
import * as fs from "node:fs";
import * as net from "node:net";
import * as path from "node:path";
import * as tls from "node:tls";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cleanup, tempDir } from "../helpers/processes";
import { connectThrough, curl, type ProxyProcess, startProxy } from "./helpers";
import { startDns, startEchoServer, startHttpServer, type TestHttpServer } from "../helpers/servers";

let origin: TestHttpServer;
let proxy: ProxyProcess;

beforeAll(async () => {
  origin = await startHttpServer((req, res) => {
    // A hop-by-hop header of the origin's own, which the proxy must not pass back.
    res.writeHead(200, { Connection: "keep-alive, X-Origin-Hop", "X-Origin-Hop": "1", "X-End-To-End": "kept" });
    return `origin ${req.url}`;
  });
  const dns = await startDns({ "origin.test": ["127.0.0.1"], "tls.test": ["127.0.0.1"], "echo.test": ["127.0.0.1"] });
  proxy = await startProxy({ reach: ["origin.test", "tls.test", "echo.test"], dnsServers: [dns.server] });
});
afterAll(cleanup);

describe("forwarding", () => {
  it("sends an absolute-form request on in origin form, hop-by-hop headers dropped and repeated headers kept", async () => {
    const result = await curl(proxy.url, `http://origin.test:${origin.port}/path/a%2Fb?q=1`, [
      "-H",
      "Connection: keep-alive, X-Drop-Me",
      "-H",
      "X-Drop-Me: secret",
      "-H",
      "Keep-Alive: timeout=5",
      "-H",
      "TE: trailers",
      "-H",
      "Proxy-Authorization: Basic Zm9vOmJhcg==",
      "-H",
      "X-Keep: a",
      "-H",
      "X-Keep: b",
    ]);
    expect(result.status).toBe(200);
    const seen = origin.requests[origin.requests.length - 1];
    expect(seen.url).toBe("/path/a%2Fb?q=1");
    expect(seen.headers.host).toBe(`origin.test:${origin.port}`);
    const names = seen.rawHeaders.filter((_, i) => i % 2 === 0).map((n) => n.toLowerCase());
    for (const dropped of ["x-drop-me", "keep-alive", "te", "proxy-authorization", "proxy-connection"])
      expect(names).not.toContain(dropped);
    expect(seen.rawHeaders.filter((_, i) => i % 2 === 1 && seen.rawHeaders[i - 1] === "X-Keep")).toEqual(["a", "b"]);
    expect(result.headers["x-end-to-end"]).toBe("kept");
    expect(result.headers["x-origin-hop"]).toBeUndefined();
  });

  it("keeps the connection alive between requests, to the client and to the host", async () => {
    const before = origin.connections;
    const result = await curl(proxy.url, `http://origin.test:${origin.port}/first`, [
      "-v",
      `http://origin.test:${origin.port}/second`,
      "-o",
      "/dev/null",
    ]);
    expect(result.exitCode).toBe(0);
    expect(result.stderr).toMatch(/Re-using existing connection/);
    const [first, second] = origin.requests.slice(-2);
    expect([first.url, second.url].sort()).toEqual(["/first", "/second"]);
    expect(second.connection).toBe(first.connection);
    expect(origin.connections - before).toBeLessThanOrEqual(1);
  });

  it("sends a bodyless request again on a new connection when the host closed the kept-alive one as it arrived", async () => {
    // Answers the first request of each connection, and drops the connection at the second: what a host that
    // closes idle connections looks like when the close crosses the next request.
    let connections = 0;
    const server = net.createServer((socket) => {
      connections++;
      let requests = 0;
      socket.on("data", (d: Buffer) => {
        if (!d.includes("\r\n\r\n")) return;
        if (++requests === 1)
          socket.write("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: keep-alive\r\n\r\nfresh");
        else socket.destroy();
      });
      socket.on("error", () => {});
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const port = (server.address() as net.AddressInfo).port;
    try {
      const first = await curl(proxy.url, `http://origin.test:${port}/one`);
      const second = await curl(proxy.url, `http://origin.test:${port}/two`);
      expect([first.status, first.body]).toEqual([200, "fresh"]);
      expect([second.status, second.body]).toEqual([200, "fresh"]);
      expect(connections).toBe(2);
    } finally {
      server.close();
    }
  });

  it("tunnels CONNECT byte for byte", async () => {
    const echo = await startEchoServer();
    const { socket, status } = await connectThrough(proxy.port, `echo.test:${echo.port}`);
    expect(status).toBe(200);
    const sent = crypto.randomBytes(1 << 20);
    const received: Buffer[] = [];
    let length = 0;
    const done = new Promise<void>((resolve) =>
      socket.on("data", (d: Buffer) => {
        received.push(d);
        length += d.length;
        if (length >= sent.length) resolve();
      }),
    );
    socket.write(sent);
    await done;
    expect(Buffer.concat(received).equals(sent)).toBe(true);
    socket.destroy();
  });

  it("keeps a half-closed tunnel open the other way: the host still answers after the client finished sending", async () => {
    const server = net.createServer({ allowHalfOpen: true }, (s) => {
      let received = 0;
      s.on("data", (d: Buffer) => (received += d.length));
      s.on("end", () => setTimeout(() => s.end(`got ${received} bytes`), 100));
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    try {
      const { socket, status } = await connectThrough(
        proxy.port,
        `echo.test:${(server.address() as net.AddressInfo).port}`,
      );
      expect(status).toBe(200);
      socket.end(Buffer.alloc(300_000));
      const answer = await new Promise<string>((resolve) => {
        let text = "";
        socket.on("data", (d: Buffer) => (text += d.toString()));
        socket.on("end", () => resolve(text));
      });
      expect(answer).toBe("got 300000 bytes");
    } finally {
      server.close();
    }
  });

  it("never decrypts a tunnel: the client sees the host's own certificate", async () => {
    const dir = tempDir();
    const key = path.join(dir, "key.pem");
    const cert = path.join(dir, "cert.pem");
    execFileSync(
      "openssl",
      [
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
        "-subj",
        "/CN=tls.test",
        "-addext",
        "subjectAltName=DNS:tls.test",
        "-days",
        "1",
        "-keyout",
        key,
        "-out",
        cert,
      ],
      { stdio: "ignore" },
    );
    const server = tls.createServer({ key: fs.readFileSync(key), cert: fs.readFileSync(cert) }, (s) =>
      s.end("secret over TLS\n"),
    );
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const port = (server.address() as { port: number }).port;
    try {
      const { socket, status } = await connectThrough(proxy.port, `tls.test:${port}`);
      expect(status).toBe(200);
      const secure = tls.connect({ socket, servername: "tls.test", ca: fs.readFileSync(cert) });
      const text = await new Promise<string>((resolve, reject) => {
        let t = "";
        secure.on("data", (d: Buffer) => (t += d.toString()));
        secure.on("end", () => resolve(t));
        secure.on("error", reject);
      });
      expect(secure.authorized).toBe(true);
      expect(secure.getPeerCertificate().fingerprint256).toBe(
        new crypto.X509Certificate(fs.readFileSync(cert)).fingerprint256,
      );
      expect(text).toBe("secret over TLS\n");
    } finally {
      server.close();
    }
  });
});
