// An agent's DevTools connection (admitted by its computer's agent token) is not a byte pipe, as the runner's is: the
// gateway ends the WebSocket here and relays each message to the computer's DevTools on a WebSocket of its own, so it
// can hold the agent while a person holds the computer (takeovers.ts):
// - a command that acts (anything answersDuringTakeover does not name) is answered at once with a CDP error naming
//   the takeover, never passed on and never dropped; a read passes;
// - the connection gets TAKEN_OVER_EVENT when a person takes the computer and HAND_BACK_EVENT when the person hands
//   it back, after which its commands act again;
// - REQUEST_HUMAN_METHOD asks for a person: the request shows in the computer's state (status, watch, ls) and is
//   answered when a person hands the computer back, or with an error at its timeout. The state it writes is that of
//   the computer the connection was admitted to, the only one the agent token opens.
import type { IncomingMessage } from "node:http";
import { randomUUID } from "node:crypto";
import type { Duplex } from "node:stream";
import { WebSocket, WebSocketServer, type RawData } from "ws";
import {
  answersDuringTakeover,
  DEFAULT_REQUEST_SECONDS,
  HAND_BACK_EVENT,
  MAX_REASON_CHARS,
  MAX_REQUEST_SECONDS,
  REQUEST_HUMAN_METHOD,
  REQUEST_TIMED_OUT_ERROR_CODE,
  TAKEN_OVER_ERROR_CODE,
  TAKEN_OVER_EVENT,
  takenOverMessage,
  type HandBackEvent,
  type TakenOverEvent,
} from "../protocol/takeover";
import type { Logger } from "../service-kit/log";
import { replyJsonOnSocket } from "../service-kit/reply";
import type { Takeovers } from "./takeovers";

/**
 * Commands never passed on from an agent, whoever holds the computer. `Target.setRemoteLocations` has the browser
 * process itself connect to a host and port of the caller's choosing to discover DevTools targets there: a way past
 * the site proxy (the browser's own connections do not go through it), and onto DevTools endpoints on the computer's
 * loopback that no agent may reach, such as the standby Chromium the next episode will get.
 */
const NEVER_FROM_AN_AGENT = new Set(["Target.setRemoteLocations"]);

/** Chrome's own limit on a DevTools message (a full-page screenshot fits well within it). */
const MAX_MESSAGE_BYTES = 256 * 1024 * 1024;
/** JSON-RPC's code for bad params. */
const INVALID_PARAMS = -32602;
const METHOD_NOT_FOUND = -32601;

interface Command {
  /** The whole message as parsed. */
  message: Record<string, unknown>;
  id: unknown;
  method: string;
  params?: Record<string, unknown>;
  sessionId?: string;
}

function asCommand(text: string): Command | undefined {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (typeof value !== "object" || value === null) return undefined;
  const message = value as Record<string, unknown>;
  const { id, method, params, sessionId } = message;
  if (typeof method !== "string") return undefined;
  return {
    message,
    id,
    method,
    params: typeof params === "object" && params !== null ? (params as Record<string, unknown>) : undefined,
    sessionId: typeof sessionId === "string" ? sessionId : undefined,
  };
}

/** A request for a person waiting on one connection. */
interface Waiting {
  command: Command;
  requestId: string;
  timer: NodeJS.Timeout;
}

class AgentConnection {
  private readonly waiting = new Set<Waiting>();

  constructor(
    readonly computer: string,
    private readonly client: WebSocket,
    private readonly takeovers: Takeovers,
    private readonly log: Logger,
  ) {}

  send(message: Record<string, unknown>): void {
    if (this.client.readyState === WebSocket.OPEN) this.client.send(JSON.stringify(message));
  }

  private answer(command: Command, body: { result: unknown } | { error: { code: number; message: string } }): void {
    this.send({
      id: command.id,
      ...body,
      ...(command.sessionId !== undefined ? { sessionId: command.sessionId } : {}),
    });
  }

  /** Undefined when `command` goes on to DevTools; otherwise it has been answered here. */
  intercept(command: Command): "answered" | undefined {
    if (command.method === REQUEST_HUMAN_METHOD) {
      this.requestHuman(command);
      return "answered";
    }
    if (NEVER_FROM_AN_AGENT.has(command.method)) {
      this.answer(command, {
        error: { code: METHOD_NOT_FOUND, message: `${command.method} is not open to an agent: the gateway refuses it` },
      });
      this.log("agent-command-refused", { computer: this.computer, method: command.method });
      return "answered";
    }
    if (command.method.startsWith("Multienv.")) {
      this.answer(command, { error: { code: METHOD_NOT_FOUND, message: `${command.method} is not a command` } });
      return "answered";
    }
    const hold = this.takeovers.state(this.computer).taken;
    if (hold === undefined || answersDuringTakeover(command.method)) return undefined;
    this.answer(command, {
      error: { code: TAKEN_OVER_ERROR_CODE, message: takenOverMessage(this.computer, command.method, hold) },
    });
    return "answered";
  }

  private requestHuman(command: Command): void {
    const reason = command.params?.reason;
    const timeout = command.params?.timeoutSeconds ?? DEFAULT_REQUEST_SECONDS;
    if (typeof reason !== "string" || reason.trim() === "")
      return this.answer(command, {
        error: { code: INVALID_PARAMS, message: `${REQUEST_HUMAN_METHOD}: params.reason must be a non-empty string` },
      });
    if (typeof timeout !== "number" || !Number.isFinite(timeout) || timeout <= 0 || timeout > MAX_REQUEST_SECONDS)
      return this.answer(command, {
        error: {
          code: INVALID_PARAMS,
          message: `${REQUEST_HUMAN_METHOD}: params.timeoutSeconds must be a number of seconds in (0, ${MAX_REQUEST_SECONDS}]`,
        },
      });
    const now = Date.now();
    const request = {
      id: randomUUID(),
      reason: reason.slice(0, MAX_REASON_CHARS),
      since: new Date(now).toISOString(),
      deadline: new Date(now + timeout * 1000).toISOString(),
    };
    const waiting: Waiting = {
      command,
      requestId: request.id,
      timer: setTimeout(() => this.timedOut(waiting, timeout), timeout * 1000),
    };
    this.waiting.add(waiting);
    void this.takeovers.change(this.computer, { op: "ask", request });
    this.log("human-requested", { computer: this.computer, reason: request.reason, timeoutSeconds: timeout });
  }

  private timedOut(waiting: Waiting, seconds: number): void {
    this.waiting.delete(waiting);
    this.answer(waiting.command, {
      error: {
        code: REQUEST_TIMED_OUT_ERROR_CODE,
        message: `${REQUEST_HUMAN_METHOD}: no person took computer ${this.computer} over and handed it back within ${seconds} s`,
      },
    });
    this.withdraw(waiting);
    this.log("human-request-timed-out", { computer: this.computer, timeoutSeconds: seconds });
  }

  /** Clears the computer's request when it is still this one's and no person holds the computer. */
  private withdraw(waiting: Waiting): void {
    void this.takeovers.change(this.computer, { op: "withdraw", requestId: waiting.requestId });
  }

  takenOver(event: TakenOverEvent): void {
    this.send({ method: TAKEN_OVER_EVENT, params: event });
  }

  handedBack(event: HandBackEvent): void {
    for (const waiting of this.waiting) {
      clearTimeout(waiting.timer);
      this.answer(waiting.command, { result: event });
    }
    this.waiting.clear();
    this.send({ method: HAND_BACK_EVENT, params: event });
  }

  closed(): void {
    for (const waiting of this.waiting) {
      clearTimeout(waiting.timer);
      this.withdraw(waiting);
    }
    this.waiting.clear();
  }
}

export class AgentConnections {
  private readonly server = new WebSocketServer({
    noServer: true,
    perMessageDeflate: false,
    maxPayload: MAX_MESSAGE_BYTES,
  });
  private readonly open = new Set<AgentConnection>();

  constructor(
    private readonly takeovers: Takeovers,
    private readonly log: Logger,
  ) {
    takeovers.onChange((computer, before, after, ended) => {
      const connections = [...this.open].filter((connection) => connection.computer === computer);
      if (before.taken === undefined && after.taken !== undefined) {
        const event = { computer, operator: after.taken.operator, since: after.taken.since };
        for (const connection of connections) connection.takenOver(event);
      } else if (before.taken !== undefined && after.taken === undefined) {
        const event = {
          computer,
          operator: before.taken.operator,
          since: before.taken.since,
          until: new Date().toISOString(),
          ended: ended ?? "handed-back",
        };
        for (const connection of connections) connection.handedBack(event);
      }
    });
  }

  /**
   * Opens `upstream` (the computer's DevTools WebSocket, with `headers`), then completes the agent's upgrade and
   * relays between the two. An upstream that cannot be opened is answered 502 on the agent's socket.
   */
  relay(
    req: IncomingMessage,
    socket: Duplex,
    head: Buffer,
    computer: string,
    upstream: URL,
    headers: Record<string, string>,
  ): void {
    const devtools = new WebSocket(upstream, {
      headers,
      perMessageDeflate: false,
      maxPayload: MAX_MESSAGE_BYTES,
      handshakeTimeout: 10_000,
    });
    const onClientGone = () => devtools.terminate();
    socket.once("close", onClientGone);
    devtools.once("unexpected-response", (_request, response) => {
      socket.off("close", onClientGone);
      response.resume();
      devtools.terminate();
      replyJsonOnSocket(socket, 502, { error: "DevTools refused the upgrade", computer, status: response.statusCode });
    });
    devtools.once("error", (error) => {
      socket.off("close", onClientGone);
      if (devtools.readyState !== WebSocket.CLOSED) devtools.terminate();
      if (socket.writable && !socket.destroyed)
        replyJsonOnSocket(socket, 502, { error: "upstream failed", computer, detail: error.message });
    });
    devtools.once("open", () => {
      socket.off("close", onClientGone);
      devtools.removeAllListeners("error");
      if (socket.destroyed) return void devtools.terminate();
      this.server.handleUpgrade(req, socket, head, (client) => this.wire(computer, client, devtools));
    });
  }

  private wire(computer: string, client: WebSocket, devtools: WebSocket): void {
    const connection = new AgentConnection(computer, client, this.takeovers, this.log);
    this.open.add(connection);
    const hold = this.takeovers.state(computer).taken;
    if (hold !== undefined) connection.takenOver({ computer, operator: hold.operator, since: hold.since });
    client.on("message", (data: RawData, isBinary: boolean) => {
      const command = isBinary ? undefined : asCommand(data.toString());
      if (command === undefined) {
        // What the gateway cannot read as a command, DevTools might (its parser is not JSON.parse): passed on only
        // while the agent acts freely; during a takeover the connection is closed with the reason.
        const hold = this.takeovers.state(computer).taken;
        if (hold !== undefined) return client.close(1008, `unreadable command during a takeover of ${computer}`);
        if (devtools.readyState === WebSocket.OPEN) devtools.send(data, { binary: isBinary });
        return;
      }
      if (connection.intercept(command) === "answered") return;
      // The command as the gateway read it, so DevTools acts on the method that was checked (a repeated key, which
      // parsers settle differently, is settled here once).
      if (devtools.readyState === WebSocket.OPEN) devtools.send(JSON.stringify(command.message));
    });
    devtools.on("message", (data: RawData, isBinary: boolean) => {
      if (client.readyState === WebSocket.OPEN) client.send(data, { binary: isBinary });
    });
    const end = () => {
      if (!this.open.delete(connection)) return;
      connection.closed();
      client.terminate();
      devtools.terminate();
    };
    for (const side of [client, devtools]) {
      side.on("close", end);
      side.on("error", end);
    }
  }
}
