// `multienv watch`'s local web page: every computer's screen, its URL and its proxy log's request and refusal lines,
// live. The machine may have other users, so the page listens on 127.0.0.1 alone and answers only under a path
// holding a secret made for this run (`http://127.0.0.1:<port>/<secret>/`); any other path, a wrong secret or none,
// gets 403, and so does a WebSocket from another origin. Without `takeover` it is read-only: nothing a viewer sends
// reaches a computer. With it, a viewer may take a computer over (the gateway then holds its agent), send it a
// person's input (takeover.ts checks each message; it goes to the screencast's tab alone) and hand it back; each
// takeover's record (who, when, the agent's reason, the inputs without their text) goes to `onTakeover`. A computer
// this page took is handed back when the last viewer leaves and when the server closes; while it holds one, it renews
// the take's hold, so if this process dies the gateway hands the computer back when the hold runs out.
//
// Where the pictures and lines come from is a Feed per computer (watch.ts: DevTools screencast frames and the proxy
// log, through the gateway). The feeds run only while someone watches: all start when the first viewer connects and
// stop when the last one leaves, so an idle `watch` costs the computers nothing.
import { randomBytes, timingSafeEqual } from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";
import type { Duplex } from "node:stream";
import { WebSocket, WebSocketServer } from "ws";
import type { TakeoverListing, TakeoverState } from "../../protocol/takeover";
import { DEFAULT_HOLD_SECONDS } from "../../protocol/takeover";
import { personInput, TakeoverOver, type PersonInput, type TakeoverGateway, type TakeoverRecord } from "./takeover";
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
  /** The computer's tabs, in the browser's order (the one on screen first), when they changed. */
  | { type: "tabs"; tabs: { id: string; url: string; title: string }[] }
  | { type: "log"; lines: WatchLogLine[] }
  | { type: "error"; message: string };

/** The live source of one computer. start() is called when the first viewer connects, stop() when the last leaves. */
export interface Feed {
  start(emit: (event: FeedEvent) => void): Promise<void>;
  stop(): Promise<void>;
  /** Sends a person's input to the tab on screen, adding what the evidence keeps of it to `record`. */
  act?(input: PersonInput, record: TakeoverRecord): Promise<void>;
}

/** A message on the page's live channel: a feed's event, for one computer, or the greeting. */
export type WatchMessage =
  | (FeedEvent & { computer: string })
  | { type: "hello"; stack: string; computers: string[]; takeover: boolean; operator?: string }
  | { type: "takeover"; computer: string; state: TakeoverState; mine: boolean };

/** What the page may ask of a computer when the server takes over. */
type ViewerRequest =
  | { type: "take"; computer: string }
  | { type: "handBack"; computer: string }
  | { type: "input"; computer: string; input: PersonInput };

/** How often the gateway's takeover states (an agent's request for a person) are read while someone watches. */
const STATES_MS = 1_000;

export interface WatchServerOptions {
  stack: string;
  feeds: Record<string, Feed>;
  /** Default 0: a free port. */
  port?: number;
  /** Default: 32 random bytes, hex. */
  secret?: string;
  /**
   * Lets viewers take computers over, as `operator`; absent: read-only. `onTakeover` is given each takeover's record
   * at the take, at each renewal of its hold and at its end, one call after the other: until the end the record says
   * the takeover ends when its hold runs out (as it does if this process dies). `holdSeconds`: how long a take holds
   * unless renewed (renewed every third of it; default the gateway's).
   */
  takeover?: {
    gateway: TakeoverGateway;
    operator: string;
    onTakeover(record: TakeoverRecord): void | Promise<void>;
    holdSeconds?: number;
  };
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

/** Log lines a new viewer gets of what came before it, per computer. */
const BACKLOG_LINES = 200;

/**
 * Frames to one viewer, the newest alone: one frame is written at a time, and a frame that comes while the last is
 * still being written replaces the one waiting for that computer. A viewer slower than the screencast sees fewer
 * frames, never older ones, and once it catches up it is shown the newest (a still page sends no next frame to make
 * up for one skipped).
 */
class FrameSender {
  private writing = false;
  private readonly waiting = new Map<string, string>();

  constructor(private readonly viewer: WebSocket) {}

  send(computer: string, text: string): void {
    this.waiting.delete(computer);
    this.waiting.set(computer, text);
    this.next();
  }

  private next(): void {
    if (this.writing || this.viewer.readyState !== WebSocket.OPEN) return;
    const first = this.waiting.entries().next();
    if (first.done) return;
    const [computer, text] = first.value;
    this.waiting.delete(computer);
    this.writing = true;
    this.viewer.send(text, () => {
      this.writing = false;
      this.next();
    });
  }
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
  const computers = Object.keys(options.feeds);
  const viewers = new Map<WebSocket, FrameSender>();
  // What a viewer who connects now is shown at once: each computer's last frame, URL and recent log lines.
  const last: Record<
    string,
    { frame?: string; url?: WatchMessage; tabs?: WatchMessage; error?: WatchMessage; log: WatchLogLine[] }
  > = Object.fromEntries(computers.map((c) => [c, { log: [] }]));
  let feeding = false;
  let transition: Promise<void> = Promise.resolve();

  const broadcast = (message: WatchMessage) => {
    const text = JSON.stringify(message);
    for (const [viewer, frames] of viewers) {
      if (viewer.readyState !== WebSocket.OPEN) continue;
      if (message.type === "frame") frames.send(message.computer, text);
      else viewer.send(text);
    }
  };

  const emitFor = (computer: string) => (event: FeedEvent) => {
    // A feed stopping may still report its last event; nobody is there to see it.
    if (!feeding) return;
    const seen = last[computer];
    if (event.type === "frame") seen.frame = event.data;
    else if (event.type === "url") seen.url = { ...event, computer };
    else if (event.type === "tabs") seen.tabs = { ...event, computer };
    else if (event.type === "error") seen.error = { ...event, computer };
    else seen.log = [...seen.log, ...event.lines].slice(-BACKLOG_LINES);
    broadcast({ ...event, computer });
  };

  const control = options.takeover;
  /** The takeovers this page holds, each record filled as the person acts. */
  const held = new Map<string, TakeoverRecord>();
  /** Each computer's inputs, one after the other: a release never overtakes its press. */
  const queues = new Map<string, Promise<void>>();
  let states: TakeoverListing["computers"] = {};
  let statesTimer: NodeJS.Timeout | undefined;
  let released: Array<() => void> = [];
  /** Each held computer's renewal of its hold. */
  const renewals = new Map<string, NodeJS.Timeout>();
  /** Each computer's record writes, one after the other: a renewal's never lands after the end's. */
  const writes = new Map<string, Promise<void>>();
  const holdSeconds = control?.holdSeconds ?? DEFAULT_HOLD_SECONDS;

  const persist = (record: TakeoverRecord) => {
    const copy = structuredClone(record);
    const written = (writes.get(record.computer) ?? Promise.resolve())
      .then(() => control?.onTakeover(copy))
      .catch((error: unknown) =>
        broadcast({
          type: "error",
          computer: record.computer,
          message: `the takeover's record could not be written: ${(error instanceof Error ? error.message : String(error)).split("\n")[0]}`,
        }),
      );
    writes.set(record.computer, written);
    return written;
  };

  /** The takeover of `computer` is over without this page handing it back (its hold ran out). */
  const lost = (computer: string, record: TakeoverRecord) => {
    if (held.get(computer) !== record) return;
    held.delete(computer);
    clearInterval(renewals.get(computer));
    renewals.delete(computer);
    states = { ...states, [computer]: {} };
    showState(computer);
    broadcast({ type: "error", computer, message: `the takeover of ${computer} is over: its hold ran out` });
    if (held.size === 0) {
      for (const resolve of released) resolve();
      released = [];
    }
  };

  const renew = async (computer: string, record: TakeoverRecord) => {
    try {
      const hold = await control!.gateway.renew(computer, record.start, holdSeconds);
      if (held.get(computer) !== record || hold.expires === undefined) return;
      record.end = hold.expires;
      await persist(record);
    } catch (error) {
      if (error instanceof TakeoverOver) lost(computer, record);
      // Else the gateway did not answer: the next renewal tries again, before the hold runs out.
    }
  };

  const showState = (computer: string) =>
    broadcast({ type: "takeover", computer, state: states[computer] ?? {}, mine: held.has(computer) });

  const readStates = async () => {
    if (control === undefined) return;
    try {
      const next = (await control.gateway.states()).computers;
      for (const computer of computers)
        if (JSON.stringify(next[computer] ?? {}) !== JSON.stringify(states[computer] ?? {})) {
          states = { ...states, [computer]: next[computer] ?? {} };
          showState(computer);
        }
    } catch {
      // The gateway not answering shows in the feeds' own errors; the next read tries again.
    }
  };

  const take = async (computer: string) => {
    if (control === undefined || held.has(computer)) return;
    const taken = await control.gateway.take(computer, control.operator, holdSeconds);
    const record: TakeoverRecord = {
      computer,
      operator: control.operator,
      ...(taken.reason !== undefined ? { reason: taken.reason } : {}),
      start: taken.since,
      end: taken.expires ?? taken.since,
      ended: "hold-expired",
      inputs: [],
      pointerMoves: 0,
      keys: 0,
      pastes: 0,
      pastedChars: 0,
    };
    held.set(computer, record);
    renewals.set(
      computer,
      setInterval(() => void renew(computer, record), (holdSeconds * 1000) / 3),
    );
    await persist(record);
    states = {
      ...states,
      [computer]: { ...states[computer], taken: { operator: control.operator, since: taken.since } },
    };
    showState(computer);
  };

  const handBack = async (computer: string) => {
    const record = held.get(computer);
    if (control === undefined || record === undefined) return;
    held.delete(computer);
    clearInterval(renewals.get(computer));
    renewals.delete(computer);
    // The inputs already sent are done (or refused) before the agent gets its computer back.
    await queues.get(computer);
    try {
      await control.gateway.handBack(computer);
      record.end = new Date().toISOString();
      record.ended = "handed-back";
    } finally {
      // A hand-back the gateway refused or did not answer leaves the record as it was: ending when the hold runs out.
      await persist(record);
      states = { ...states, [computer]: {} };
      showState(computer);
      if (held.size === 0) {
        for (const resolve of released) resolve();
        released = [];
      }
    }
  };

  const handBackAll = () => Promise.all([...held.keys()].map((computer) => handBack(computer).catch(() => undefined)));

  const act = (computer: string, input: PersonInput) => {
    const record = held.get(computer);
    const feed = options.feeds[computer];
    if (record === undefined || feed.act === undefined) return;
    const queued = (queues.get(computer) ?? Promise.resolve()).then(() =>
      feed.act!(input, record).catch((error: unknown) =>
        broadcast({
          type: "error",
          computer,
          message: (error instanceof Error ? error.message : String(error)).split("\n")[0],
        }),
      ),
    );
    queues.set(computer, queued);
  };

  /** A viewer's message, when it is one the page sends about a computer of this stack; anything else is dropped. */
  const viewerRequest = (data: unknown): ViewerRequest | undefined => {
    let value: Record<string, unknown>;
    try {
      value = JSON.parse(String(data)) as Record<string, unknown>;
    } catch {
      return undefined;
    }
    if (typeof value !== "object" || value === null || !computers.includes(value.computer as string)) return undefined;
    const computer = value.computer as string;
    if (value.type === "take" || value.type === "handBack") return { type: value.type, computer };
    if (value.type !== "input") return undefined;
    const input = personInput(value.input);
    return input === undefined ? undefined : { type: "input", computer, input };
  };

  const onViewerMessage = (data: unknown) => {
    if (control === undefined) return;
    const request = viewerRequest(data);
    if (request === undefined) return;
    const failed = (error: unknown) =>
      broadcast({
        type: "error",
        computer: request.computer,
        message: (error instanceof Error ? error.message : String(error)).split("\n")[0],
      });
    if (request.type === "take") take(request.computer).catch(failed);
    else if (request.type === "handBack") handBack(request.computer).catch(failed);
    else act(request.computer, request.input);
  };

  // Starting and stopping follow the number of viewers, one transition at a time.
  const settle = () => {
    transition = transition.then(async () => {
      const wanted = viewers.size > 0;
      if (wanted === feeding) return;
      feeding = wanted;
      if (control !== undefined) {
        if (wanted) statesTimer = setInterval(() => void readStates(), STATES_MS);
        else clearInterval(statesTimer);
        // The page closed: a computer it held goes back to its agent.
        if (!wanted) await handBackAll();
      }
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
      viewers.set(viewer, new FrameSender(viewer));
      viewer.send(
        JSON.stringify({
          type: "hello",
          stack: options.stack,
          computers,
          takeover: control !== undefined,
          ...(control !== undefined ? { operator: control.operator } : {}),
        } satisfies WatchMessage),
      );
      for (const computer of computers)
        if (states[computer] !== undefined)
          viewer.send(
            JSON.stringify({
              type: "takeover",
              computer,
              state: states[computer],
              mine: held.has(computer),
            } satisfies WatchMessage),
          );
      for (const computer of computers) {
        const seen = last[computer];
        if (seen.url) viewer.send(JSON.stringify(seen.url));
        if (seen.tabs) viewer.send(JSON.stringify(seen.tabs));
        if (seen.error) viewer.send(JSON.stringify(seen.error));
        if (seen.frame) viewer.send(JSON.stringify({ type: "frame", computer, data: seen.frame }));
        if (seen.log.length > 0) viewer.send(JSON.stringify({ type: "log", computer, lines: seen.log }));
      }
      // Read-only without `takeover`: whatever a viewer sends is dropped.
      viewer.on("message", onViewerMessage);
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
  if (options.takeNow !== undefined) {
    await readStates();
    await take(options.takeNow).catch(async (error: unknown) => {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      throw error;
    });
  }
  return {
    url: `http://127.0.0.1:${port}/${secret}/`,
    port,
    viewers: () => viewers.size,
    feeding: () => feeding,
    holding: () => [...held.keys()],
    handedBack: () => (held.size === 0 ? Promise.resolve() : new Promise<void>((resolve) => released.push(resolve))),
    async close() {
      clearInterval(statesTimer);
      await handBackAll();
      for (const viewer of viewers.keys()) viewer.terminate();
      viewers.clear();
      settle();
      await transition;
      live.close();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
