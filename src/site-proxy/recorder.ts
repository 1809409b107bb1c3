// The request log's recorder: the forwarding path hands it an exchange's parts as they pass (the request's head and
// body, the answer's head and body, how it ended) and it appends one HAR 1.2 entry, one JSON line, when the exchange
// ends. This is the tap, which captures: each body through a BodyTap (body-tap.ts: kept up to the limit, counted,
// hashed and decoded as it streams), a WebSocket's messages, the times; the entry is made and scrubbed from what it
// captured in har-entry.ts. Nothing of an exchange is held once its line is written: the memory an exchange costs is
// bounded by the limit, four times (each way, the bytes as they arrived and the decoded ones).
import { performance } from "node:perf_hooks";
import type { Readable } from "node:stream";
import type { SecretTokens } from "../protocol/auth";
import type { ExchangeEnd, RequestLogEntry, WebSocketMessageLeftOut } from "../protocol/request-log";
import { Scrubber } from "../protocol/scrub";
import { BodyTap, type BodyDecoding, STREAMED } from "./body-tap";
import type { ExchangeTap, TappedAnswer } from "./forward";
import { type ExchangeStart, harEntry, headerOf } from "./har-entry";
import { openRotatingFile, type RotatingFile } from "./rotating-file";
import { readWebSocketMessages, type MessagesSettled, type ReadMessage } from "./websocket-messages";

export type { ExchangeStart } from "./har-entry";

export interface RecorderOptions {
  dir: string;
  computer: string;
  bodyLimitBytes: number;
  redact: readonly string[];
  fileBytes: number;
  files: number;
  /** Tokens that never reach the log, in any form `withoutTokens` recognises. */
  secrets?: SecretTokens;
}

export interface RequestRecorder {
  /** A recording of one exchange; its entry is written when it finishes. */
  begin(start: ExchangeStart): ExchangeRecording;
  /**
   * Whether a person holds the computer (a takeover) from now on: an exchange that begins while one does is marked
   * the person's (`_multienv.human`) and keeps nothing of what it sent; a WebSocket message sent meanwhile keeps its
   * size alone.
   */
  personHolds(held: boolean): void;
  flushed(): Promise<void>;
  close(): Promise<void>;
}

/** The most messages of one WebSocket an entry keeps (the rest are counted). */
const MAX_WEBSOCKET_MESSAGES = 10_000;

/**
 * How long a closed WebSocket's entry waits for its last messages' inflate: a moment on any loop, but an entry is never
 * held back for good by a reader that stalls.
 */
const MESSAGES_SETTLE_LIMIT_MS = 2_000;

/** `settling`, or nothing after `ms`, whichever comes first. */
function settledWithin(settling: Promise<void>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const limit = new Promise<void>((resolve) => (timer = setTimeout(resolve, ms).unref()));
  return Promise.race([settling, limit]).finally(() => clearTimeout(timer));
}

export class ExchangeRecording implements ExchangeTap {
  private readonly startedAt = new Date();
  private readonly startedPerf = performance.now();
  private requestEndedPerf: number | undefined;
  private answeredPerf: number | undefined;
  private readonly requestBody: BodyTap;
  private readonly responseBody: BodyTap;
  private answer: TappedAnswer | undefined;
  /** The WebSocket's messages kept whole, their data still bytes (made text, and scrubbed, with the entry). */
  private messages: ReadMessage[] | undefined;
  /** The WebSocket's messages of which no data is kept, in order among the rest. */
  private readonly messagesLeftOut: WebSocketMessageLeftOut[] = [];
  /** When the WebSocket's messages read so far are all in `messages` (some may still be inflating at its close). */
  private messagesSettled: MessagesSettled | undefined;
  /** Bytes of the messages kept: together they keep to the body limit. */
  private messageBytes = 0;
  private droppedMessages = 0;
  private finished = false;
  /** Messages read after this are not the entry's. */
  private entryMade = false;
  /** Whether a person held the computer when the exchange began: it is theirs. */
  private readonly human: boolean;

  constructor(
    private readonly start: ExchangeStart,
    private readonly recorder: Recorder,
  ) {
    this.requestBody = new BodyTap(recorder.options.bodyLimitBytes);
    this.requestBody.decodeAs(headerOf(start.rawHeaders, "content-encoding"));
    this.responseBody = new BodyTap(recorder.options.bodyLimitBytes);
    this.human = recorder.personHolding;
  }

  // A body may go on passing after its exchange's entry was made (an upload the site answered before reading it
  // all): what passes then is not the entry's.
  requestChunk(chunk: Buffer): void {
    if (this.finished) return;
    this.requestBody.add(chunk);
  }

  requestEnd(): void {
    this.requestEndedPerf ??= performance.now();
  }

  response(answer: TappedAnswer): void {
    this.answeredPerf = performance.now();
    this.answer = answer;
    this.responseBody.decodeAs(headerOf(answer.rawHeaders, "content-encoding"));
  }

  responseChunk(chunk: Buffer): void {
    if (this.finished) return;
    this.responseBody.add(chunk);
  }

  webSocket(computer: Readable, host: Readable, early: Buffer, head: Buffer, extensions: string | undefined): void {
    this.messages = [];
    const limit = this.recorder.options.bodyLimitBytes;
    this.messagesSettled = readWebSocketMessages(computer, host, early, head, extensions, limit, (message) =>
      this.webSocketMessage(message),
    );
  }

  /**
   * One message: kept whole while all kept together fit the body limit; past it, its size and place in the order (no
   * data); past the most an entry keeps, only counted. Each message is judged alone: one past the limit leaves room
   * for the small ones after it.
   */
  private webSocketMessage(message: ReadMessage): void {
    const messages = (this.messages ??= []);
    if (this.entryMade) return;
    if (messages.length + this.messagesLeftOut.length >= MAX_WEBSOCKET_MESSAGES) return void this.droppedMessages++;
    const { bytes } = message;
    // What a person sends is never kept: it may be what they typed.
    const persons = message.type === "send" && (this.human || this.recorder.personHolding);
    if (
      !persons &&
      bytes !== undefined &&
      bytes === message.data.length &&
      this.messageBytes + bytes <= this.recorder.options.bodyLimitBytes
    ) {
      this.messageBytes += bytes;
      messages.push(message);
      return;
    }
    this.messagesLeftOut.push({
      at: messages.length,
      type: message.type,
      time: message.time,
      opcode: message.opcode,
      ...(bytes !== undefined ? { bytes } : {}),
      wireBytes: message.wireBytes,
      ...(persons ? { human: true as const } : {}),
    });
  }

  /** Ends the recording and writes its entry once its bodies are decoded; later calls do nothing. */
  finish(end: ExchangeEnd): void {
    if (this.finished) return;
    this.finished = true;
    const endedPerf = performance.now();
    const requestWhole = this.requestEndedPerf !== undefined;
    const answered = end === "complete" || end === "proxy answer";
    // Most exchanges need no streaming decoder: their entry is made and written now, with no promise to wait on
    // (a request's CPU is the measure of the log's cost, and a promise chain per entry was a good part of it).
    const request = this.requestBody.decodingNow(requestWhole);
    const response = this.responseBody.decodingNow(answered);
    const messages = this.messagesSettled;
    if (request !== STREAMED && response !== STREAMED && messages === undefined)
      return this.recorder.write(() => this.entry(end, endedPerf, request, response));
    this.recorder.writeWhen(
      Promise.all([
        request === STREAMED ? this.requestBody.streamed(requestWhole) : request,
        response === STREAMED ? this.responseBody.streamed(answered) : response,
        // A WebSocket's last messages may still be inflating when it closes: the entry waits for them, a while.
        messages && settledWithin(messages(), MESSAGES_SETTLE_LIMIT_MS),
      ]).then(([requestDecoding, responseDecoding]) => this.entry(end, endedPerf, requestDecoding, responseDecoding)),
    );
  }
  private entry(
    end: ExchangeEnd,
    endedPerf: number,
    requestDecoding: BodyDecoding | undefined,
    responseDecoding: BodyDecoding | undefined,
  ): RequestLogEntry {
    this.entryMade = true;
    return harEntry(
      {
        start: this.start,
        computer: this.recorder.options.computer,
        end,
        startedAt: this.startedAt,
        startedPerf: this.startedPerf,
        requestEndedPerf: this.requestEndedPerf,
        answeredPerf: this.answeredPerf,
        endedPerf,
        request: this.requestBody.digest(),
        requestDecoding,
        response: this.responseBody.digest(),
        responseDecoding,
        answer: this.answer,
        messages: this.messages,
        messagesLeftOut: this.messagesLeftOut,
        droppedMessages: this.droppedMessages,
        human: this.human,
      },
      this.recorder.scrubber,
    );
  }
}

class Recorder implements RequestRecorder {
  readonly scrubber: Scrubber;
  private readonly file: RotatingFile;
  /** Entries waiting for their bodies' decoding. */
  private readonly pending = new Set<Promise<void>>();
  /** Whether a person holds the computer now (personHolds). */
  personHolding = false;

  constructor(readonly options: RecorderOptions) {
    this.scrubber = new Scrubber(options.secrets, options.redact);
    this.file = openRotatingFile(options.dir, options.fileBytes, options.files);
  }

  begin(start: ExchangeStart): ExchangeRecording {
    return new ExchangeRecording(start, this);
  }

  personHolds(held: boolean): void {
    this.personHolding = held;
  }

  /**
   * Makes an entry and hands it to the file (whose write failures are its own to tell); a failure to make it is told
   * on stderr, never thrown into the forwarding.
   */
  write(make: () => RequestLogEntry): void {
    try {
      this.file.append(JSON.stringify(make()));
    } catch (err) {
      this.failed(err);
    }
  }

  /** Writes an entry once it is made (its bodies decoded); flushed() and close() wait for it. */
  writeWhen(entry: Promise<RequestLogEntry>): void {
    const written = entry.then(
      (made) => this.write(() => made),
      (err: unknown) => this.failed(err),
    );
    this.pending.add(written);
    void written.finally(() => this.pending.delete(written));
  }

  private failed(err: unknown): void {
    process.stderr.write(`multienv-site-proxy: cannot make a request log entry: ${(err as Error).message}\n`);
  }

  async flushed(): Promise<void> {
    await Promise.all(this.pending);
    return this.file.flushed();
  }

  async close(): Promise<void> {
    await Promise.all(this.pending);
    return this.file.close();
  }
}

export function openRecorder(options: RecorderOptions): RequestRecorder {
  return new Recorder(options);
}
