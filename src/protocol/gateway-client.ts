// The one client of the gateway's contract (docs/design.md "Gateway"), for the runner, the providers, the benches and
// the tests: its card and health, the sites' operations, each computer's DevTools, browser operations, site-proxy log
// and request log, the traffic captures, the replay counters and the takeovers. Its paths are built by
// gateway-paths.ts, the rule the gateway routes by. Every request carries the control token as `Authorization:
// Bearer` (the health probe aside, which needs none). A request that fails is one line: what was asked (the
// operation, in the caller's words), then the status and what the gateway said, and never the token, which is taken
// out of anything the gateway or the network echoes.
import { createWriteStream } from "node:fs";
import { Readable, type Writable } from "node:stream";
import { pipeline } from "node:stream/promises";
import type { ReadableStream as WebReadableStream } from "node:stream/web";
import { Agent } from "undici";
import { z } from "zod";
import { bearer } from "./auth";
import { CARD_PATH, type GatewayCard } from "./card";
import { GATEWAY_IDLE_CONNECTION_MS } from "./gateway-config";
import { REQUESTS_LIST_PATH, requestLogPath } from "./request-log";
import type { ReplayCounters } from "./replay-server-config";
import { SESSION_PATH } from "./session";
import { cdpPath, endConnectionsPath, GATEWAY_HEALTH_PATH, proxyLogPath, replayPath, sitePath } from "./gateway-paths";
import type { LogMark } from "./site-proxy";
import { TAKEOVERS_PATH, takeoverPath, type TakeoverHold, type TakeoverListing } from "./takeover";
import { capturePath, TRAFFIC_CAPTURES_PATH, trafficCaptureListingSchema, type TrafficCapture } from "./traffic";

// The paths, for a caller that asks one of its own (a site's path through send()).
export { cdpPath, computerPath, endConnectionsPath, proxyLogPath, replayPath, sitePath } from "./gateway-paths";

/**
 * The client's connections to the gateway. An idle one is let go after 4 s (undici's own default), far inside the
 * gateway's idle timeout: left to the gateway's announced 65 s, a request sent just as the gateway closed the idle
 * connection met "other side closed" (seen through an SSH tunnel on a loaded machine), and a warm pool's reset or a
 * claim failed with it. Exported for a caller that asks the gateway with fetch of its own (the tests' kit).
 */
export const GATEWAY_CONNECTIONS = new Agent({ keepAliveMaxTimeout: Math.min(4_000, GATEWAY_IDLE_CONNECTION_MS / 4) });

/** A request to the gateway that failed: its `status` when the gateway answered. */
export class GatewayRequestError extends Error {
  constructor(
    message: string,
    readonly status?: number,
  ) {
    super(message);
    this.name = "GatewayRequestError";
  }
}

/** The gateway's health as its /healthz says it. */
export interface GatewayHealthAnswer {
  ok: boolean;
  status: number;
  /** What it says is missing (a site not ready, a capture not writing), when it is not ready. */
  missing?: { what: string; site: string; role?: string; detail: string }[];
}

/** A piece of a computer's site-proxy log: its bytes from byte `start`, and the log's size when the proxy said. */
export interface ProxyLogPiece {
  start: number;
  bytes: Buffer;
  size?: number;
}

/** A page target as DevTools' `/json/list` lists it. */
export interface DevtoolsTarget {
  id: string;
  type: string;
  url: string;
  title: string;
}

/** What one request may add: a method, headers, a JSON body, a signal. */
interface Call {
  method?: string;
  headers?: Record<string, string>;
  json?: unknown;
  signal?: AbortSignal;
  /** False: no control token (the health probe). */
  token?: boolean;
}

const countersSchema = z.object({ exact: z.number(), fuzzy: z.number(), missed: z.number() });
const endedSchema = z.object({ ended: z.number() });
const resetSchema = z.object({ ended: countersSchema });
const healthSchema = z.object({
  missing: z.array(z.object({ what: z.string(), site: z.string(), role: z.string().optional(), detail: z.string() })),
});
const targetsSchema = z.array(
  z.looseObject({ id: z.unknown(), type: z.unknown(), url: z.unknown().optional(), title: z.unknown().optional() }),
);
const takenSchema = z.object({
  taken: z.object({
    operator: z.string(),
    since: z.string(),
    reason: z.string().optional(),
    expires: z.string().optional(),
  }),
});
const takeoversSchema = z.object({ computers: z.record(z.string(), z.unknown()) });
const cardSchema = z.looseObject({ sites: z.record(z.string(), z.unknown()).optional() });

/** How much of an answer's body an error quotes. */
const QUOTED_CHARS = 300;

/** The client of one gateway: `url` is a URL this process can dial (see src/engines/gateway-reach.ts). */
export class GatewayClient {
  readonly url: string;
  readonly #token: string;

  constructor(url: string, controlToken: string) {
    this.url = url.replace(/\/+$/, "");
    this.#token = controlToken;
  }

  /** The full URL of a gateway path. */
  urlOf(path: string): string {
    return this.url + path;
  }

  /** A computer's DevTools endpoint, for a DevTools client (send `authorization()` with it). */
  cdpUrl(computer: string): string {
    return this.urlOf(cdpPath(computer));
  }

  /** The Authorization header's value for a client of its own (DevTools over WebSocket). */
  authorization(): string {
    return bearer(this.#token);
  }

  /** `text` with the token taken out, on one line, cut to what an error quotes. */
  #quote(text: string): string {
    const scrubbed = this.#token === "" ? text : text.split(this.#token).join("[token]");
    return scrubbed.replace(/\s+/g, " ").trim().slice(0, QUOTED_CHARS);
  }

  /** The request, answered; a network failure is one line naming `operation`. */
  async send(operation: string, path: string, call: Call = {}): Promise<Response> {
    const headers: Record<string, string> = { ...call.headers };
    if (call.token !== false) headers.authorization = bearer(this.#token);
    if (call.json !== undefined) headers["content-type"] = "application/json";
    try {
      return await fetch(this.urlOf(path), {
        method: call.method ?? "GET",
        headers,
        body: call.json === undefined ? undefined : JSON.stringify(call.json),
        signal: call.signal,
        dispatcher: GATEWAY_CONNECTIONS,
      } as RequestInit);
    } catch (error) {
      // node's fetch says "fetch failed" and hides the network's reason in its cause.
      const cause = error instanceof Error ? (error.cause instanceof Error ? error.cause : error) : undefined;
      const code = (cause as { code?: unknown } | undefined)?.code;
      const reason =
        cause?.name === "TimeoutError" || cause?.name === "AbortError"
          ? `no answer (${cause.message})`
          : `cannot reach the gateway (${typeof code === "string" ? code : (cause?.message ?? String(error))})`;
      throw new GatewayRequestError(`${operation}: ${this.#quote(reason.split("\n")[0])}`);
    }
  }

  /** The error for an answer that is not a success: the status and what the gateway said (its `error`, `detail`). */
  async failure(operation: string, response: Response): Promise<GatewayRequestError> {
    const text = await response.text().catch(() => "");
    let said = text;
    try {
      const json = JSON.parse(text) as { error?: unknown; detail?: unknown };
      if (typeof json.error === "string")
        said = [json.error, json.detail].filter((s) => typeof s === "string").join(" ");
    } catch {
      // not JSON: quoted as it is
    }
    return new GatewayRequestError(
      `${operation}: HTTP ${response.status} ${this.#quote(said)}`.trim(),
      response.status,
    );
  }

  /** The answer of a successful request; anything else is an error. */
  async ok(operation: string, path: string, call: Call = {}): Promise<Response> {
    const response = await this.send(operation, path, call);
    if (!response.ok) throw await this.failure(operation, response);
    return response;
  }

  /** The JSON answer of a successful request, checked against `schema`. */
  async json<T>(operation: string, path: string, schema: z.ZodType<T>, call: Call = {}): Promise<T> {
    return this.parse(operation, await this.ok(operation, path, call), schema);
  }

  /** The JSON body of `response`, checked against `schema`: an answer that is not is one line naming `operation`. */
  async parse<T>(operation: string, response: Response, schema: z.ZodType<T>): Promise<T> {
    const text = await response.text();
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      const type = response.headers.get("content-type") ?? "no content type";
      throw new GatewayRequestError(
        `${operation}: the answer (HTTP ${response.status}, ${type}) is not JSON: ${this.#quote(text.slice(0, 80))}`,
        response.status,
      );
    }
    const parsed = schema.safeParse(body);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      const where = issue.path.length > 0 ? issue.path.join(".") : "the answer";
      throw new GatewayRequestError(
        `${operation}: the answer is not what the gateway serves (${where}: ${issue.message})`,
        response.status,
      );
    }
    return parsed.data;
  }

  // --- the gateway itself

  /** The gateway's card: its extensions and each site's card under `/svc/<site>`. */
  async card(operation = "reading the gateway's card"): Promise<GatewayCard> {
    return (await this.json(operation, CARD_PATH, cardSchema)) as unknown as GatewayCard;
  }

  /** Its /healthz (no token: a client made with an empty one may ask): whether it is ready, and what is missing. */
  async health(signal?: AbortSignal): Promise<GatewayHealthAnswer> {
    const response = await this.send("the gateway's health", GATEWAY_HEALTH_PATH, { token: false, signal });
    if (response.ok) {
      await response.body?.cancel();
      return { ok: true, status: response.status };
    }
    const said = healthSchema.safeParse(await response.json().catch(() => undefined));
    return { ok: false, status: response.status, ...(said.success ? { missing: said.data.missing } : {}) };
  }

  // --- the sites

  /** Whether a site's server answers its /ready through the gateway. */
  async siteReady(site: string): Promise<boolean> {
    return this.send(`site ${site}'s /ready`, sitePath(site, "/ready")).then(
      async (response) => (await response.body?.cancel(), response.ok),
      () => false,
    );
  }

  /** POSTs one of a site's operations, at the path its card declares (already under `/svc/<site>`). */
  async siteOperation(operation: string, path: string): Promise<void> {
    await (await this.ok(operation, path, { method: "POST" })).body?.cancel();
  }

  /** Asks a path of a site's server (`/svc/<site><path>`; GET unless told) and answers its JSON, unchecked. */
  async siteJson(site: string, path: string, call: Pick<Call, "method" | "json"> = {}): Promise<unknown> {
    const operation = `site ${site}: ${call.method ?? "GET"} ${sitePath(site, path)}`;
    return this.json(operation, sitePath(site, path), z.unknown(), call);
  }

  /** A live site's session (its server's /session), unchecked JSON: src/protocol/session.ts reads it. */
  async siteSession(site: string): Promise<unknown> {
    return this.json(
      `site ${site}'s session (GET ${sitePath(site, SESSION_PATH)})`,
      sitePath(site, SESSION_PATH),
      z.unknown(),
    );
  }

  // --- the computers

  /** Whether a computer's DevTools answers `/json/version` through the gateway. */
  async devtoolsAnswers(computer: string, signal?: AbortSignal): Promise<boolean> {
    const response = await this.send(`computer ${computer}'s DevTools`, `${cdpPath(computer)}/json/version`, {
      signal,
    }).catch(() => undefined);
    await response?.body?.cancel();
    return response?.ok === true;
  }

  /** DevTools' `/json/list` of a computer's browser: its targets, the one last shown first. */
  async devtoolsTargets(computer: string, operation: string, signal?: AbortSignal): Promise<DevtoolsTarget[]> {
    const listed = await this.json(operation, `${cdpPath(computer)}/json/list`, targetsSchema, { signal });
    return listed.map((t) => ({
      id: String(t.id),
      type: String(t.type),
      url: String(t.url ?? ""),
      title: String(t.title ?? ""),
    }));
  }

  /** Brings a computer's tab to the front (DevTools' `/json/activate/<id>`). */
  async activateTab(computer: string, targetId: string, operation: string, signal?: AbortSignal): Promise<void> {
    const path = `${cdpPath(computer)}/json/activate/${encodeURIComponent(targetId)}`;
    await (await this.ok(operation, path, { signal })).text();
  }

  /** One of a computer's browser launcher's operations (BROWSER_OPERATION_PATHS), POSTed; its JSON answer. */
  async browserOperation(computer: string, path: string, operation: string): Promise<unknown> {
    return this.json(operation, cdpPath(computer) + path, z.unknown(), { method: "POST" });
  }

  /** A computer's site-proxy log, whole. */
  async proxyLog(computer: string, signal?: AbortSignal): Promise<string> {
    return (
      await this.ok(`fetching the site-proxy log of computer ${computer}`, proxyLogPath(computer), { signal })
    ).text();
  }

  /**
   * The part of a computer's site-proxy log asked for: from byte `from` on (what was appended since), or its `last`
   * bytes (an HTTP Range request the site proxy answers 206 or, with nothing new, 416). A proxy that ignores Range
   * answers the whole log, a piece from byte 0.
   */
  async proxyLogPiece(
    computer: string,
    part: { from: number } | { last: number },
    signal?: AbortSignal,
  ): Promise<ProxyLogPiece> {
    const what = `fetching the site-proxy log of computer ${computer}`;
    const range = "from" in part ? `bytes=${part.from}-` : `bytes=-${part.last}`;
    const response = await this.send(what, proxyLogPath(computer), { headers: { range }, signal });
    const contentRange = response.headers.get("content-range") ?? "";
    if (response.status === 206) {
      const match = /^bytes (\d+)-\d+\/(\d+)$/.exec(contentRange);
      if (match === null)
        throw new GatewayRequestError(`${what}: a 206 answer without a byte range (${contentRange || "none"})`);
      return { start: Number(match[1]), bytes: Buffer.from(await response.arrayBuffer()), size: Number(match[2]) };
    }
    if (response.status === 416) {
      await response.body?.cancel();
      const size = Number(/^bytes \*\/(\d+)$/.exec(contentRange)?.[1] ?? Number.NaN);
      if (Number.isNaN(size)) throw new GatewayRequestError(`${what}: a 416 answer without the log's size`, 416);
      return { start: "from" in part ? part.from : size, bytes: Buffer.alloc(0), size };
    }
    if (!response.ok) throw await this.failure(what, response);
    const bytes = Buffer.from(await response.arrayBuffer());
    return { start: 0, bytes, size: bytes.length };
  }

  /**
   * Ends every connection a computer's site proxy holds (and marks its log with `mark`); the number of sockets ended,
   * or undefined from a site proxy that cannot (404: an older image).
   */
  async endConnections(computer: string, mark?: LogMark): Promise<number | undefined> {
    const what = `ending the connections of computer ${computer}'s site proxy`;
    const response = await this.send(what, endConnectionsPath(computer, mark), { method: "POST" });
    if (response.status === 404) {
      await response.body?.cancel();
      return undefined;
    }
    if (!response.ok) throw await this.failure(what, response);
    return (await this.parse(what, response, endedSchema)).ended;
  }

  /** The computers whose request logs the gateway serves. */
  async requestLogs(): Promise<string[]> {
    const schema = z.object({ computers: z.array(z.object({ name: z.string() })) });
    return (await this.json("listing the request logs", REQUESTS_LIST_PATH, schema)).computers.map((c) => c.name);
  }

  /** A computer's request log as it streams (one HAR entry per line), or undefined when it keeps none (404). */
  async requestLog(computer: string, signal?: AbortSignal): Promise<Readable | undefined> {
    const what = `fetching the request log of computer ${computer}`;
    const response = await this.send(what, requestLogPath(computer), { signal });
    if (response.status === 404) {
      await response.body?.cancel();
      return undefined;
    }
    if (!response.ok || response.body === null) throw await this.failure(what, response);
    return Readable.fromWeb(response.body as WebReadableStream<Uint8Array>);
  }

  // --- traffic/v1

  /** The gateway's captures, oldest first. */
  async captures(signal?: AbortSignal): Promise<TrafficCapture[]> {
    return (await this.json("listing traffic captures", TRAFFIC_CAPTURES_PATH, trafficCaptureListingSchema, { signal }))
      .captures;
  }

  /**
   * Downloads one capture into `destination` (a file path, created or replaced, or a stream that is ended when the
   * file is) and returns its size. The size is checked against the Content-Length the gateway announced, so a cut
   * download is an error, not a short file.
   */
  async downloadCapture(name: string, destination: string | Writable): Promise<{ bytes: number }> {
    const what = `fetching traffic capture ${name}`;
    const response = await this.ok(what, capturePath(name));
    if (response.body === null) throw new GatewayRequestError(`${what}: an answer without a body`, response.status);
    const expected = Number(response.headers.get("content-length"));
    let bytes = 0;
    const body = Readable.fromWeb(response.body as WebReadableStream<Uint8Array>);
    body.on("data", (chunk: Buffer) => (bytes += chunk.length));
    await pipeline(body, typeof destination === "string" ? createWriteStream(destination) : destination);
    if (Number.isFinite(expected) && bytes !== expected)
      throw new GatewayRequestError(`${what}: got ${bytes} of ${expected} bytes`);
    return { bytes };
  }

  // --- replayed sites

  /** A replayed site's counters of the episode under way. */
  async replayCounters(site: string): Promise<ReplayCounters> {
    const counters = await this.json(`replayed site ${site}'s counters`, replayPath(site, "counters"), countersSchema);
    return { exact: counters.exact, fuzzy: counters.fuzzy, missed: counters.missed };
  }

  /** Ends the episode on a replayed site's replay server; the ended episode's counters. */
  async resetReplay(site: string): Promise<ReplayCounters> {
    const what = `replayed site ${site}: its replay server's reset`;
    const { ended } = await this.json(what, replayPath(site, "reset"), resetSchema, { method: "POST" });
    return { exact: ended.exact, fuzzy: ended.fuzzy, missed: ended.missed };
  }

  // --- takeovers

  /**
   * Takes a computer for `operator`, held for `holdSeconds` unless renewed (the gateway's default when unset): the
   * hold, with the agent's reason when it had asked for a person.
   */
  async take(computer: string, operator: string, holdSeconds?: number): Promise<TakeoverHold> {
    const path = takeoverPath(computer);
    const signal = AbortSignal.timeout(TAKEOVER_MS);
    const json = { operator, ...(holdSeconds === undefined ? {} : { holdSeconds }) };
    return (await this.json(`POST ${path}`, path, takenSchema, { method: "POST", json, signal })).taken;
  }

  /**
   * Renews the hold of the takeover that began at `since`: its new expiry. A takeover already over (handed back, or
   * its hold ran out) is an error of status 409.
   */
  async renew(computer: string, since: string, holdSeconds?: number): Promise<TakeoverHold> {
    const path = takeoverPath(computer);
    const signal = AbortSignal.timeout(TAKEOVER_MS);
    const json = { since, ...(holdSeconds === undefined ? {} : { holdSeconds }) };
    return (await this.json(`PUT ${path}`, path, takenSchema, { method: "PUT", json, signal })).taken;
  }

  /** Hands a computer back to its agent. */
  async handBack(computer: string): Promise<void> {
    const path = takeoverPath(computer);
    await (
      await this.ok(`DELETE ${path}`, path, { method: "DELETE", signal: AbortSignal.timeout(TAKEOVER_MS) })
    ).text();
  }

  /** Every computer's takeover state. */
  async takeovers(): Promise<TakeoverListing> {
    const signal = AbortSignal.timeout(TAKEOVER_MS);
    return (await this.json(`GET ${TAKEOVERS_PATH}`, TAKEOVERS_PATH, takeoversSchema, { signal })) as TakeoverListing;
  }
}

/** How long a takeover operation may take. */
const TAKEOVER_MS = 10_000;

/** The client of the gateway at `url` (a dialable URL) with the control token. */
export function gatewayClient(access: { gatewayUrl: string; controlToken: string }): GatewayClient {
  return new GatewayClient(access.gatewayUrl, access.controlToken);
}
