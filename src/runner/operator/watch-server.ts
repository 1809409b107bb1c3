// `multienv watch`'s local web page: every computer's screen, its URL and its proxy log's request and refusal lines,
// live. The machine may have other users, so the page listens on 127.0.0.1 alone and answers only under a path
// holding a secret made for this run (`http://127.0.0.1:<port>/<secret>/`); any other path, a wrong secret or none,
// gets 403, and so does a WebSocket from another origin. It is read-only: nothing a viewer sends reaches a computer.
//
// Where the pictures and lines come from is a Feed per computer (watch.ts: DevTools screencast frames and the proxy
// log, through the gateway). The feeds run only while someone watches: all start when the first viewer connects and
// stop when the last one leaves, so an idle `watch` costs the computers nothing.
import { randomBytes, timingSafeEqual } from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";
import type { Duplex } from "node:stream";
import { WebSocket, WebSocketServer } from "ws";
import { watchPage } from "./watch-page";

/** One line of a computer's proxy log as the page shows it. */
export interface WatchLogLine {
  time: string;
  event: "request" | "refused";
  method: string;
  host: string;
  port: number;
  /** A request's status. */
  status?: number;
  /** Why a host was refused. */
  why?: string;
}

/** What a feed reports. */
export type FeedEvent =
  | { type: "frame"; data: string }
  | { type: "url"; url: string; title?: string }
  | { type: "log"; lines: WatchLogLine[] }
  | { type: "error"; message: string };

/** The live source of one computer. start() is called when the first viewer connects, stop() when the last leaves. */
export interface Feed {
  start(emit: (event: FeedEvent) => void): Promise<void>;
  stop(): Promise<void>;
}

/** A message on the page's live channel: a feed's event, for one computer, or the greeting. */
export type WatchMessage = (FeedEvent & { computer: string }) | { type: "hello"; stack: string; computers: string[] };

export interface WatchServerOptions {
  stack: string;
  feeds: Record<string, Feed>;
  /** Default 0: a free port. */
  port?: number;
  /** Default: 32 random bytes, hex. */
  secret?: string;
}

export interface WatchServer {
  /** The page, secret included: `http://127.0.0.1:<port>/<secret>/`. */
  url: string;
  port: number;
  /** Viewers connected now. */
  viewers(): number;
  /** True while the feeds run. */
  feeding(): boolean;
  close(): Promise<void>;
}

/** Log lines a new viewer gets of what came before it, per computer. */
const BACKLOG_LINES = 200;
/** A viewer further behind than this gets no frame until it catches up (frames are many; it sees the next one). */
const MAX_BUFFERED_BYTES = 4 * 1024 * 1024;

function sameSecret(given: string, secret: string): boolean {
  const a = Buffer.from(given);
  const b = Buffer.from(secret);
  return a.length === b.length && timingSafeEqual(a, b);
}

/** The secret the path of a request carries (its first segment) and the rest of the path. */
function splitPath(url: string | undefined): { secret: string; rest: string } {
  const path = (url ?? "/").split("?")[0];
  const match = /^\/([^/]*)(.*)$/.exec(path);
  return { secret: match?.[1] ?? "", rest: match?.[2] ?? "" };
}

const SECURITY_HEADERS = {
  "Referrer-Policy": "no-referrer",
  "Cache-Control": "no-store",
  "X-Content-Type-Options": "nosniff",
  "X-Frame-Options": "DENY",
};

/** Starts the page on 127.0.0.1. */
export async function startWatchServer(options: WatchServerOptions): Promise<WatchServer> {
  const secret = options.secret ?? randomBytes(32).toString("hex");
  const computers = Object.keys(options.feeds);
  const viewers = new Set<WebSocket>();
  // What a viewer who connects now is shown at once: each computer's last frame, URL and recent log lines.
  const last: Record<string, { frame?: string; url?: WatchMessage; error?: WatchMessage; log: WatchLogLine[] }> =
    Object.fromEntries(computers.map((c) => [c, { log: [] }]));
  let feeding = false;
  let transition: Promise<void> = Promise.resolve();

  const broadcast = (message: WatchMessage) => {
    const text = JSON.stringify(message);
    for (const viewer of viewers) {
      if (viewer.readyState !== WebSocket.OPEN) continue;
      if (message.type === "frame" && viewer.bufferedAmount > MAX_BUFFERED_BYTES) continue;
      viewer.send(text);
    }
  };

  const emitFor = (computer: string) => (event: FeedEvent) => {
    // A feed stopping may still report its last event; nobody is there to see it.
    if (!feeding) return;
    const seen = last[computer];
    if (event.type === "frame") seen.frame = event.data;
    else if (event.type === "url") seen.url = { ...event, computer };
    else if (event.type === "error") seen.error = { ...event, computer };
    else seen.log = [...seen.log, ...event.lines].slice(-BACKLOG_LINES);
    broadcast({ ...event, computer });
  };

  // Starting and stopping follow the number of viewers, one transition at a time.
  const settle = () => {
    transition = transition.then(async () => {
      const wanted = viewers.size > 0;
      if (wanted === feeding) return;
      feeding = wanted;
      await Promise.all(
        computers.map(async (computer) => {
          const feed = options.feeds[computer];
          try {
            if (wanted) await feed.start(emitFor(computer));
            else await feed.stop();
          } catch (error) {
            const message = (error instanceof Error ? error.message : String(error)).split("\n")[0];
            if (wanted) emitFor(computer)({ type: "error", message });
          }
        }),
      );
      // Viewers may have come or gone meanwhile.
      settle();
    });
  };

  const server = http.createServer((req, res) => {
    const { secret: given, rest } = splitPath(req.url);
    if (!sameSecret(given, secret) || (rest !== "/" && rest !== "")) {
      res.writeHead(403, { "Content-Type": "text/plain; charset=utf-8", ...SECURITY_HEADERS });
      res.end("forbidden\n");
      return;
    }
    if (rest === "") {
      // The page's relative WebSocket URL needs the trailing slash.
      res.writeHead(308, { Location: `/${secret}/`, ...SECURITY_HEADERS });
      res.end();
      return;
    }
    if (req.method !== "GET" && req.method !== "HEAD") {
      res.writeHead(405, { Allow: "GET, HEAD", ...SECURITY_HEADERS });
      res.end();
      return;
    }
    const port = (server.address() as AddressInfo).port;
    res.writeHead(200, {
      "Content-Type": "text/html; charset=utf-8",
      "Content-Security-Policy": `default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src 'unsafe-inline'; connect-src ws://127.0.0.1:${port}`,
      ...SECURITY_HEADERS,
    });
    res.end(req.method === "HEAD" ? undefined : watchPage(options.stack, computers));
  });

  const live = new WebSocketServer({ noServer: true, maxPayload: 1024 });
  server.on("upgrade", (req: http.IncomingMessage, socket: Duplex, head: Buffer) => {
    const { secret: given, rest } = splitPath(req.url);
    const port = (server.address() as AddressInfo).port;
    const origin = req.headers.origin;
    // A browser always sends Origin: a page of another site (or another port) holding the URL is refused too.
    const originOk = origin === undefined || origin === `http://127.0.0.1:${port}`;
    if (!sameSecret(given, secret) || rest !== "/live" || !originOk) {
      socket.end("HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
      return;
    }
    live.handleUpgrade(req, socket, head, (viewer) => {
      viewers.add(viewer);
      viewer.send(JSON.stringify({ type: "hello", stack: options.stack, computers } satisfies WatchMessage));
      for (const computer of computers) {
        const seen = last[computer];
        if (seen.url) viewer.send(JSON.stringify(seen.url));
        if (seen.error) viewer.send(JSON.stringify(seen.error));
        if (seen.frame) viewer.send(JSON.stringify({ type: "frame", computer, data: seen.frame }));
        if (seen.log.length > 0) viewer.send(JSON.stringify({ type: "log", computer, lines: seen.log }));
      }
      // Read-only: whatever a viewer sends is dropped.
      viewer.on("message", () => undefined);
      viewer.on("error", () => undefined);
      viewer.on("close", () => {
        viewers.delete(viewer);
        settle();
      });
      settle();
    });
  });

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, "127.0.0.1", () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}/${secret}/`,
    port,
    viewers: () => viewers.size,
    feeding: () => feeding,
    async close() {
      for (const viewer of viewers) viewer.terminate();
      viewers.clear();
      settle();
      await transition;
      live.close();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
