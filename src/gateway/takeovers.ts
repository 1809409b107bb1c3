// Which computers a person holds, and which agents asked for one: the state every worker of the gateway acts on.
//
// Every change (a take, a hand-back, an agent's request and its withdrawal) is decided against the state where it is
// kept, by `decideChange`: in the process with one worker; with cluster workers (run.ts), by the primary, which keeps
// the whole state, sends each new state to every worker (a new one included) and answers the worker that asked. So two
// takes of one computer on two workers at the same moment are decided one after the other, in one place: exactly one
// wins, and the other is refused naming who holds it. Each worker applies the states it is sent and tells its own
// agent connections, so an agent held on any worker is held, and released, by a change made on any other.
import cluster from "node:cluster";
import type { IncomingMessage, ServerResponse } from "node:http";
import {
  DEFAULT_HOLD_SECONDS,
  MAX_HOLD_SECONDS,
  MAX_OPERATOR_CHARS,
  MIN_HOLD_SECONDS,
  type HumanRequest,
  type TakeoverEnd,
  type TakeoverHold,
  type TakeoverListing,
  type TakeoverState,
} from "../protocol/takeover";
import type { Logger } from "../service-kit/log";
import { replyJson, type Refuse } from "../service-kit/reply";

/** A change asked of one computer's state. */
export type TakeoverChange =
  /** A person takes the computer until `expires` unless renewed: refused when one holds it already. */
  | { op: "take"; operator: string; since: string; expires: string }
  /** The holder of the takeover begun at `since` keeps it until `expires`: refused when that takeover is over. */
  | { op: "renew"; since: string; expires: string }
  /** The takeover begun at `since` ends, its hold run out at `at`: refused when renewed past `at`, or over. */
  | { op: "expire"; since: string; at: string }
  /** The person hands it back (the agent's request, if any, is answered with it): refused when nobody holds it. */
  | { op: "handBack" }
  /** The agent asks for a person. */
  | { op: "ask"; request: HumanRequest }
  /** The agent's request ends unanswered: only while it is still that request and nobody holds the computer. */
  | { op: "withdraw"; requestId: string };

/** What a change did: the state it met, and the state it left when it was made. */
export type ChangeAnswer =
  { made: true; before: TakeoverState; after: TakeoverState } | { made: false; before: TakeoverState };

/** Decides `change` against `state`, the computer's state where it is kept. Pure. */
export function decideChange(state: TakeoverState, change: TakeoverChange): ChangeAnswer {
  const refused = { made: false as const, before: state };
  switch (change.op) {
    case "take": {
      if (state.taken !== undefined) return refused;
      const taken: TakeoverHold = {
        operator: change.operator,
        since: change.since,
        ...(state.request !== undefined ? { reason: state.request.reason } : {}),
        expires: change.expires,
      };
      return { made: true, before: state, after: { ...state, taken } };
    }
    case "handBack":
      return state.taken === undefined ? refused : { made: true, before: state, after: {} };
    case "renew":
      return state.taken?.since !== change.since
        ? refused
        : { made: true, before: state, after: { ...state, taken: { ...state.taken, expires: change.expires } } };
    case "expire": {
      const expires = state.taken?.expires;
      return state.taken?.since !== change.since || expires === undefined || Date.parse(expires) > Date.parse(change.at)
        ? refused
        : { made: true, before: state, after: {} };
    }
    case "ask":
      return { made: true, before: state, after: { ...state, request: change.request } };
    case "withdraw":
      return state.request?.id !== change.requestId || state.taken !== undefined
        ? refused
        : { made: true, before: state, after: {} };
  }
}

/** The primary's to every worker: one computer's new state (and, when it ends a takeover, how). */
export interface TakeoverMessage {
  event: "takeover-state";
  computer: string;
  state: TakeoverState;
  ended?: TakeoverEnd;
}

/** How a change that was made ended a takeover, if it did. */
function endOf(change: TakeoverChange): TakeoverEnd | undefined {
  return change.op === "handBack" ? "handed-back" : change.op === "expire" ? "hold-expired" : undefined;
}

/** A worker's to the primary: a change to decide. */
interface ChangeMessage {
  event: "takeover-change";
  id: number;
  computer: string;
  change: TakeoverChange;
}

/** The primary's to the worker that asked, after the new state (if any) was sent. */
interface AnswerMessage {
  event: "takeover-answer";
  id: number;
  answer: ChangeAnswer;
}

function hasEvent(value: unknown, event: string): boolean {
  return typeof value === "object" && value !== null && (value as { event?: unknown }).event === event;
}

export function isTakeoverMessage(value: unknown): value is TakeoverMessage {
  return hasEvent(value, "takeover-state") && typeof (value as { computer?: unknown }).computer === "string";
}

function isChangeMessage(value: unknown): value is ChangeMessage {
  return (
    hasEvent(value, "takeover-change") &&
    typeof (value as { id?: unknown }).id === "number" &&
    typeof (value as { computer?: unknown }).computer === "string"
  );
}

function isAnswerMessage(value: unknown): value is AnswerMessage {
  return hasEvent(value, "takeover-answer") && typeof (value as { id?: unknown }).id === "number";
}

/**
 * Called with a computer's state before and after each change, wherever the change was made, and how a takeover ended
 * when the change ended one.
 */
export type TakeoverListener = (
  computer: string,
  before: TakeoverState,
  after: TakeoverState,
  ended?: TakeoverEnd,
) => void;

/** Called, on the worker whose expiry was made alone, when a hold ran out: the takeover it ended. */
export type ExpiryListener = (computer: string, held: TakeoverHold) => void;

export class Takeovers {
  private readonly states = new Map<string, TakeoverState>();
  private readonly listeners: TakeoverListener[] = [];
  private readonly expiryListeners: ExpiryListener[] = [];
  /** Each held computer's timer for the end of its hold. */
  private readonly holdTimers = new Map<string, NodeJS.Timeout>();
  private readonly shared: boolean;
  private readonly pending = new Map<number, (answer: ChangeAnswer) => void>();
  private nextId = 0;

  constructor(private readonly computers: readonly string[]) {
    this.shared = cluster.isWorker && typeof process.send === "function";
    if (this.shared) {
      const onMessage = (message: unknown) => {
        if (isTakeoverMessage(message)) this.apply(message.computer, message.state, message.ended);
        else if (isAnswerMessage(message)) {
          const answered = this.pending.get(message.id);
          this.pending.delete(message.id);
          answered?.(message.answer);
        }
      };
      process.on("message", onMessage);
      this.detachMessages = () => process.off("message", onMessage);
    }
  }

  private detachMessages: () => void = () => undefined;

  detach(): void {
    this.detachMessages();
    for (const timer of this.holdTimers.values()) clearTimeout(timer);
    this.holdTimers.clear();
  }

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

  onExpired(listener: ExpiryListener): void {
    this.expiryListeners.push(listener);
  }

  /**
   * Asks for `change`, decided where the state is kept (here, or the primary). Resolves once the new state is applied
   * here too.
   */
  change(computer: string, change: TakeoverChange): Promise<ChangeAnswer> {
    if (!this.shared) {
      const answer = decideChange(this.state(computer), change);
      if (answer.made) this.apply(computer, answer.after, endOf(change));
      return Promise.resolve(answer);
    }
    const id = ++this.nextId;
    return new Promise((resolve) => {
      this.pending.set(id, resolve);
      process.send!({ event: "takeover-change", id, computer, change } satisfies ChangeMessage);
    });
  }

  private apply(computer: string, state: TakeoverState, ended?: TakeoverEnd): void {
    if (!this.has(computer)) return;
    const before = this.state(computer);
    if (state.taken === undefined && state.request === undefined) this.states.delete(computer);
    else this.states.set(computer, state);
    this.watchHold(computer, state.taken);
    for (const listener of this.listeners) listener(computer, before, state, ended);
  }

  /**
   * Ends the takeover when its hold runs out unrenewed. Every worker keeps the timer; the expiry is decided where the
   * state is kept, so of the workers that ask, one ends it (and tells its expiry listeners), and a renewal made first
   * wins over all of them.
   */
  private watchHold(computer: string, hold: TakeoverHold | undefined): void {
    clearTimeout(this.holdTimers.get(computer));
    this.holdTimers.delete(computer);
    if (hold?.expires === undefined) return;
    const { since } = hold;
    const timer = setTimeout(
      () => {
        this.holdTimers.delete(computer);
        void this.change(computer, { op: "expire", since, at: new Date().toISOString() }).then((answer) => {
          if (answer.made && answer.before.taken !== undefined)
            for (const listener of this.expiryListeners) listener(computer, answer.before.taken);
        });
      },
      Math.max(0, Date.parse(hold.expires) - Date.now()),
    );
    timer.unref();
    this.holdTimers.set(computer, timer);
  }
}

/**
 * The primary's side: keeps every computer's state, decides each worker's change against it, sends a new state to
 * every worker (the one that asked included, before its answer), and the whole state to a new worker.
 */
export class TakeoverRelay {
  private readonly states = new Map<string, TakeoverState>();

  fromWorker<W extends { send(message: unknown): unknown }>(message: unknown, sender: W, workers: Iterable<W>): void {
    if (!isChangeMessage(message)) return;
    const answer = decideChange(this.states.get(message.computer) ?? {}, message.change);
    if (answer.made) {
      this.states.set(message.computer, answer.after);
      const ended = endOf(message.change);
      const state: TakeoverMessage = {
        event: "takeover-state",
        computer: message.computer,
        state: answer.after,
        ...(ended !== undefined ? { ended } : {}),
      };
      for (const worker of workers) worker.send(state);
    }
    sender.send({ event: "takeover-answer", id: message.id, answer } satisfies AnswerMessage);
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

/** The operator named in a take's body and how long it holds, or why the body is not a take. */
function takeOf(body: string): { operator: string; holdSeconds: number } | { problem: string } {
  let value: unknown;
  try {
    value = body.trim() === "" ? {} : JSON.parse(body);
  } catch {
    return { problem: 'the body must be JSON: {"operator": "<name>", "holdSeconds": <seconds>}' };
  }
  const holdSeconds = (value as { holdSeconds?: unknown } | null)?.holdSeconds ?? DEFAULT_HOLD_SECONDS;
  if (
    typeof holdSeconds !== "number" ||
    !Number.isInteger(holdSeconds) ||
    holdSeconds < MIN_HOLD_SECONDS ||
    holdSeconds > MAX_HOLD_SECONDS
  )
    return {
      problem: `holdSeconds must be a whole number of seconds from ${MIN_HOLD_SECONDS} to ${MAX_HOLD_SECONDS} (default ${DEFAULT_HOLD_SECONDS}): how long the take holds unless renewed`,
    };
  const operator = (value as { operator?: unknown } | null)?.operator;
  if (
    typeof operator !== "string" ||
    !/^[\x21-\x7e][\x20-\x7e]*$/.test(operator) ||
    operator.length > MAX_OPERATOR_CHARS
  )
    return {
      problem: `operator must be 1 to ${MAX_OPERATOR_CHARS} printable ASCII characters, starting with a visible one`,
    };
  return { operator: operator.trimEnd(), holdSeconds };
}

/** The takeover a renewal's body names (its `since`) and how long it is renewed for. */
function renewalOf(body: string): { since: string; holdSeconds: number } | { problem: string } {
  let value: unknown;
  try {
    value = JSON.parse(body);
  } catch {
    return { problem: 'the body must be JSON: {"since": "<the takeover\'s since>", "holdSeconds": <seconds>}' };
  }
  const since = (value as { since?: unknown } | null)?.since;
  if (typeof since !== "string" || since.length > 40)
    return { problem: "since must be the since of the takeover to renew, as its take answered it" };
  const checked = takeOf(
    JSON.stringify({ operator: "-", holdSeconds: (value as { holdSeconds?: unknown }).holdSeconds }),
  );
  return "problem" in checked ? checked : { since, holdSeconds: checked.holdSeconds };
}

const expiresIn = (seconds: number) => new Date(Date.now() + seconds * 1000).toISOString();

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
    const named = takeOf(body);
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
    // Decided where the state is kept: of takes at the same moment (on any worker), the first holds it.
    const answer = await takeovers.change(computer, {
      op: "take",
      operator: named.operator,
      since: new Date().toISOString(),
      expires: expiresIn(named.holdSeconds),
    });
    if (!answer.made)
      return refuse(409, { error: "a person holds this computer already", computer, taken: answer.before.taken });
    const taken = answer.after.taken!;
    log("taken-over", { computer, operator: taken.operator, reason: taken.reason });
    return replyJson(res, 200, { computer, taken });
  }
  if (req.method === "PUT") {
    const body = await readSmallBody(req);
    if (body === undefined) return refuse(413, { error: `the body must be at most ${MAX_BODY_BYTES} bytes` });
    const renewal = renewalOf(body);
    if ("problem" in renewal) return refuse(400, { error: "bad renewal", detail: renewal.problem });
    const answer = await takeovers.change(computer, {
      op: "renew",
      since: renewal.since,
      expires: expiresIn(renewal.holdSeconds),
    });
    if (!answer.made)
      return refuse(409, {
        error: "that takeover is over: the computer was handed back or its hold ran out",
        computer,
        ...(answer.before.taken !== undefined ? { taken: answer.before.taken } : {}),
      });
    return replyJson(res, 200, { computer, taken: answer.after.taken });
  }
  if (req.method === "DELETE") {
    req.resume();
    const answer = await takeovers.change(computer, { op: "handBack" });
    const held = answer.before.taken;
    if (!answer.made || held === undefined) return refuse(409, { error: "no person holds this computer", computer });
    const until = new Date().toISOString();
    log("handed-back", { computer, operator: held.operator, since: held.since, until, ended: "handed-back" });
    // Told after: until the proxy hears it, the agent's exchanges are marked the person's, never the reverse.
    await tellProxy(computer, false).catch((error: Error) =>
      log("person-mark-stuck", { computer, detail: error.message }),
    );
    return replyJson(res, 200, { computer, handedBack: { ...held, until } });
  }
  req.resume();
  return refuse(405, { error: "method not allowed" }, undefined, { Allow: "GET, HEAD, POST, PUT, DELETE" });
}
