// What the gateway refuses from a client before anything reaches a site (RFC 9112 framing, one
// Host), what it sends on for what it accepts (every body framed again), and the log line each
// refusal leaves. Raw sockets, since a client library would never send most of these bytes.
import net from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { echoHandler, headerValues, startUpstream, type Echo, type Upstream } from "../helpers/servers";
import { CONTROL_LINE, startGateway, type GatewayProcess } from "./helpers";

/** Sends `bytes` on one connection; resolves with everything answered until the gateway closes it. */
function exchange(port: number, bytes: string, timeoutMs = 3_000): Promise<string> {
  return new Promise((resolve) => {
    const socket = net.connect(port, "127.0.0.1");
    let text = "";
    socket.setTimeout(timeoutMs, () => {
      socket.destroy();
      resolve(`${text}<timeout>`);
    });
    socket.on("data", (chunk) => (text += chunk.toString("latin1")));
    socket.on("close", () => resolve(text));
    socket.on("error", () => undefined);
    socket.write(bytes, "latin1");
  });
}

const body = (text: string) => JSON.parse(text.slice(text.indexOf("\r\n\r\n") + 4)) as Echo;

/** Requests the gateway must refuse, with the status it answers; none may reach the site. */
const REFUSED: Array<[string, number, string]> = [
  [
    "Transfer-Encoding and Content-Length",
    400,
    `POST /svc/shop/a HTTP/1.1\r\nHost: gw\r\n${CONTROL_LINE}Transfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n0\r\n\r\n`,
  ],
  [
    "Content-Length and Transfer-Encoding",
    400,
    `POST /svc/shop/a HTTP/1.1\r\nHost: gw\r\n${CONTROL_LINE}Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n`,
  ],
  [
    "a last coding other than chunked",
    400,
    `POST /svc/shop/a HTTP/1.1\r\nHost: gw\r\n${CONTROL_LINE}Transfer-Encoding: gzip\r\n\r\nabcd`,
  ],
  [
    "chunked twice",
    400,
    `POST /svc/shop/a HTTP/1.1\r\nHost: gw\r\n${CONTROL_LINE}Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n`,
  ],
  [
    "a coding the gateway would drop (gzip, chunked)",
    501,
    `POST /svc/shop/a HTTP/1.1\r\nHost: gw\r\n${CONTROL_LINE}Transfer-Encoding: gzip, chunked\r\n\r\n4\r\nabcd\r\n0\r\n\r\n`,
  ],
  [
    "Transfer-Encoding in HTTP/1.0",
    400,
    `POST /svc/shop/a HTTP/1.0\r\nHost: gw\r\n${CONTROL_LINE}Transfer-Encoding: chunked\r\n\r\n4\r\nabcd\r\n0\r\n\r\n`,
  ],
  [
    "a repeated Content-Length",
    400,
    `POST /svc/shop/a HTTP/1.1\r\nHost: gw\r\n${CONTROL_LINE}Content-Length: 4\r\nContent-Length: 4\r\n\r\nabcd`,
  ],
  [
    "a Content-Length list",
    400,
    `POST /svc/shop/a HTTP/1.1\r\nHost: gw\r\n${CONTROL_LINE}Content-Length: 4, 4\r\n\r\nabcd`,
  ],
  [
    "a signed Content-Length",
    400,
    `POST /svc/shop/a HTTP/1.1\r\nHost: gw\r\n${CONTROL_LINE}Content-Length: +4\r\n\r\nabcd`,
  ],
  ["obs-fold", 400, `GET /svc/shop/a HTTP/1.1\r\nHost: gw\r\n${CONTROL_LINE}X-A: b\r\n c\r\n\r\n`],
  ["a bare LF after the request line", 400, `GET /svc/shop/a HTTP/1.1\nHost: gw\r\n${CONTROL_LINE}\r\n`],
  ["a bare LF after a header", 400, "GET /svc/shop/a HTTP/1.1\r\nHost: gw\nX-A: b\r\n\r\n"],
  ["a bare LF ending the head", 400, `GET /svc/shop/a HTTP/1.1\r\nHost: gw\r\n${CONTROL_LINE}\n`],
  ["a bare CR", 400, "GET /svc/shop/a HTTP/1.1\r\nHost: gw\rX-A: b\r\n\r\n"],
  [
    "a space before a header's colon",
    400,
    `POST /svc/shop/a HTTP/1.1\r\nHost: gw\r\n${CONTROL_LINE}Content-Length : 4\r\n\r\nabcd`,
  ],
  [
    "two Host headers",
    400,
    `GET /svc/shop/a HTTP/1.1\r\nHost: shop.test\r\n${CONTROL_LINE}Host: other.test\r\n${CONTROL_LINE}\r\n`,
  ],
  ["a malformed Host", 400, `GET /svc/shop/a HTTP/1.1\r\nHost: shop.test/evil\r\n${CONTROL_LINE}\r\n`],
  ["no Host in HTTP/1.1", 400, "GET /svc/shop/a HTTP/1.1\r\n\r\n"],
  [
    "a body on an upgrade",
    400,
    `GET /svc/shop/ws HTTP/1.1\r\nHost: gw\r\n${CONTROL_LINE}Connection: Upgrade\r\nUpgrade: websocket\r\nContent-Length: 4\r\n\r\nabcd`,
  ],
];

describe("gateway request framing", () => {
  let gateway: GatewayProcess;
  let site: Upstream;
  const seen: string[] = [];

  beforeAll(async () => {
    site = await startUpstream(echoHandler("site", (req) => seen.push(`${req.method} ${req.url}`)));
    gateway = await startGateway({ sites: { shop: { server: site.url } } });
  });
  afterAll(async () => {
    await gateway?.stop();
    await site?.close();
  });

  it.each(REFUSED)(
    "refuses %s (%i), closes the connection, contacts no site, and logs it",
    async (_what, status, bytes) => {
      const before = seen.length;
      const logged = gateway.logs.length;
      // A second request on the same connection must not be served: the framing of the first is not to be trusted.
      const text = await exchange(
        gateway.port,
        `${bytes}GET /svc/shop/after HTTP/1.1\r\nHost: gw\r\n${CONTROL_LINE}\r\n`,
      );
      expect(text.split("\r\n")[0]).toMatch(new RegExp(`^HTTP/1.1 ${status} `));
      expect(text).not.toContain("<timeout>");
      expect(text.match(/HTTP\/1\.1 \d{3}/g)).toHaveLength(1);
      expect(seen.slice(before)).toEqual([]);
      const line = await gateway.waitForLog(
        (entry, i = gateway.logs.indexOf(entry)) => i >= logged && entry.event === "request-refused",
      );
      expect(line).toMatchObject({ listener: "published", status });
      expect(String(line.reason)).not.toBe("");
      if (bytes.startsWith("POST /svc/shop/a ") || bytes.startsWith("GET /svc/shop/a "))
        expect(line.target).toBe("/svc/shop/a");
    },
  );

  it("frames every body again: the client's Content-Length as read, whatever the method", async () => {
    for (const method of ["GET", "HEAD", "DELETE", "OPTIONS", "POST"]) {
      const text = await exchange(
        gateway.port,
        `${method} /svc/shop/m HTTP/1.1\r\nHost: gw\r\n${CONTROL_LINE}Connection: close, Content-Length\r\nContent-Length: 4\r\n\r\nabcd`,
      );
      if (method === "HEAD") {
        expect(text.split("\r\n")[0]).toBe("HTTP/1.1 200 OK");
        continue;
      }
      const echo = body(text);
      expect(echo.method).toBe(method);
      expect(echo.body).toBe("abcd");
      expect(headerValues(echo.rawHeaders, "content-length"), method).toEqual(["4"]);
    }
  });

  it("frames a chunked body again (chunked, or its exact length once all of it is in), extensions and trailers left on their hop", async () => {
    const text = await exchange(
      gateway.port,
      `PUT /svc/shop/c HTTP/1.1\r\nHost: gw\r\n${CONTROL_LINE}Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n2;ext=1\r\nab\r\n2\r\ncd\r\n0\r\nX-Trailer: t\r\n\r\n`,
    );
    const echo = body(text);
    expect(echo.body).toBe("abcd");
    const framing = [
      ...headerValues(echo.rawHeaders, "transfer-encoding"),
      ...headerValues(echo.rawHeaders, "content-length"),
    ];
    expect(["chunked", "4"]).toContain(framing.join());
    expect(headerValues(echo.rawHeaders, "x-trailer")).toEqual([]);
  });

  it("answers Expect: 100-continue itself and sends the body on without Expect", async () => {
    const text = await exchange(
      gateway.port,
      `POST /svc/shop/e HTTP/1.1\r\nHost: gw\r\n${CONTROL_LINE}Expect: 100-continue\r\nContent-Length: 4\r\nConnection: close\r\n\r\nabcd`,
    );
    expect(text.startsWith("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK")).toBe(true);
    const echo = body(text.slice(text.indexOf("\r\n\r\n") + 4));
    expect(echo.body).toBe("abcd");
    expect(headerValues(echo.rawHeaders, "expect")).toEqual([]);
  });

  it("logs every request it answers itself with an error: method, target, listener and reason", async () => {
    await exchange(
      gateway.port,
      `DELETE /svc/nope/x?q=1 HTTP/1.1\r\nHost: gw\r\n${CONTROL_LINE}Connection: close\r\n\r\n`,
    );
    await exchange(
      gateway.port,
      `GET /traffic/v1/captures HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer wrong\r\nConnection: close\r\n\r\n`,
    );
    await exchange(gateway.port, "PUT /healthz HTTP/1.1\r\nHost: gw\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    await exchange(gateway.port, `GET /svc%2Fshop/x HTTP/1.1\r\nHost: gw\r\n${CONTROL_LINE}Connection: close\r\n\r\n`);
    const refused = (target: string) =>
      gateway.waitForLog((entry) => entry.event === "request-refused" && entry.target === target);
    expect(await refused("/svc/nope/x?q=1")).toMatchObject({
      listener: "published",
      status: 404,
      method: "DELETE",
      reason: "unknown site",
      remote: "127.0.0.1",
    });
    expect(await refused("/traffic/v1/captures")).toMatchObject({
      status: 401,
      method: "GET",
      reason: "control token required",
    });
    expect(await refused("/healthz")).toMatchObject({ status: 405, method: "PUT", reason: "method not allowed" });
    expect(await refused("/svc%2Fshop/x")).toMatchObject({ status: 400, reason: "escaped slash in the route prefix" });
    // The token offered is never logged.
    expect(JSON.stringify(gateway.logs)).not.toContain("Bearer wrong");
  });
});
