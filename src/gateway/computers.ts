// /computers/<name>/cdp, /computers/<name>/proxy-log and /computers/<name>/connections/end: a computer's
// Chrome DevTools endpoint, its site proxy's log, and ending every connection that proxy holds (so the log is
// complete between episodes), through the gateway (control token checked by the caller).
//
// Both live behind the computer's site-proxy control listener, which requires
// `Authorization: Bearer <computerControlToken(control token, computer)>`: the gateway sends
// that on every request and upgrade there, in place of whatever the client sent.
//
// Chrome answers its DevTools HTTP endpoint only for `Host: localhost` (or an address),
// so that is the Host sent upstream. The WebSocket URLs in its JSON name Chrome's own
// address; they are rewritten to this gateway's, under /computers/<name>/cdp, so a client
// connects through the gateway with no further knowledge.
import type { IncomingMessage, ServerResponse } from "node:http";
import type http from "node:http";
import type { Duplex } from "node:stream";
import { bearer, computerControlToken } from "../protocol/auth";
import { takenOverMessage } from "../protocol/takeover";
import type { AgentConnections } from "./agent-cdp";
import type { GatewayConfig } from "./config";
import { getSmall, requestSmall } from "./fetch";
import type { Forwarder, Upstream } from "./proxy";
import { replyJson } from "../service-kit/reply";
import { cdpPath, type ComputerOp } from "../protocol/gateway-paths";
import type { Refuse } from "../service-kit/reply";
import type { Takeovers } from "./takeovers";

const CHROME_HOST = "localhost";
const DEVTOOLS_JSON = new Set(["/json", "/json/", "/json/list", "/json/list/", "/json/version", "/json/version/"]);

type Computer = GatewayConfig["computers"][string];

/** The public base of a computer's CDP route as the client reached it, e.g. `127.0.0.1:8080/computers/agent/cdp`. */
function cdpBase(req: IncomingMessage, computer: string): { scheme: "ws" | "wss"; base: string } {
  const host = String(req.headers["x-forwarded-host"] ?? req.headers.host ?? "localhost")
    .split(",")[0]
    .trim();
  const proto = String(req.headers["x-forwarded-proto"] ?? "http")
    .split(",")[0]
    .trim();
  return { scheme: proto === "https" ? "wss" : "ws", base: `${host}${cdpPath(computer)}` };
}

/** Rewrites DevTools' WebSocket URLs (in /json/version and /json/list) to go through the gateway. */
export function rewriteDevtoolsJson(value: unknown, scheme: string, base: string): unknown {
  if (Array.isArray(value)) return value.map((item) => rewriteDevtoolsJson(item, scheme, base));
  if (value === null || typeof value !== "object") return value;
  const out: Record<string, unknown> = {};
  for (const [key, field] of Object.entries(value)) {
    if (key === "webSocketDebuggerUrl" && typeof field === "string" && URL.canParse(field)) {
      const url = new URL(field);
      out[key] = `${scheme}://${base}${url.pathname}${url.search}`;
    } else if (key === "devtoolsFrontendUrl" && typeof field === "string") {
      out[key] = field.replace(/([?&])wss?=[^&]*?\/devtools\//, `$1${scheme}=${base}/devtools/`);
    } else {
      out[key] = rewriteDevtoolsJson(field, scheme, base);
    }
  }
  return out;
}

export class Computers {
  constructor(
    private readonly computers: GatewayConfig["computers"],
    private readonly controlToken: string,
    private readonly forwarder: Forwarder,
    private readonly agent: http.Agent,
    private readonly takeovers: Takeovers,
    private readonly agentConnections: AgentConnections,
  ) {}

  private find(name: string): Computer | undefined {
    return Object.hasOwn(this.computers, name) ? this.computers[name] : undefined;
  }

  /** What the computer's site-proxy control listener requires. */
  private authorization(name: string): string {
    return bearer(computerControlToken(this.controlToken, name));
  }

  /**
   * Tells the computer's site proxy whether a person holds it, so its request log marks the person's exchanges;
   * rejects when the proxy did not take it. Nothing to tell when the computer keeps no request log.
   */
  async tellPersonHolds(name: string, held: boolean): Promise<void> {
    const url = this.find(name)?.person;
    if (url === undefined) return;
    const answer = await requestSmall(held ? "PUT" : "DELETE", new URL(url), {
      timeoutMs: 10_000,
      agent: this.agent,
      headers: { authorization: this.authorization(name) },
    });
    if (answer.status !== 204) throw new Error(`the site proxy answered ${answer.status}`);
  }

  private cdpUpstream(name: string, computer: Computer): Upstream {
    return { url: computer.cdp, label: { computer: name }, host: CHROME_HOST, authorization: this.authorization(name) };
  }

  async handle(
    req: IncomingMessage,
    res: ServerResponse,
    name: string,
    op: ComputerOp,
    rest: string,
    refuse: Refuse,
    asAgent = false,
  ): Promise<void> {
    const computer = this.find(name);
    if (!computer) return refuse(404, { error: "unknown computer", computer: name });
    const hold = this.takeovers.state(name).taken;
    // DevTools' HTTP endpoint acts too (/json/new opens a tab, /json/activate and /json/close): during a takeover an
    // agent reads the JSON listings alone.
    const reading = req.method === "GET" && DEVTOOLS_JSON.has(rest.split("?")[0]);
    if (asAgent && hold !== undefined && !reading)
      return refuse(409, {
        error: "taken over",
        detail: takenOverMessage(name, `${req.method} ${rest.split("?")[0]}`, hold),
      });
    if (op === "end-connections") {
      if (!computer.endConnections)
        return refuse(404, { error: "this computer's site proxy cannot end its connections", computer: name });
      if (req.method !== "POST") return refuse(405, { error: "method not allowed" }, undefined, { Allow: "POST" });
      // `rest` is the query alone (`?episode=<n>`), passed on as the client wrote it.
      return this.forwarder.forward(
        req,
        res,
        { url: computer.endConnections, label: { computer: name }, authorization: this.authorization(name) },
        rest,
      );
    }
    if (op === "proxy-log") {
      if (!computer.proxyLog) return refuse(404, { error: "no proxy log configured", computer: name });
      if (req.method !== "GET" && req.method !== "HEAD")
        return refuse(405, { error: "method not allowed" }, undefined, { Allow: "GET, HEAD" });
      const upstream = { url: computer.proxyLog, label: { computer: name }, authorization: this.authorization(name) };
      return this.forwarder.forward(req, res, upstream, computer.proxyLog.search);
    }
    const path = rest.split("?")[0];
    if (req.method === "GET" && DEVTOOLS_JSON.has(path)) {
      const url = new URL(computer.cdp.pathname.replace(/\/+$/, "") + rest, computer.cdp);
      let fetched;
      try {
        fetched = await getSmall(url, {
          timeoutMs: 10_000,
          agent: this.agent,
          headers: { host: CHROME_HOST, accept: "application/json", authorization: this.authorization(name) },
        });
      } catch (error) {
        return replyJson(res, 502, { error: "upstream failed", computer: name, detail: (error as Error).message });
      }
      let json: unknown;
      try {
        json = JSON.parse(fetched.body.toString("utf8"));
      } catch {
        return replyJson(res, 502, {
          error: "DevTools answered with something other than JSON",
          computer: name,
          status: fetched.status,
        });
      }
      const { scheme, base } = cdpBase(req, name);
      return replyJson(res, fetched.status, rewriteDevtoolsJson(json, scheme, base));
    }
    this.forwarder.forward(req, res, this.cdpUpstream(name, computer), rest);
  }

  upgrade(
    req: IncomingMessage,
    socket: Duplex,
    head: Buffer,
    name: string,
    op: ComputerOp,
    rest: string,
    refuse: Refuse,
    asAgent = false,
  ): void {
    const computer = this.find(name);
    if (!computer || op !== "cdp") return refuse(404, { error: "unknown computer", computer: name });
    if (!asAgent) return this.forwarder.upgrade(req, socket, head, this.cdpUpstream(name, computer), rest);
    // An agent's connection is relayed message by message, so it can be held during a takeover (agent-cdp.ts).
    const url = new URL(computer.cdp.pathname.replace(/\/+$/, "") + rest, computer.cdp);
    url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
    this.agentConnections.relay(req, socket, head, name, url, {
      Host: CHROME_HOST,
      Authorization: this.authorization(name),
    });
  }
}
