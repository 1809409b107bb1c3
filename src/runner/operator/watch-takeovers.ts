// The watch page's takeovers: a viewer may take a computer over (the gateway then holds its agent), send it a person's
// input (takeover.ts checks each message; it goes to the screencast's tab alone) and hand it back; each takeover's
// record (who, when, the agent's reason, the inputs without their text) goes to `onTakeover`. While the page holds a
// computer it renews the take's hold, so if this process dies the gateway hands the computer back when the hold runs
// out; a hold that ran out all the same (the gateway did not hear a renewal in time) is told to the viewers.
import type { TakeoverListing } from "../../protocol/takeover";
import { DEFAULT_HOLD_SECONDS } from "../../protocol/takeover";
import { personInput, TakeoverOver, type PersonInput, type TakeoverGateway, type TakeoverRecord } from "./takeover";
import { firstLine, type Feed, type WatchMessage } from "./watch-feeds";

/**
 * Lets viewers take computers over, as `operator`. `onTakeover` is given each takeover's record at the take, at each
 * renewal of its hold and at its end, one call after the other: until the end the record says the takeover ends when
 * its hold runs out (as it does if this process dies). `holdSeconds`: how long a take holds unless renewed (renewed
 * every third of it; default the gateway's).
 */
export interface TakeoverControl {
  gateway: TakeoverGateway;
  operator: string;
  onTakeover(record: TakeoverRecord): void | Promise<void>;
  holdSeconds?: number;
}

/** What the page may ask of a computer when the server takes over. */
type ViewerRequest =
  | { type: "take"; computer: string }
  | { type: "handBack"; computer: string }
  | { type: "input"; computer: string; input: PersonInput };

/** How often the gateway's takeover states (an agent's request for a person) are read while someone watches. */
const STATES_MS = 1_000;

/** A viewer's message, when it is one the page sends about one of `computers`; anything else is dropped. */
function viewerRequest(data: unknown, computers: readonly string[]): ViewerRequest | undefined {
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
}

/** The takeovers one watch page holds, and the gateway's takeover state of each of its computers. */
export class PageTakeovers {
  /** The takeovers this page holds, each record filled as the person acts. */
  private readonly held = new Map<string, TakeoverRecord>();
  /** Each computer's inputs, one after the other: a release never overtakes its press. */
  private readonly queues = new Map<string, Promise<void>>();
  private states: TakeoverListing["computers"] = {};
  private statesTimer: NodeJS.Timeout | undefined;
  private released: Array<() => void> = [];
  /** Each held computer's renewal of its hold. */
  private readonly renewals = new Map<string, NodeJS.Timeout>();
  /** Each computer's record writes, one after the other: a renewal's never lands after the end's. */
  private readonly writes = new Map<string, Promise<void>>();
  private readonly holdSeconds: number;
  private readonly computers: string[];

  constructor(
    private readonly control: TakeoverControl,
    private readonly feeds: Record<string, Feed>,
    private readonly broadcast: (message: WatchMessage) => void,
  ) {
    this.holdSeconds = control.holdSeconds ?? DEFAULT_HOLD_SECONDS;
    this.computers = Object.keys(feeds);
  }

  /** The computers this page holds now. */
  holding(): string[] {
    return [...this.held.keys()];
  }

  /** Resolves once a computer this page held was handed back and no other is held. */
  handedBack(): Promise<void> {
    return this.held.size === 0 ? Promise.resolve() : new Promise<void>((resolve) => this.released.push(resolve));
  }

  /** What a viewer who connects now is told first: each computer's takeover state the gateway gave. */
  greeting(): WatchMessage[] {
    return this.computers
      .filter((computer) => this.states[computer] !== undefined)
      .map((computer) => ({
        type: "takeover",
        computer,
        state: this.states[computer],
        mine: this.held.has(computer),
      }));
  }

  /** Reads the gateway's takeover states every STATES_MS while `on` (while someone watches). */
  readStatesWhile(on: boolean): void {
    clearInterval(this.statesTimer);
    this.statesTimer = on ? setInterval(() => void this.readStates(), STATES_MS) : undefined;
  }

  async readStates(): Promise<void> {
    try {
      const next = (await this.control.gateway.states()).computers;
      for (const computer of this.computers)
        if (JSON.stringify(next[computer] ?? {}) !== JSON.stringify(this.states[computer] ?? {})) {
          this.states = { ...this.states, [computer]: next[computer] ?? {} };
          this.showState(computer);
        }
    } catch {
      // The gateway not answering shows in the feeds' own errors; the next read tries again.
    }
  }

  async take(computer: string): Promise<void> {
    const { control, holdSeconds } = this;
    if (this.held.has(computer)) return;
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
    this.held.set(computer, record);
    this.renewals.set(
      computer,
      setInterval(() => void this.renew(computer, record), (holdSeconds * 1000) / 3),
    );
    await this.persist(record);
    this.states = {
      ...this.states,
      [computer]: { ...this.states[computer], taken: { operator: control.operator, since: taken.since } },
    };
    this.showState(computer);
  }

  async handBack(computer: string): Promise<void> {
    const record = this.held.get(computer);
    if (record === undefined) return;
    this.forget(computer);
    // The inputs already sent are done (or refused) before the agent gets its computer back.
    await this.queues.get(computer);
    try {
      await this.control.gateway.handBack(computer);
      record.end = new Date().toISOString();
      record.ended = "handed-back";
    } finally {
      // A hand-back the gateway refused or did not answer leaves the record as it was: ending when the hold runs out.
      await this.persist(record);
      this.showGone(computer);
    }
  }

  /** Hands back every computer this page holds (the page closed, or its last viewer left). */
  async handBackAll(): Promise<void> {
    await Promise.all(this.holding().map((computer) => this.handBack(computer).catch(() => undefined)));
  }

  /** A viewer's message: a take, a hand-back or a person's input; anything else is dropped. */
  readonly onViewerMessage = (data: unknown): void => {
    const request = viewerRequest(data, this.computers);
    if (request === undefined) return;
    const failed = (error: unknown) =>
      this.broadcast({ type: "error", computer: request.computer, message: firstLine(error) });
    if (request.type === "take") this.take(request.computer).catch(failed);
    else if (request.type === "handBack") this.handBack(request.computer).catch(failed);
    else this.act(request.computer, request.input);
  };

  private act(computer: string, input: PersonInput): void {
    const record = this.held.get(computer);
    const feed = this.feeds[computer];
    if (record === undefined || feed.act === undefined) return;
    const queued = (this.queues.get(computer) ?? Promise.resolve()).then(() =>
      feed.act!(input, record).catch((error: unknown) =>
        this.broadcast({ type: "error", computer, message: firstLine(error) }),
      ),
    );
    this.queues.set(computer, queued);
  }

  private persist(record: TakeoverRecord): Promise<void> {
    const copy = structuredClone(record);
    const written = (this.writes.get(record.computer) ?? Promise.resolve())
      .then(() => this.control.onTakeover(copy))
      .catch((error: unknown) =>
        this.broadcast({
          type: "error",
          computer: record.computer,
          message: `the takeover's record could not be written: ${firstLine(error)}`,
        }),
      );
    this.writes.set(record.computer, written);
    return written;
  }

  private async renew(computer: string, record: TakeoverRecord): Promise<void> {
    try {
      const hold = await this.control.gateway.renew(computer, record.start, this.holdSeconds);
      if (this.held.get(computer) !== record || hold.expires === undefined) return;
      record.end = hold.expires;
      await this.persist(record);
    } catch (error) {
      if (error instanceof TakeoverOver) this.lost(computer, record);
      // Else the gateway did not answer: the next renewal tries again, before the hold runs out.
    }
  }

  /** The takeover of `computer` is over without this page handing it back (its hold ran out). */
  private lost(computer: string, record: TakeoverRecord): void {
    if (this.held.get(computer) !== record) return;
    this.forget(computer);
    this.showGone(computer);
    this.broadcast({ type: "error", computer, message: `the takeover of ${computer} is over: its hold ran out` });
  }

  /** `computer` is no longer this page's: its renewals stop. */
  private forget(computer: string): void {
    this.held.delete(computer);
    clearInterval(this.renewals.get(computer));
    this.renewals.delete(computer);
  }

  /** Shows `computer` free, and tells those waiting for the hand-back once nothing is held. */
  private showGone(computer: string): void {
    this.states = { ...this.states, [computer]: {} };
    this.showState(computer);
    if (this.held.size === 0) {
      for (const resolve of this.released) resolve();
      this.released = [];
    }
  }

  private showState(computer: string): void {
    this.broadcast({
      type: "takeover",
      computer,
      state: this.states[computer] ?? {},
      mine: this.held.has(computer),
    });
  }
}
