// One exchange as a value the proxy's passes hand on: what the computer asked (method, host, port, the site, the URL),
// the route decided once for it (request-route.ts), and how it ended. The transports make it and say how it ended;
// the observers (the proxy log, the request log) subscribe to those events and know nothing of the transports.
import { randomBytes } from "node:crypto";
import type * as http from "node:http";
import type { SiteProxyVerdict } from "../protocol/site-proxy";
import type { ExchangeTap } from "./forward";
import type { LogEntry } from "./log";

/** One request as its log lines name it. */
export interface Exchange {
  /** Unique in the log: the `request` line's id, which the request log's entry names. */
  id?: string;
  /** The exchange's recording in the request log. */
  tap?: ExchangeTap;
  method: string;
  host: string;
  port: number;
  site?: string;
  /** The Host header the computer sent, when it sent one. */
  hostHeader?: string;
  /** The URL asked for, as the request log names it. */
  url?: string;
}

/** The proxy's own answer, and the log line that says why it gave it. */
export interface Failure {
  status: number;
  verdict: SiteProxyVerdict;
  message: string;
  line: LogEntry;
}

/** How an exchange ended: answered by its destination, abandoned by the computer, or answered by the proxy. */
export type Ending =
  | { how: "answered"; status: number; headers?: http.IncomingHttpHeaders }
  | { how: "abandoned"; endedBy: string }
  | { how: "failed"; failure: Failure };

/** The request as it came, for the request log's recording of it. */
export interface Asked {
  url: string;
  /** `HTTP/1.1` or `HTTP/2.0`. */
  httpVersion: string;
  rawHeaders: string[];
  /** Which of the computer's connections carried it (a socket, or an HTTP/2 session's socket). */
  connection: object;
}

/** What subscribes to exchanges: each event is optional. */
export interface ExchangeObserver {
  /** An exchange begins (it has its id): a tap returned follows its bytes; the first observer's tap is taken. */
  begun?(x: Exchange, asked: Asked, connectionId: string): ExchangeTap | undefined;
  ended?(x: Exchange, ending: Ending): void;
  /** A request or tunnel the proxy answered itself before it was an exchange (malformed, refused, unreachable). */
  declined?(failure: Failure): void;
}

/** The exchanges of one proxy: their ids, and the observers told of each. */
export class Exchanges {
  // Exchange ids: this process's own prefix (a proxy started again counts from 1 anew) and a count.
  private readonly idPrefix = randomBytes(4).toString("hex");
  private count = 0;
  private readonly connectionIds = new WeakMap<object, string>();
  private connectionCount = 0;

  /** Whether an observer follows exchanges from their beginning (the request log does): else no connection is named. */
  private readonly followed: boolean;

  constructor(private readonly observers: readonly ExchangeObserver[]) {
    this.followed = observers.some((observer) => observer.begun !== undefined);
  }

  /** The exchange `x` with its id and URL, its observers told (the request log's recording begun). */
  begin(x: Exchange, asked: Asked): Exchange {
    const begun: Exchange = { ...x, id: `${this.idPrefix}-${++this.count}`, url: asked.url };
    if (!this.followed) return begun;
    for (const observer of this.observers) {
      const tap = observer.begun?.(begun, asked, this.connectionId(asked.connection));
      if (tap !== undefined && begun.tap === undefined) begun.tap = tap;
    }
    return begun;
  }

  ended(x: Exchange, ending: Ending): void {
    for (const observer of this.observers) observer.ended?.(x, ending);
  }

  declined(failure: Failure): void {
    for (const observer of this.observers) observer.declined?.(failure);
  }

  /** The request log's name for a connection of the computer's (a socket, or an HTTP/2 session's socket). */
  private connectionId(socket: object): string {
    let id = this.connectionIds.get(socket);
    if (id === undefined) this.connectionIds.set(socket, (id = `${this.idPrefix}-c${++this.connectionCount}`));
    return id;
  }
}
