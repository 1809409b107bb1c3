// Servers on loopback a test talks to or through (HTTP origins that record what they got, an echo, a DNS server, a
// TLS origin, an address where connections hang), and the clients that send exact bytes or one plain request.
import { execFileSync, spawn } from "node:child_process";
import * as dgram from "node:dgram";
import * as fs from "node:fs";
import * as http from "node:http";
import * as https from "node:https";
import * as net from "node:net";
import * as path from "node:path";
import { onCleanup, tempDir } from "./processes";

/**
 * Listens on a free loopback port and closes the server, with every connection it still holds, at cleanup; resolves
 * with the port.
 */
export async function listenOnLoopback(server: http.Server): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  onCleanup(
    () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(resolve);
      }),
  );
  return (server.address() as net.AddressInfo).port;
}

// A DNS server on loopback answering A queries from a table; any other name is NXDOMAIN.

export interface TestDns {
  server: string; // host:port for dnsServers
  queries: string[];
}

function readName(message: Buffer, offset: number): { name: string; end: number } {
  const labels: string[] = [];
  while (message[offset] !== 0) {
    const length = message[offset];
    labels.push(message.subarray(offset + 1, offset + 1 + length).toString("ascii"));
    offset += 1 + length;
  }
  return { name: labels.join(".").toLowerCase(), end: offset + 1 };
}

export async function startDns(answers: Record<string, string[]>): Promise<TestDns> {
  const socket = dgram.createSocket("udp4");
  const queries: string[] = [];
  socket.on("message", (query, peer) => {
    const { name, end } = readName(query, 12);
    const type = query.readUInt16BE(end);
    queries.push(name);
    const known = answers[name];
    const records = known && type === 1 ? known : [];
    const header = Buffer.alloc(12);
    query.copy(header, 0, 0, 2); // id
    header.writeUInt16BE(0x8180 | (known ? 0 : 3), 2); // response, recursion available, NOERROR or NXDOMAIN
    header.writeUInt16BE(1, 4);
    header.writeUInt16BE(records.length, 6);
    const question = query.subarray(12, end + 4);
    const answerRecords = records.map((address) => {
      const record = Buffer.alloc(16);
      record.writeUInt16BE(0xc00c, 0); // the name, by pointer to the question
      record.writeUInt16BE(1, 2); // A
      record.writeUInt16BE(1, 4); // IN
      record.writeUInt32BE(60, 6);
      record.writeUInt16BE(4, 10);
      address.split(".").forEach((octet, i) => record.writeUInt8(Number(octet), 12 + i));
      return record;
    });
    socket.send(Buffer.concat([header, question, ...answerRecords]), peer.port, peer.address);
  });
  await new Promise<void>((resolve) => socket.bind(0, "127.0.0.1", resolve));
  onCleanup(() => socket.close());
  return { server: `127.0.0.1:${socket.address().port}`, queries };
}

// Servers on loopback.

export interface RecordedRequest {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  rawHeaders: string[];
  /** Which connection (by order of arrival) carried the request. */
  connection: number;
}

export interface TestHttpServer {
  port: number;
  url: string;
  requests: RecordedRequest[];
  connections: number;
  server: http.Server;
}

/** An HTTP server that records each request and answers `body(req)` as text/html. */
export async function startHttpServer(
  body: (req: http.IncomingMessage, res: http.ServerResponse) => string = (req) =>
    `<html><body>hello from ${req.url}</body></html>`,
  host = "127.0.0.1",
  port = 0,
): Promise<TestHttpServer> {
  const state: TestHttpServer = {
    port: 0,
    url: "",
    requests: [],
    connections: 0,
    server: undefined as unknown as http.Server,
  };
  const ids = new WeakMap<net.Socket, number>();
  const server = http.createServer((req, res) => {
    state.requests.push({
      method: req.method!,
      url: req.url!,
      headers: req.headers,
      rawHeaders: req.rawHeaders,
      connection: ids.get(req.socket)!,
    });
    req.resume();
    req.on("end", () => {
      const text = body(req, res);
      if (!res.headersSent) res.writeHead(200, { "Content-Type": "text/html; charset=utf-8", "X-Origin": "test" });
      res.end(text);
    });
  });
  server.on("connection", (socket) => ids.set(socket, ++state.connections));
  await new Promise<void>((resolve, reject) => server.once("error", reject).listen(port, host, resolve));
  state.port = (server.address() as net.AddressInfo).port;
  state.url = `http://${host}:${state.port}`;
  state.server = server;
  onCleanup(
    () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(resolve);
      }),
  );
  return state;
}

/** A TCP server that echoes every byte back. */
export async function startEchoServer(
  host = "127.0.0.1",
): Promise<{ port: number; server: net.Server; sockets: Set<net.Socket> }> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
    socket.on("error", () => socket.destroy());
    socket.pipe(socket);
  });
  await new Promise<void>((resolve) => server.listen({ port: 0, host, backlog: 4096 }, resolve));
  onCleanup(
    () =>
      new Promise((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve(undefined));
      }),
  );
  return { port: (server.address() as net.AddressInfo).port, server, sockets };
}

/**
 * A loopback address and port where connection attempts hang: a listener whose accept queue is full and never drained.
 */
export async function startHangingAddress(host = "127.0.0.3"): Promise<{ host: string; port: number }> {
  const child = spawn(
    "python3",
    [
      "-c",
      `
import socket, sys, time
s = socket.socket(); s.bind((${JSON.stringify(host)}, 0)); s.listen(0)
port = s.getsockname()[1]
fill = []
for _ in range(4):
    c = socket.socket(); c.setblocking(False)
    try: c.connect((${JSON.stringify(host)}, port))
    except BlockingIOError: pass
    fill.append(c)
time.sleep(0.2)
print(port, flush=True)
time.sleep(3600)
`,
    ],
    { stdio: ["ignore", "pipe", "inherit"] },
  );
  onCleanup(() => child.kill("SIGKILL"));
  const port = await new Promise<number>((resolve, reject) => {
    child.stdout.once("data", (data: Buffer) => resolve(Number(data.toString().trim())));
    child.once("exit", () => reject(new Error("the hanging listener exited")));
  });
  return { host, port };
}

export interface Upstream {
  server: http.Server;
  url: string;
  port: number;
  close(): Promise<void>;
}

export function startUpstream(handler: http.RequestListener): Promise<Upstream> {
  const server = http.createServer(handler);
  return new Promise((resolve) => {
    server.listen(0, "127.0.0.1", () => {
      const port = (server.address() as net.AddressInfo).port;
      resolve({
        server,
        port,
        url: `http://127.0.0.1:${port}`,
        close: () =>
          new Promise((done) => {
            server.close(() => done());
            server.closeAllConnections();
          }),
      });
    });
  });
}

/** Sends `request` bytes as they are and resolves with everything the server answered until it closed. */
export function rawExchange(
  port: number,
  request: string | Buffer,
  timeoutMs = 5_000,
  host = "127.0.0.1",
): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, host);
    const chunks: Buffer[] = [];
    socket.setTimeout(timeoutMs, () => socket.destroy(new Error("raw exchange timed out")));
    socket.on("data", (chunk) => chunks.push(chunk));
    socket.on("end", () => resolve(Buffer.concat(chunks)));
    socket.on("error", reject);
    socket.write(typeof request === "string" ? Buffer.from(request, "latin1") : request);
  });
}

export interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  rawHeaders: string[];
  body: string;
}

/** One request through node's http client; `headers` may be a raw array to repeat names. */
export function request(
  url: string,
  options: { method?: string; headers?: Record<string, string> | string[]; body?: string | Buffer } = {},
): Promise<Answer> {
  let headers = options.headers;
  // node adds no Host header of its own to a raw header array.
  if (Array.isArray(headers) && !headers.some((h, i) => i % 2 === 0 && h.toLowerCase() === "host"))
    headers = [...headers, "Host", new URL(url).host];
  return new Promise((resolve, reject) => {
    const req = http.request(
      url,
      { method: options.method ?? "GET", headers: headers as http.OutgoingHttpHeaders, agent: false },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (chunk) => chunks.push(chunk));
        res.on("end", () =>
          resolve({
            status: res.statusCode!,
            headers: res.headers,
            rawHeaders: res.rawHeaders,
            body: Buffer.concat(chunks).toString("utf8"),
          }),
        );
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.end(options.body);
  });
}

/** A server that answers every request with what it received, as JSON; `onRequest` sees each one. */
export function echoHandler(
  tag = "upstream",
  onRequest: (req: http.IncomingMessage) => void = () => undefined,
): http.RequestListener {
  return (req, res) => {
    onRequest(req);
    const chunks: Buffer[] = [];
    req.on("data", (chunk) => chunks.push(chunk));
    req.on("end", () => {
      const body = JSON.stringify({
        method: req.method,
        url: req.url,
        rawHeaders: req.rawHeaders,
        body: Buffer.concat(chunks).toString("latin1"),
      });
      res.writeHead(200, {
        "Content-Type": "application/json",
        "Content-Length": Buffer.byteLength(body),
        "X-Upstream": tag,
      });
      res.end(req.method === "HEAD" ? undefined : body);
    });
  };
}

export interface Echo {
  method: string;
  url: string;
  rawHeaders: string[];
  body: string;
}

/** Values of header `name` (any case) in a raw header array. */
export function headerValues(raw: string[], name: string): string[] {
  const out: string[] = [];
  for (let i = 0; i < raw.length; i += 2) if (raw[i].toLowerCase() === name.toLowerCase()) out.push(raw[i + 1]);
  return out;
}

/**
 * An HTTPS server on loopback with a self-signed certificate for `name`. `/` answers a page whose script opens
 * `/hold`, a request the server never finishes: the page's connection stays open for as long as the browser lives.
 */
export async function startTlsOrigin(
  name: string,
  title: string,
): Promise<{ port: number; held(): number; openConnections(): Promise<number> }> {
  const dir = tempDir("runner-tls-");
  execFileSync(
    "openssl",
    [
      "req",
      "-x509",
      "-newkey",
      "rsa:2048",
      "-nodes",
      "-keyout",
      path.join(dir, "key.pem"),
      "-out",
      path.join(dir, "cert.pem"),
      "-days",
      "1",
      "-subj",
      `/CN=${name}`,
    ],
    { stdio: "ignore" },
  );
  let held = 0;
  const server = https.createServer(
    {
      key: fs.readFileSync(path.join(dir, "key.pem")),
      cert: fs.readFileSync(path.join(dir, "cert.pem")),
      keepAliveTimeout: 600_000,
    },
    (req, res) => {
      if (req.url === "/hold") {
        held += 1;
        res.writeHead(200, { "content-type": "text/event-stream" });
        res.write(": held\n\n");
        return;
      }
      res.writeHead(200, { "content-type": "text/html" });
      res.end(`<title>${title}</title><script>fetch("/hold")</script>`);
    },
  );
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
  onCleanup(
    () =>
      new Promise((done) => {
        server.closeAllConnections();
        server.close(() => done(undefined));
      }),
  );
  const openConnections = () =>
    new Promise<number>((done, fail) => server.getConnections((error, count) => (error ? fail(error) : done(count))));
  return { port: (server.address() as net.AddressInfo).port, held: () => held, openConnections };
}
