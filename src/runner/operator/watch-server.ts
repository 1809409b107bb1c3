// `multienv watch`'s local web page: every computer's screen, its URL and its proxy log's request and refusal lines,
// live. The machine may have other users, so the page listens on 127.0.0.1 alone and answers only under a path
// holding a secret made for this run (`http://127.0.0.1:<port>/<secret>/`); any other path, a wrong secret or none,
// gets 403, and so does a WebSocket from another origin. Without `takeover` it is read-only: nothing a viewer sends
// reaches a computer. With it, viewers may take computers over (watch-takeovers.ts); a computer this page took is
// handed back when the last viewer leaves and when the server closes.
//
// This module is the page's routes (the page, its live channel) and their composition: the frame feed is
// watch-feeds.ts (a Feed per computer, watch.ts, run while someone watches), the takeovers watch-takeovers.ts.
import { randomBytes, timingSafeEqual } from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";
import type { Duplex } from "node:stream";
import { WebSocketServer } from "ws";
import { LiveFeeds, type Feed, type WatchMessage } from "./watch-feeds";
import { PageTakeovers, type TakeoverControl } from "./watch-takeovers";
import { watchPage } from "./watch-page";

export type { Feed, FeedEvent, WatchLogLine, WatchMessage } from "./watch-feeds";

export interface WatchServerOptions {
  stack: string;
  feeds: Record<string, Feed>;
  /** Default 0: a free port. */
  port?: number;
  /** Default: 32 random bytes, hex. */
  secret?: string;
  /** Lets viewers take computers over (see TakeoverControl); absent: read-only. */
  takeover?: TakeoverControl;
  /** A computer to take over as soon as the server starts (`multienv takeover`). */
  takeNow?: string;
}

export interface WatchServer {
  /** The page, secret included: `http://127.0.0.1:<port>/<secret>/`. */
  url: string;
  port: number;
  /** Viewers connected now. */
  viewers(): number;
  /** True while the feeds run. */
  feeding(): boolean;
  /** The computers this page holds now. */
  holding(): string[];
  /** Resolves once a computer this page held was handed back and no other is held. */
  handedBack(): Promise<void>;
  close(): Promise<void>;
}

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
  const control = options.takeover;
  const feeds = new LiveFeeds(options.feeds, async (feeding) => {
    takeovers?.readStatesWhile(feeding);
    // The page closed: a computer it held goes back to its agent.
    if (!feeding) await takeovers?.handBackAll();
  });
  const takeovers =
    control === undefined
      ? undefined
      : new PageTakeovers(control, options.feeds, (message) => feeds.broadcast(message));
  const { computers } = feeds;

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
      "Content-Security-Policy": `default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; connect-src ws://127.0.0.1:${port}`,
      ...SECURITY_HEADERS,
    });
    res.end(req.method === "HEAD" ? undefined : watchPage(options.stack, computers));
  });

  // A paste is the largest message a viewer sends.
  const live = new WebSocketServer({ noServer: true, maxPayload: control === undefined ? 1024 : 64 * 1024 });
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
      const hello: WatchMessage = {
        type: "hello",
        stack: options.stack,
        computers,
        takeover: control !== undefined,
        ...(control !== undefined ? { operator: control.operator } : {}),
      };
      feeds.add(viewer, [hello, ...(takeovers?.greeting() ?? [])]);
      // Read-only without `takeover`: whatever a viewer sends is dropped.
      if (takeovers !== undefined) viewer.on("message", takeovers.onViewerMessage);
    });
  });

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, "127.0.0.1", () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  if (options.takeNow !== undefined && takeovers !== undefined) {
    await takeovers.readStates();
    await takeovers.take(options.takeNow).catch(async (error: unknown) => {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      throw error;
    });
  }
  return {
    url: `http://127.0.0.1:${port}/${secret}/`,
    port,
    viewers: () => feeds.viewerCount(),
    feeding: () => feeds.feeding(),
    holding: () => takeovers?.holding() ?? [],
    handedBack: () => takeovers?.handedBack() ?? Promise.resolve(),
    async close() {
      takeovers?.readStatesWhile(false);
      await takeovers?.handBackAll();
      await feeds.close();
      live.close();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
