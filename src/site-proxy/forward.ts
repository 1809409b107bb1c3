// Sending one parsed request on to its next hop and its answer back: the step the forward port (hosts and the
// gateway) and the control port (the browser's DevTools) share. Node's client writes the request, framed again from
// what node's server parsed (framing.ts), and parses the answer with the same strict parser; an answer whose
// framing is broken is a 502 and its connection is destroyed, never handed back to the pool.
import * as http from "node:http";
import type * as net from "node:net";
import type { Readable } from "node:stream";
import { hasBody, requestFraming, responseFramingProblem } from "./framing";
import { endToEndHeaders, withoutHeader } from "./messages";
import { relay } from "./relay";

/** Where a request goes: `headers` are its end-to-end headers for that hop, Host included, framing left out. */
export interface Destination {
  host: string;
  port: number;
  path: string;
  headers: string[];
}

/** An answer's head as the request log keeps it. */
export interface TappedAnswer {
  status: number;
  statusText: string;
  /** `HTTP/1.1`: the proxy's next hops all speak it. */
  httpVersion: string;
  rawHeaders: string[];
  /** The address the answer came from. */
  serverAddress?: string;
}

export function tappedAnswer(answer: http.IncomingMessage): TappedAnswer {
  return {
    status: answer.statusCode ?? 502,
    statusText: answer.statusMessage ?? "",
    httpVersion: `HTTP/${answer.httpVersion}`,
    rawHeaders: answer.rawHeaders,
    ...(answer.socket?.remoteAddress ? { serverAddress: answer.socket.remoteAddress } : {}),
  };
}

/**
 * What the request log is handed of an exchange as it passes (recorder.ts): the request's body, the answer's head
 * and body as the computer gets them, and how the exchange ended (the first `finish` counts).
 */
export interface ExchangeTap {
  requestChunk(chunk: Buffer): void;
  requestEnd(): void;
  response(answer: TappedAnswer): void;
  responseChunk(chunk: Buffer): void;
  /**
   * A WebSocket's relay begins between `computer` and `host`: `early` the computer's bytes sent before the 101,
   * `head` the host's after it, `extensions` the Sec-WebSocket-Extensions the host chose.
   */
  webSocket?(computer: Readable, host: Readable, early: Buffer, head: Buffer, extensions: string | undefined): void;
  finish(end: string): void;
}

/**
 * How one exchange ends. Exactly one of `answered`, `abandoned` and `failed` with `settled` false is called, so the
 * exchange gets one log line whatever ends it; a `failed` after that (`settled` true) only ends what is left.
 */
export interface ForwardHooks {
  /**
   * The request could not be sent or its answer was broken; `settled` when the exchange already has its line
   * (answered, or abandoned): then only what is left of it is ended.
   */
  failed(err: Error, settled: boolean): void;
  /** The computer got `status` (the host's, or 502 for a broken answer), and the host's answer `headers`. */
  answered(status: number, headers?: http.IncomingHttpHeaders): void;
  /**
   * The computer's side ended before it was answered (`endedBy` says how: a reset stream, a closed connection): the
   * request was never sent, or it was aborted at once and its connection not reused.
   */
  abandoned(endedBy: string): void;
  /** The request log's recording of the exchange, when there is a log. */
  tap?: ExchangeTap;
}

/** An answer the proxy refuses to pass on: its framing is broken. */
export class BrokenAnswer extends Error {}

/** RFC 9110 9.2.2: the methods a client may send again without changing what the first attempt did. */
export const IDEMPOTENT = new Set(["GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"]);

/**
 * An agent whose sockets come from `open` (one deadline for the lookup and the attempts, the address check, a log
 * line each), and which never keeps a socket that says something while no request is waiting for it: those bytes
 * would be taken as the answer to the next request sent on it.
 */
export function connectorAgent(
  open: (host: string, port: number) => Promise<net.Socket>,
  idleTimeoutMs: number,
): http.Agent {
  const agent = new http.Agent({ keepAlive: true, timeout: idleTimeoutMs, scheduling: "lifo" });
  (agent as unknown as { createConnection: unknown }).createConnection = (
    options: { host?: string | null; port?: number | string | null },
    callback: (err: Error | null, socket?: net.Socket) => void,
  ): undefined => {
    open(String(options.host), Number(options.port)).then(
      (socket) => callback(null, socket),
      (err: Error) => callback(err),
    );
    return undefined;
  };
  const unsolicited = new WeakMap<net.Socket, () => void>();
  // keepSocketAlive returns whether the socket is kept (typed void in @types/node).
  const keepSocketAlive = agent.keepSocketAlive.bind(agent) as unknown as (socket: net.Socket) => boolean;
  (agent as unknown as { keepSocketAlive: (socket: net.Socket) => boolean }).keepSocketAlive = (socket) => {
    if (!keepSocketAlive(socket)) return false;
    const drop = () => socket.destroy();
    unsolicited.set(socket, drop);
    socket.once("data", drop);
    return true;
  };
  const reuseSocket = agent.reuseSocket.bind(agent);
  agent.reuseSocket = (socket: net.Socket, req: http.ClientRequest) => {
    const drop = unsolicited.get(socket);
    if (drop) socket.off("data", drop);
    unsolicited.delete(socket);
    reuseSocket(socket, req);
  };
  return agent;
}

/**
 * At most `max` requests under way at once, the rest started in turn as those end. With one request at a time on a
 * connection, that bounds the agent's connections too (an agent whose sockets open asynchronously, as the
 * connector's do, cannot count them for its own maxSockets until they have opened).
 */
export class RequestSlots {
  private running = 0;
  private readonly waiting: ((release: () => void) => void)[] = [];
  /** Set while waiting requests are being started, so a start that releases its slot at once does not recurse. */
  private starting = false;

  constructor(private readonly max: number) {}

  /**
   * Runs `start` once a slot is free; `start` calls its `release` (once; later calls do nothing) when its request
   * ended.
   */
  run(start: (release: () => void) => void): void {
    this.waiting.push(start);
    this.startWaiting();
  }

  // A flood of streams reset while they waited gives up thousands of slots in one go: a loop, not a recursion.
  private startWaiting(): void {
    if (this.starting) return;
    this.starting = true;
    while (this.running < this.max && this.waiting.length > 0) {
      const start = this.waiting.shift()!;
      this.running++;
      let released = false;
      start(() => {
        if (released) return;
        released = true;
        this.running--;
        this.startWaiting();
      });
    }
    this.starting = false;
  }
}

/**
 * The computer's side of one exchange, whichever protocol it speaks: its request's method, body and framing, and
 * how the answer goes back (an HTTP/1.1 response, or an HTTP/2 stream).
 */
export interface ComputerSide {
  method: string;
  /** The body's framing headers for the next hop (its length, or chunked), appended to the destination's. */
  framing: string[];
  bodyless: boolean;
  /** Where the request's body comes from. */
  body: NodeJS.ReadableStream & { resume(): unknown };
  /** Where the answer's body goes; its `close` before the whole answer went in ends the upstream request. */
  answer: NodeJS.WritableStream & { once(event: "close" | "drain", listener: () => void): unknown };
  /** True once the computer has been sent an answer's head. */
  headersSent(): boolean;
  /** True when the computer went away (its stream or connection closed): nothing more can reach it. */
  gone(): boolean;
  /** How the computer's side ended, once `gone`: for the log line of an exchange it abandoned. */
  endedBy(): string;
  /** Sends the answer's head to the computer; throws when it cannot be passed on. */
  respond(answer: http.IncomingMessage): void;
  /** Ends the computer's side after the answer broke off. */
  abort(): void;
}

/**
 * The answer's body into `to` as it comes, paused while `to` is full: what `pipe` does, with three listeners where
 * `pipe` adds and removes eight for every exchange. A `to` that closes first ends the exchange (see sendOn), so
 * nothing waits here for a drain that will not come. `ended` runs once the whole body went in.
 */
function passBody(
  from: http.IncomingMessage,
  to: ComputerSide["answer"],
  ended: () => void,
  tap: ExchangeTap | undefined,
): void {
  const resume = () => from.resume();
  from.on("data", (chunk: Buffer) => {
    tap?.responseChunk(chunk);
    if (!to.write(chunk)) {
      from.pause();
      to.once("drain", resume);
    }
  });
  from.once("end", () => {
    ended();
    to.end();
    tap?.finish("complete");
  });
}

/**
 * Sends the computer's request to `destination` through `agent` and streams the answer back. A request without a
 * body whose method is idempotent, meeting a kept-alive connection the host closed as it arrived, is sent once
 * more on a new one, as a browser would do itself; any other request is sent once. With `slots`, the request
 * waits for one.
 */
export function sendOn(
  computer: ComputerSide,
  agent: http.Agent,
  destination: Destination,
  hooks: ForwardHooks,
  slots?: RequestSlots,
): void {
  const retriable = computer.bodyless && IDEMPOTENT.has(computer.method);
  const tap = hooks.tap;
  // The request's body is tapped once, as it is first sent (a request sent again has none).
  let tapped = false;
  const tapBody = () => {
    if (tap === undefined || tapped) return;
    tapped = true;
    if (computer.bodyless) return tap.requestEnd();
    computer.body.on("data", (chunk: Buffer) => tap.requestChunk(chunk));
    computer.body.once("end", () => tap.requestEnd());
  };
  const headers = [...destination.headers, ...computer.framing];
  // Once the exchange has its line (answered, abandoned, or told of a failure), later errors of it only end it.
  let settled = false;
  const failed = (err: Error) => {
    const already = settled || computer.headersSent();
    settled = true;
    if (already) tap?.finish(`answer broke: ${err.message}`);
    hooks.failed(err, already);
  };
  const abandon = () => {
    if (settled) return;
    settled = true;
    hooks.abandoned(computer.endedBy());
    tap?.finish(computer.endedBy());
  };
  // The whole answer went back: the computer's side closing after that abandons nothing.
  let answerEnded = false;
  let release = () => {};
  const send = (mayRetry: boolean) => {
    let upstream: http.ClientRequest;
    try {
      upstream = http.request({
        agent,
        host: destination.host,
        port: destination.port,
        method: computer.method,
        path: destination.path,
        headers,
        setHost: false,
      });
    } catch (err) {
      // Node's client refuses what it cannot write (a path with characters a request line may not carry).
      release();
      failed(err as Error);
      return;
    }
    let retried = false;
    // A request's close comes just before its kept-alive socket is free again: the slot is given on after that,
    // so the next request finds the socket rather than opening another.
    upstream.once("close", () => retried || process.nextTick(release));
    upstream.on("response", (answer) => {
      if (settled) return void answer.socket.destroy();
      const problem = responseFramingProblem(answer);
      if (problem) {
        answer.socket.destroy();
        failed(new BrokenAnswer(`the answer is malformed: ${problem}`));
        return;
      }
      try {
        computer.respond(answer);
      } catch (err) {
        answer.socket.destroy();
        failed(new BrokenAnswer(`the answer cannot be passed on: ${(err as Error).message}`));
        return;
      }
      settled = true;
      tap?.response(tappedAnswer(answer));
      hooks.answered(answer.statusCode ?? 502, answer.headers);
      passBody(answer, computer.answer, () => (answerEnded = true), tap);
      answer.on("error", () => {
        tap?.finish("answer broke");
        computer.abort();
      });
    });
    upstream.on("error", (err: NodeJS.ErrnoException) => {
      if (
        mayRetry &&
        !settled &&
        upstream.reusedSocket &&
        !computer.headersSent() &&
        (err.code === "ECONNRESET" || err.code === "EPIPE")
      ) {
        retried = true;
        return send(false);
      }
      failed(err);
    });
    // The computer's side closed before its whole answer went back (a stream reset, a body cut short, a connection
    // gone): the upstream request is aborted at once, so it never waits there for the rest of a body that will not
    // come, holding a connection and a slot, and that connection is not reused. (Whether the computer's side had
    // finished writing says nothing here: node ends an HTTP/2 stream's writable side itself when the stream is reset.)
    computer.answer.once("close", () => {
      if (answerEnded) return;
      abandon();
      tap?.finish(computer.endedBy());
      upstream.destroy();
    });
    tapBody();
    if (computer.bodyless) {
      computer.body.resume();
      upstream.end();
    } else computer.body.pipe(upstream);
  };
  // A computer that went away before its request could be sent (while it waited for a slot): nothing to send.
  const sendUnlessGone = () => {
    if (!computer.gone()) return send(retriable);
    release();
    abandon();
  };
  if (!slots) return sendUnlessGone();
  // A computer that goes away while its request waits has its line then, not once the request's turn comes.
  computer.answer.once("close", abandon);
  slots.run((done) => {
    release = done;
    sendUnlessGone();
  });
}

/** Sends an HTTP/1.1 request `req` on (see sendOn) and streams the answer into `res`. */
export function forward(
  req: http.IncomingMessage,
  res: http.ServerResponse,
  agent: http.Agent,
  destination: Destination,
  hooks: ForwardHooks,
  slots?: RequestSlots,
): void {
  const computer: ComputerSide = {
    method: req.method ?? "",
    framing: requestFraming(req),
    bodyless: !hasBody(req),
    body: req,
    answer: res,
    headersSent: () => res.headersSent,
    gone: () => res.destroyed || req.destroyed,
    endedBy: () => "connection closed",
    respond: (answer) =>
      res.writeHead(answer.statusCode ?? 502, answer.statusMessage, endToEndHeaders(answer.rawHeaders)),
    abort: () => res.destroy(),
  };
  sendOn(computer, agent, destination, hooks, slots);
}

export interface UpgradeHooks {
  /** Opens a fresh connection to the destination (an upgraded connection is never pooled). */
  open(): Promise<net.Socket>;
  /** The connection could not be opened or the answer was broken; the computer's socket is still unanswered. */
  failed(err: Error): void;
  answered(status: number, headers?: http.IncomingHttpHeaders): void;
  /** The computer's side closed before it was answered (`endedBy` says how); the upgrade request was aborted. */
  abandoned(endedBy: string): void;
  /** The request log's recording of the exchange, when there is a log. */
  tap?: ExchangeTap;
}

/** A header's value as one text (repeated ones joined as a list). */
export function headerText(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value.join(", ") : value;
}

/** The status line and headers of an answer, as bytes for a raw socket. */
function head(answer: http.IncomingMessage, headers: string[]): string {
  let text = `HTTP/1.1 ${answer.statusCode} ${answer.statusMessage ?? ""}\r\n`;
  for (let i = 0; i < headers.length; i += 2) text += `${headers[i]}: ${headers[i + 1]}\r\n`;
  return text + "\r\n";
}

/**
 * An upgrade request to `destination` on the connection `hooks.open` gives (a fresh one: an upgraded connection is
 * never pooled); undefined when it cannot even be made, `hooks.failed` told why.
 */
export function upgradeRequest(
  destination: Destination,
  method: string,
  headers: string[],
  hooks: Pick<UpgradeHooks, "open" | "failed">,
): http.ClientRequest | undefined {
  try {
    return http.request({
      host: destination.host,
      port: destination.port,
      method,
      path: destination.path,
      headers,
      setHost: false,
      createConnection: ((_options: unknown, callback: (err: Error | null, socket?: net.Socket) => void) => {
        hooks.open().then(
          (socket) => callback(null, socket),
          (err: Error) => callback(err),
        );
        return undefined;
      }) as never,
    });
  } catch (err) {
    hooks.failed(err as Error);
    return undefined;
  }
}

/**
 * A WebSocket (or other) upgrade. The request is sent on a fresh connection, and what the computer sent after its
 * request head is held back until the destination switches protocols (101): a destination that answers anything
 * else gets no further byte from the computer, so none can be read there as the next request. A 101 is passed on
 * and the two sockets are relayed; any other answer is passed on and both connections end.
 */
export function forwardUpgrade(
  req: http.IncomingMessage,
  client: net.Socket,
  early: Buffer,
  destination: Destination,
  idleTimeoutMs: number,
  hooks: UpgradeHooks,
): void {
  const upgradeTo = req.headers.upgrade ?? "websocket";
  const headers = [...destination.headers, "Connection", "Upgrade", "Upgrade", upgradeTo];
  const upstream = upgradeRequest(destination, req.method ?? "GET", headers, hooks);
  if (upstream === undefined) return;
  const tap = hooks.tap;
  tap?.requestEnd();
  // Exactly one of failed/answered/abandoned is called, however the exchange ends.
  let settled = false;
  const fail = (err: Error) => {
    if (settled) return void client.destroy();
    settled = true;
    hooks.failed(err);
  };
  const abandon = () => {
    if (settled) return;
    settled = true;
    hooks.abandoned("connection closed");
    tap?.finish("connection closed");
  };
  const answered = (status: number, headers?: http.IncomingHttpHeaders) => {
    settled = true;
    hooks.answered(status, headers);
  };
  upstream.on("upgrade", (answer, socket: net.Socket, upgradeHead: Buffer) => {
    const kept = endToEndHeaders(answer.rawHeaders);
    client.write(head(answer, [...kept, "Connection", "Upgrade", "Upgrade", answer.headers.upgrade ?? upgradeTo]));
    tap?.response(tappedAnswer(answer));
    client.once("close", () => tap?.finish("upgrade closed"));
    if (upgradeTo.toLowerCase() === "websocket")
      tap?.webSocket?.(client, socket, early, upgradeHead, headerText(answer.headers["sec-websocket-extensions"]));
    answered(101);
    if (upgradeHead.length > 0) client.write(upgradeHead);
    if (early.length > 0) socket.write(early);
    relay(client, socket, idleTimeoutMs);
  });
  upstream.on("response", (answer) => {
    const problem = responseFramingProblem(answer);
    if (problem) {
      answer.socket.destroy();
      fail(new BrokenAnswer(`the answer is malformed: ${problem}`));
      return;
    }
    // The body goes out as node decoded it, delimited by the end of the connection.
    const kept = withoutHeader(endToEndHeaders(answer.rawHeaders), "content-length");
    client.write(head(answer, [...kept, "Connection", "close"]));
    answered(answer.statusCode ?? 502, answer.headers);
    if (tap) {
      tap.response(tappedAnswer(answer));
      answer.on("data", (chunk: Buffer) => tap.responseChunk(chunk));
      answer.once("end", () => tap.finish("complete"));
    }
    answer.pipe(client);
    answer.on("error", () => client.destroy());
  });
  upstream.on("error", fail);
  client.on("close", () => {
    abandon();
    upstream.destroy();
  });
  upstream.end();
}
