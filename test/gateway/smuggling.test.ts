// Attacks on the gateway's HTTP hop: a hostile site server desynchronising a client's kept-alive
// connection, and a client smuggling a second request past the gateway to a site's server.
// Raw sockets on both sides, so no client or server library normalises the bytes.
import net, { type AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startGateway, type GatewayProcess, CONTROL_LINE } from "./helpers";

interface RawServer {
  port: number;
  /** Every request head received, in order, with its connection's number. */
  heads: Array<{ connection: number; head: string }>;
  /** Every byte received, per connection. */
  received: Map<number, string>;
  connections(): number;
  close(): void;
}

/** The length of the chunked body at the start of `text`, or undefined while it is incomplete. */
function chunkedLength(text: string): number | undefined {
  let at = 0;
  for (;;) {
    const lineEnd = text.indexOf("\r\n", at);
    if (lineEnd === -1) return undefined;
    const size = parseInt(text.slice(at, lineEnd), 16);
    at = lineEnd + 2;
    if (size === 0) {
      const end = text.indexOf("\r\n\r\n", at - 2);
      return end === -1 ? undefined : end + 4;
    }
    at += size + 2;
    if (at > text.length) return undefined;
  }
}

/**
 * A server that answers each request head it reads with `answer(head, connection)`; bodies are not parsed, so smuggled
 * requests show as heads.
 */
function startRawServer(
  answer: (head: string, connection: number, requestsOnConnection: number) => string | undefined,
): Promise<RawServer> {
  let connections = 0;
  const heads: RawServer["heads"] = [];
  const received = new Map<number, string>();
  const server = net.createServer((socket) => {
    const connection = ++connections;
    let buffered = "";
    let requests = 0;
    socket.on("data", (chunk) => {
      received.set(connection, (received.get(connection) ?? "") + chunk.toString("latin1"));
      buffered += chunk.toString("latin1");
      let end;
      while ((end = buffered.indexOf("\r\n\r\n")) !== -1) {
        const head = buffered.slice(0, end);
        // Skip a declared body, so only heads the server would really parse count as requests.
        let bodyLength = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? 0);
        if (/\r\ntransfer-encoding: *chunked/i.test(head)) {
          const length = chunkedLength(buffered.slice(end + 4));
          if (length === undefined) break; // the rest of the body is still to come
          bodyLength = length;
        }
        if (buffered.length < end + 4 + bodyLength) break;
        buffered = buffered.slice(end + 4 + bodyLength);
        heads.push({ connection, head });
        const reply = answer(head, connection, ++requests);
        if (reply === "<reset>") socket.resetAndDestroy();
        else if (reply !== undefined) socket.write(reply, "latin1");
      }
    });
    socket.on("error", () => undefined);
  });
  return new Promise((resolve) =>
    server.listen(0, "127.0.0.1", () =>
      resolve({
        port: (server.address() as AddressInfo).port,
        heads,
        received,
        connections: () => connections,
        close: () => server.close(),
      }),
    ),
  );
}

/** Writes `bytes` on one client connection and collects what comes back until `until` matches or the socket closes. */
function clientExchange(
  port: number,
  bytes: string,
  until: (text: string) => boolean,
  timeoutMs = 4_000,
): Promise<string> {
  return new Promise((resolve) => {
    const socket = net.connect(port, "127.0.0.1");
    let text = "";
    const done = () => {
      socket.destroy();
      resolve(text);
    };
    socket.setTimeout(timeoutMs, done);
    socket.on("data", (chunk) => {
      text += chunk.toString("latin1");
      if (until(text)) done();
    });
    socket.on("close", done);
    socket.on("error", done);
    socket.write(bytes, "latin1");
  });
}

const ok = (body: string) =>
  `HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: ${body.length}\r\n\r\n${body}`;

describe("gateway against request smuggling and response desync", () => {
  let gateway: GatewayProcess;
  let evil: RawServer;
  let shop: RawServer;
  let resetting: RawServer;

  beforeAll(async () => {
    // The forged answer a hostile site hides in its body, hoping it becomes the answer to the client's next request.
    const forged = "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nforged";
    evil = await startRawServer((head) => {
      const path = head.split(" ")[1];
      if (path === "/te-and-cl") {
        const chunk = `hello${forged}`;
        return `HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n${chunk.length.toString(16)}\r\n${chunk}\r\n0\r\n\r\n`;
      }
      return ok("evil");
    });
    shop = await startRawServer((head) => ok(`shop saw ${head.split(" ")[1]}`));
    resetting = await startRawServer((_head, _connection, n) => (n === 1 ? ok("first") : "<reset>"));
    gateway = await startGateway({
      sites: {
        evil: { server: `http://127.0.0.1:${evil.port}` },
        shop: { server: `http://127.0.0.1:${shop.port}` },
        resetting: { server: `http://127.0.0.1:${resetting.port}` },
      },
    });
  });
  afterAll(async () => {
    await gateway?.stop();
    for (const server of [evil, shop, resetting]) server?.close();
  });

  it("never lets a site's answer with both Transfer-Encoding and Content-Length become the next answer on the client's connection", async () => {
    const text = await clientExchange(
      gateway.port,
      `GET /svc/evil/te-and-cl HTTP/1.1\r\nHost: gw\r\n${CONTROL_LINE}\r\nGET /svc/shop/next HTTP/1.1\r\nHost: gw\r\n${CONTROL_LINE}Connection: close\r\n\r\n`,
      (t) => t.includes("shop saw") || t.includes("forged"),
    );
    expect(text).not.toContain("forged");
    expect(text.split("\r\n")[0]).toBe("HTTP/1.1 502 Bad Gateway");
    expect(text).toContain("shop saw /next");
    const line = await gateway.waitForLog(
      (entry) => entry.site === "evil" && String(entry.detail ?? entry.reason ?? "").includes("Transfer-Encoding"),
    );
    expect(line.path).toBe("/te-and-cl");
  });

  it("never forwards a body unframed when the client's Connection header nominates Content-Length", async () => {
    const smuggled = "GET /smuggled HTTP/1.1\r\nHost: shop\r\n\r\n";
    const before = shop.heads.length;
    const text = await clientExchange(
      gateway.port,
      `POST /svc/shop/form HTTP/1.1\r\nHost: gw\r\n${CONTROL_LINE}Connection: Content-Length\r\nContent-Length: ${smuggled.length}\r\n\r\n${smuggled}`,
      (t) => t.includes("shop saw"),
    );
    await new Promise((resolve) => setTimeout(resolve, 200));
    const heads = shop.heads.slice(before).map((h) => h.head.split("\r\n")[0]);
    expect(heads).toEqual(["POST /form HTTP/1.1"]);
    const received = shop.heads.slice(before)[0];
    expect(received.head).toMatch(new RegExp(`\\r\\ncontent-length: ${smuggled.length}(\\r\\n|$)`, "i"));
    expect(text).toContain("shop saw /form");
  });

  it.each(["GET", "HEAD", "DELETE", "OPTIONS"])(
    "re-frames a chunked body on %s, so its bytes never reach the site as a second request",
    async (method) => {
      const smuggled = "GET /smuggled HTTP/1.1\r\nHost: shop\r\n\r\n";
      const before = shop.heads.length;
      await clientExchange(
        gateway.port,
        `${method} /svc/shop/with-body HTTP/1.1\r\nHost: gw\r\n${CONTROL_LINE}Connection: Transfer-Encoding\r\nTransfer-Encoding: chunked\r\n\r\n${smuggled.length.toString(16)}\r\n${smuggled}\r\n0\r\n\r\n`,
        (t) => t.includes("\r\n\r\n"),
      );
      await new Promise((resolve) => setTimeout(resolve, 200));
      const heads = shop.heads.slice(before);
      expect(heads.map((h) => h.head.split("\r\n")[0])).toEqual([`${method} /with-body HTTP/1.1`]);
      expect(heads[0].head).toMatch(/\r\n(transfer-encoding: chunked|content-length: \d+)(\r\n|$)/i);
    },
  );

  it("ends the exchange when a client's chunked body turns malformed midway, so nothing after it reaches the site", async () => {
    const smuggled = "GET /smuggled-after-bad-chunk HTTP/1.1\r\nHost: shop\r\n\r\n";
    const text = await clientExchange(
      gateway.port,
      `POST /svc/shop/upload HTTP/1.1\r\nHost: gw\r\n${CONTROL_LINE}Transfer-Encoding: chunked\r\n\r\n4\r\nabcd\r\nzz\r\n${smuggled}`,
      () => false,
      1_500,
    );
    expect(text).not.toContain("shop saw /smuggled");
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(shop.heads.map((h) => h.head)).not.toContainEqual(expect.stringContaining("/smuggled-after-bad-chunk"));
    expect([...shop.received.values()].join("")).not.toMatch(/\r\n\r\nGET \/smuggled-after-bad-chunk/);
    await gateway.waitForLog(
      (entry) => entry.event === "request-refused" && String(entry.reason).startsWith("HPE_INVALID_CHUNK_SIZE"),
    );
  });

  it("never drops Host because the client's Connection header nominates it", async () => {
    const before = shop.heads.length;
    await clientExchange(
      gateway.port,
      `GET /svc/shop/host HTTP/1.1\r\nHost: shop.test\r\n${CONTROL_LINE}Connection: Host, close\r\n\r\n`,
      (t) => t.includes("shop saw"),
    );
    const head = shop.heads.slice(before)[0].head;
    expect(head).toMatch(/\r\nhost: shop\.test(\r\n|$)/i);
  });

  it("never sends a non-idempotent request again on a fresh connection", async () => {
    const first = await clientExchange(
      gateway.port,
      `POST /svc/resetting/a HTTP/1.1\r\nHost: gw\r\n${CONTROL_LINE}Content-Length: 0\r\nConnection: close\r\n\r\n`,
      () => false,
    );
    expect(first).toContain("first");
    const connections = resetting.connections();
    const second = await clientExchange(
      gateway.port,
      `POST /svc/resetting/b HTTP/1.1\r\nHost: gw\r\n${CONTROL_LINE}Content-Length: 0\r\nConnection: close\r\n\r\n`,
      () => false,
    );
    expect(second.split("\r\n")[0]).toBe("HTTP/1.1 502 Bad Gateway");
    expect(resetting.connections()).toBe(connections);
    expect(resetting.heads.filter((h) => h.head.startsWith("POST /b ")).length).toBe(1);
  });
});
