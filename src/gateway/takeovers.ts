// Which computers a person holds, and which agents asked for one: the state every worker of the gateway acts on.
//
// With cluster workers (run.ts), a change made in one worker (a take, a hand-back, an agent's request) is sent to the
// primary, which keeps the whole state and sends each change to every worker, a new one included; each worker applies
// it and tells its own agent connections. So an agent held on any worker is held, and released, by a change made on
// any other. With one worker, the changes stay in the process.
import cluster from "node:cluster";
import type { IncomingMessage, ServerResponse } from "node:http";
import { MAX_OPERATOR_CHARS, type TakeoverHold, type TakeoverListing, type TakeoverState } from "../protocol/takeover";
import type { Logger } from "./log";
import { replyJson, type Refuse } from "./reply";

/** What a worker sends the primary, and the primary every worker: one computer's new state. */
export interface TakeoverMessage {
  event: "takeover-state";
  computer: string;
  state: TakeoverState;
}

export function isTakeoverMessage(value: unknown): value is TakeoverMessage {
  return (
    typeof value === "object" &&
    value !== null &&
    (value as { event?: unknown }).event === "takeover-state" &&
    typeof (value as { computer?: unknown }).computer === "string"
  );
}

/** Called with a computer's state before and after each change, wherever the change was made. */
export type TakeoverListener = (computer: string, before: TakeoverState, after: TakeoverState) => void;

export class Takeovers {
  private readonly states = new Map<string, TakeoverState>();
  private readonly listeners: TakeoverListener[] = [];
  private readonly shared: boolean;

  constructor(private readonly computers: readonly string[]) {
    this.shared = cluster.isWorker && typeof process.send === "function";
    if (this.shared) {
      const onMessage = (message: unknown) => {
        if (isTakeoverMessage(message)) this.apply(message.computer, message.state);
      };
      process.on("message", onMessage);
      this.detach = () => process.off("message", onMessage);
    }
  }

  detach: () => void = () => undefined;

  has(computer: string): boolean {
    return this.computers.includes(computer);
  }

  state(computer: string): TakeoverState {
    return this.states.get(computer) ?? {};
  }

  listing(): TakeoverListing {
    return { computers: Object.fromEntries(this.computers.map((name) => [name, this.state(name)])) };
  }

  onChange(listener: TakeoverListener): void {
    this.listeners.push(listener);
  }

  /** Sets a computer's state here and, with workers, in every other worker (through the primary). */
  set(computer: string, state: TakeoverState): void {
    this.apply(computer, state);
    if (this.shared) process.send!({ event: "takeover-state", computer, state } satisfies TakeoverMessage);
  }

  private apply(computer: string, state: TakeoverState): void {
    if (!this.has(computer)) return;
    const before = this.state(computer);
    if (state.taken === undefined && state.request === undefined) this.states.delete(computer);
    else this.states.set(computer, state);
    for (const listener of this.listeners) listener(computer, before, state);
  }
}

/**
 * The primary's side: keeps every computer's last state and sends each change from a worker to every other worker
 * (the sender applied it already), and the whole state to a new worker.
 */
export class TakeoverRelay {
  private readonly states = new Map<string, TakeoverState>();

  fromWorker<W extends { send(message: unknown): unknown }>(message: unknown, sender: W, workers: Iterable<W>): void {
    if (!isTakeoverMessage(message)) return;
    this.states.set(message.computer, message.state);
    for (const worker of workers) if (worker !== sender) worker.send(message);
  }

  toNewWorker(worker: { send(message: unknown): unknown }): void {
    for (const [computer, state] of this.states)
      worker.send({ event: "takeover-state", computer, state } satisfies TakeoverMessage);
  }
}

const MAX_BODY_BYTES = 4096;

function readSmallBody(req: IncomingMessage): Promise<string | undefined> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on("data", (chunk: Buffer) => {
      size += chunk.length;
      if (size <= MAX_BODY_BYTES) chunks.push(chunk);
    });
    req.on("end", () => resolve(size > MAX_BODY_BYTES ? undefined : Buffer.concat(chunks).toString("utf8")));
    req.on("error", () => resolve(undefined));
  });
}

/** The operator named in a take's body, or why the body names none. */
function operatorOf(body: string): { operator: string } | { problem: string } {
  let value: unknown;
  try {
    value = body.trim() === "" ? {} : JSON.parse(body);
  } catch {
    return { problem: 'the body must be JSON: {"operator": "<name>"}' };
  }
  const operator = (value as { operator?: unknown } | null)?.operator;
  if (
    typeof operator !== "string" ||
    !/^[\x21-\x7e][\x20-\x7e]*$/.test(operator) ||
    operator.length > MAX_OPERATOR_CHARS
  )
    return {
      problem: `operator must be 1 to ${MAX_OPERATOR_CHARS} printable ASCII characters, starting with a visible one`,
    };
  return { operator: operator.trimEnd() };
}

/** Tells a computer's site proxy whether a person holds it (its request log marks the person's exchanges). */
export type TellPersonHolds = (computer: string, held: boolean) => Promise<void>;

/**
 * `/takeovers/v1/computers/<computer>` (control token checked by the caller): GET its state, POST `{operator}` to take
 * it (409 when a person holds it already), DELETE to hand it back (409 when nobody holds it). A take is refused (502)
 * when the computer's site proxy cannot be told: the person's exchanges would go into its request log unmarked, with
 * what they typed.
 */
export async function serveTakeover(
  req: IncomingMessage,
  res: ServerResponse,
  computer: string,
  takeovers: Takeovers,
  tellProxy: TellPersonHolds,
  refuse: Refuse,
  log: Logger,
): Promise<void> {
  if (!takeovers.has(computer)) return refuse(404, { error: "unknown computer", computer });
  const state = takeovers.state(computer);
  if (req.method === "GET" || req.method === "HEAD") return replyJson(res, 200, state);
  if (req.method === "POST") {
    const body = await readSmallBody(req);
    if (body === undefined) return refuse(413, { error: `the body must be at most ${MAX_BODY_BYTES} bytes` });
    const named = operatorOf(body);
    if ("problem" in named) return refuse(400, { error: "bad takeover", detail: named.problem });
    if (state.taken !== undefined)
      return refuse(409, { error: "a person holds this computer already", computer, taken: state.taken });
    try {
      await tellProxy(computer, true);
    } catch (error) {
      return refuse(502, {
        error: "the computer's site proxy could not be told that a person holds it; nothing was taken",
        computer,
        detail: (error as Error).message,
      });
    }
    // Another take may have come in while the proxy was told: the first one holds it.
    const now = takeovers.state(computer);
    if (now.taken !== undefined)
      return refuse(409, { error: "a person holds this computer already", computer, taken: now.taken });
    const taken: TakeoverHold = {
      operator: named.operator,
      since: new Date().toISOString(),
      ...(now.request !== undefined ? { reason: now.request.reason } : {}),
    };
    takeovers.set(computer, { ...now, taken });
    log("taken-over", { computer, operator: taken.operator, reason: taken.reason });
    return replyJson(res, 200, { computer, taken });
  }
  if (req.method === "DELETE") {
    req.resume();
    if (state.taken === undefined) return refuse(409, { error: "no person holds this computer", computer });
    const until = new Date().toISOString();
    takeovers.set(computer, {});
    log("handed-back", { computer, operator: state.taken.operator, since: state.taken.since, until });
    // Told after: until the proxy hears it, the agent's exchanges are marked the person's, never the reverse.
    await tellProxy(computer, false).catch((error: Error) =>
      log("person-mark-stuck", { computer, detail: error.message }),
    );
    return replyJson(res, 200, { computer, handedBack: { ...state.taken, until } });
  }
  req.resume();
  return refuse(405, { error: "method not allowed" }, undefined, { Allow: "GET, HEAD, POST, DELETE" });
}
