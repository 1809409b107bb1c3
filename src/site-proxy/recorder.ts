// The request log's recorder: the forwarding path hands it an exchange's parts as they pass (the request's head and
// body, the answer's head and body, how it ended) and it appends one HAR 1.2 entry, one JSON line, when the exchange
// ends. A body is kept up to the limit while its whole size and SHA-256 are counted as it streams; a body with a
// Content-Encoding (stacked codings too) is decoded up to the limit of decoded bytes (content-decoding.ts), since
// HAR's `content.text` is the decoded body: at its end when it is small and arrived whole, else as it streams.
// Nothing of an exchange is held once its line is written: the memory an exchange costs is bounded by the limit,
// four times (each way, the bytes as they arrived and the decoded ones).
import { createHash, hash, type Hash } from "node:crypto";
import { isUtf8 } from "node:buffer";
import { performance } from "node:perf_hooks";
import type { Readable } from "node:stream";
import type { Cookie, Entry, Header, QueryString } from "har-format";
import { splitCookiesString, parse as parseSetCookie } from "set-cookie-parser";
import type { SecretTokens } from "../protocol/auth";
import {
  PERSON_WITHHELD,
  type BodyDigest,
  type ExchangeEnd,
  type RequestLogEntry,
  type WebSocketMessage,
  type WebSocketMessageLeftOut,
} from "../protocol/request-log";
import type { ExchangeTap, TappedAnswer } from "./forward";
import { openRotatingFile, type RotatingFile } from "./rotating-file";
import { readWebSocketMessages, type MessagesSettled, type ReadMessage } from "./websocket-messages";
import { REDACTED, Scrubber } from "../protocol/scrub";
import { BodyDecoder, contentCoding, decodeWhole, type ContentCoding, type Decoded } from "./content-decoding";

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

/** An exchange's request as the computer sent it. */
export interface ExchangeStart {
  /** The id of the proxy log's `request` line of this exchange. */
  logId: string;
  method: string;
  /** The absolute URL the computer asked for (https:// inside a terminated tunnel). */
  url: string;
  /** `HTTP/1.1` or `HTTP/2.0`. */
  httpVersion: string;
  /** The request's headers as received, name and value in turn. */
  rawHeaders: string[];
  /** Which of the computer's connections carried it. */
  connection: string;
  /**
   * Keep no credential's value (a recorded live site's session): cookies' values (of Cookie and Set-Cookie, named or
   * not) and every credential header's (CREDENTIAL_HEADER).
   */
  redactCredentials?: boolean;
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

/** What a body's Content-Encoding made of it: decoded, or why it is kept as it arrived. */
type BodyDecoding = { coding: string } & (Decoded | { unsupported: true });

/** SHA-256 of no bytes: most requests (every GET) have no body, and a hash object is not free. */
const EMPTY_SHA256 = createHash("sha256").digest("hex");

/**
 * SHA-256 of bytes in one call: a third of a hash object's cost for a small body (crypto.hash, from node 20.12;
 * the hash object before it).
 */
const sha256Of: (bytes: Buffer) => string =
  typeof hash === "function"
    ? (bytes) => hash("sha256", bytes, "hex")
    : (bytes) => createHash("sha256").update(bytes).digest("hex");

/**
 * Wire bytes up to this (and the limit) of a body with a Content-Encoding are decoded at once when the body ends
 * (`decodeWhole`); a longer body is decoded as it streams, from the chunk that passes this on.
 */
const DECODE_AT_END_BYTES = 64 * 1024;

/** A body whose decoding ends in the streaming decoder, asynchronously. */
const STREAMED = Symbol("streamed");

/**
 * One body passing as it crossed the wire: its first `limit` bytes kept, every byte counted and hashed (a body kept
 * whole is hashed when it ends, from what was kept; a longer one as it passes, from the chunk that passes the limit).
 */
class BodyTap {
  private readonly kept: Buffer[] = [];
  private keptBytes = 0;
  bytes = 0;
  private hash: Hash | undefined;
  private decoder: BodyDecoder | undefined;
  private codings: ContentCoding[] | undefined;
  private coding: string | undefined;

  constructor(private readonly limit: number) {}

  /** Decode the body by its Content-Encoding as it passes (set before its first chunk). */
  decodeAs(contentEncoding: string | undefined): void {
    if (contentEncoding === undefined || this.limit === 0) return;
    const codings = contentCoding(contentEncoding);
    if (codings === "identity") return;
    if (Array.isArray(codings)) {
      this.coding = [...codings].reverse().join(", ");
      this.codings = codings;
    } else this.coding = codings.unsupported;
  }

  add(chunk: Buffer): void {
    this.bytes += chunk.length;
    if (this.hash !== undefined) this.hash.update(chunk);
    else if (this.bytes > this.limit) {
      this.hash = createHash("sha256");
      for (const part of this.kept) this.hash.update(part);
      this.hash.update(chunk);
    }
    if (this.decoder !== undefined) this.decoder.write(chunk);
    else if (this.codings !== undefined && this.bytes > Math.min(this.limit, DECODE_AT_END_BYTES)) {
      // Too long to wait for its end: the decoder takes what was kept of it so far (all of it, being under the
      // limit) and the rest as it comes.
      this.decoder = this.streamingDecoder();
      this.decoder.write(chunk);
    }
    const room = this.limit - this.keptBytes;
    if (room <= 0) return;
    const part = chunk.length <= room ? chunk : chunk.subarray(0, room);
    this.kept.push(part);
    this.keptBytes += part.length;
  }

  private streamingDecoder(): BodyDecoder {
    const decoder = new BodyDecoder(this.codings!, this.limit);
    for (const part of this.kept) decoder.write(part);
    return decoder;
  }

  /**
   * What the body's Content-Encoding made of it once it ended (`whole`: every byte of it arrived), when that is known
   * at once: no coding, one the log does not decode, or a short body decoded whole. Else STREAMED: `streamed` tells.
   */
  decodingNow(whole: boolean): BodyDecoding | undefined | typeof STREAMED {
    if (this.coding === undefined || this.bytes === 0) return undefined;
    const codings = this.codings;
    if (codings === undefined) return { coding: this.coding, unsupported: true };
    if (this.decoder === undefined && whole) {
      const decoded = decodeWhole(codings, this.body(), this.limit);
      if (decoded !== undefined) return { coding: this.coding, ...decoded };
    }
    return STREAMED;
  }

  /** What the body's Content-Encoding made of it, when that is STREAMED: the streaming decoder's end. */
  async streamed(whole: boolean): Promise<BodyDecoding> {
    this.decoder ??= this.streamingDecoder();
    return { coding: this.coding!, ...(await this.decoder.end(whole)) };
  }

  /** The bytes kept, without a copy when they came in one chunk. */
  private body(): Buffer {
    return this.kept.length === 1 ? this.kept[0] : Buffer.concat(this.kept, this.keptBytes);
  }

  /** The body as it crossed the wire (still encoded when it had a Content-Encoding). */
  digest(): BodyDigest & { body: Buffer } {
    const body = this.body();
    let sha256: string;
    if (this.hash !== undefined) sha256 = this.hash.digest("hex");
    else sha256 = this.bytes === 0 ? EMPTY_SHA256 : sha256Of(body);
    return { bytes: this.bytes, sha256, cut: this.bytes > this.keptBytes, body };
  }
}

const TEXTUAL =
  /^(text\/|application\/(?:[\w.+-]*\+)?(?:json|xml|javascript|ecmascript|x-www-form-urlencoded)\b)|^image\/svg\+xml/i;

/**
 * A character JSON can only write as `\u00XX` (six bytes for one): a body with one is not text, whatever its type
 * says, and is kept in base64, so a line of the log costs at most about its body's bytes.
 */
// eslint-disable-next-line no-control-regex -- these control characters are what the rule is about
const NOT_TEXT = /[\x00-\x07\x0b\x0e-\x1f]/;

/**
 * A body as HAR text, scrubbed: UTF-8 text when its type is textual and its bytes are UTF-8 text (a cut body's last
 * character may be cut too: up to three bytes are left off for it), else base64 (`raw`: always, the body still
 * encoded), its bytes scrubbed before.
 */
function bodyText(
  body: Buffer,
  mimeType: string,
  cut: boolean,
  raw: boolean,
  scrub: Scrubber,
): { text: string; plain?: string; encoding?: "base64" } {
  if (!raw && TEXTUAL.test(mimeType)) {
    for (let trim = 0; trim <= (cut ? 3 : 0) && trim <= body.length; trim++) {
      const part = body.subarray(0, body.length - trim);
      if (!isUtf8(part)) continue;
      const plain = part.toString("utf8");
      if (NOT_TEXT.test(plain)) break;
      return { text: scrub.text(plain), plain };
    }
  }
  return { text: scrub.binary(body), encoding: "base64" };
}

/**
 * The headers a live site's credentials travel in, whose values the log leaves out of a recorded live site's
 * exchanges unless the site keeps its credentials: Authorization and Proxy-Authorization (any scheme), Cookie and
 * Set-Cookie (their values; the names are kept), and any header whose name says it carries one: `auth` as a word of
 * it, or a token, secret, session, password, signature, credential, CSRF/XSRF value or API key in it, or `-key` at
 * its end (X-Auth-Token, X-Api-Key, X-CSRF-Token, X-Amz-Security-Token, Ocp-Apim-Subscription-Key, ...).
 */
const CREDENTIAL_HEADER =
  /^(?:proxy-)?authorization$|^cookie$|^set-cookie2?$|(?:^|[-_])auth(?:[-_]|$)|token|secret|session|passw(?:or)?d|signature|credential|csrf|xsrf|api[-_]?key|[-_]key$/i;
/** The WebSocket handshake's nonces, which are no credential for all their names. */
const HANDSHAKE_NONCE = /^sec-websocket-(?:key|accept)$/i;

/** Whether a header's value is a credential a recorded live site's exchanges keep out of the log. */
export function isCredentialHeader(name: string): boolean {
  return CREDENTIAL_HEADER.test(name) && !HANDSHAKE_NONCE.test(name);
}

function headerOf(rawHeaders: string[], name: string): string | undefined {
  for (let i = 0; i < rawHeaders.length; i += 2) if (rawHeaders[i].toLowerCase() === name) return rawHeaders[i + 1];
  return undefined;
}

function decodeQueryPart(part: string): string {
  try {
    return decodeURIComponent(part.replace(/\+/g, " "));
  } catch {
    return part;
  }
}

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

/** Milliseconds between two performance.now() readings, at least 0, to the microsecond. */
function span(from: number | undefined, to: number | undefined): number {
  if (from === undefined || to === undefined) return 0;
  return Math.max(0, Math.round((to - from) * 1000) / 1000);
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
    const scrub = this.recorder.scrubber;
    const undecidedBefore = scrub.undecidedTexts;
    const { start } = this;
    const requestHeaders = this.headers(start.rawHeaders);
    const request = this.requestBody.digest();
    const response = this.responseBody.digest();
    const answer = this.answer;
    const requestType = headerOf(start.rawHeaders, "content-type") ?? "";
    const responseHeaders = answer ? this.headers(answer.rawHeaders) : [];
    const responseType = (answer && headerOf(answer.rawHeaders, "content-type")) ?? "";
    const requestEnded = this.requestEndedPerf ?? this.answeredPerf ?? endedPerf;
    const human = this.human;
    const made: RequestLogEntry = {
      startedDateTime: this.startedAt.toISOString(),
      time: span(this.startedPerf, endedPerf),
      request: {
        method: start.method,
        url: scrub.url(human ? withheldQuery(start.url) : start.url),
        httpVersion: start.httpVersion,
        cookies: this.requestCookies(start.rawHeaders),
        headers: requestHeaders,
        queryString: human ? withheldPairs(this.query(start.url)) : this.query(start.url),
        ...(request.bytes > 0 || headerOf(start.rawHeaders, "content-length") !== undefined
          ? {
              postData: human
                ? { mimeType: requestType, text: PERSON_WITHHELD }
                : this.postData(request, requestDecoding, requestType),
            }
          : {}),
        headersSize: -1,
        bodySize: request.bytes,
      },
      response: {
        status: answer?.status ?? 0,
        statusText: answer?.statusText ?? "",
        httpVersion: answer?.httpVersion ?? "",
        cookies: answer ? this.responseCookies(answer.rawHeaders) : [],
        headers: responseHeaders,
        content: this.content(response, responseDecoding, responseType),
        redirectURL: scrub.text(answer ? (headerOf(answer.rawHeaders, "location") ?? "") : ""),
        headersSize: -1,
        bodySize: answer ? response.bytes : -1,
      },
      cache: {},
      timings: {
        blocked: -1,
        dns: -1,
        connect: -1,
        ssl: -1,
        send: span(this.startedPerf, Math.min(requestEnded, this.answeredPerf ?? requestEnded)),
        wait: answer ? span(Math.min(requestEnded, this.answeredPerf!), this.answeredPerf) : 0,
        receive: answer ? span(this.answeredPerf, endedPerf) : 0,
      },
      ...(answer?.serverAddress ? { serverIPAddress: answer.serverAddress } : {}),
      connection: start.connection,
      _multienv: {
        computer: this.recorder.options.computer,
        logId: start.logId,
        end,
        // The bytes as they crossed the wire (encoded, when the body had a Content-Encoding: HAR's content.size
        // and postData are the decoded body's), and whether the entry keeps only part of the body.
        // A person's body keeps no SHA-256: a short secret's is guessed back from a list.
        request: human
          ? { bytes: request.bytes, cut: false }
          : { bytes: request.bytes, sha256: request.sha256, cut: keptPart(request, requestDecoding) },
        response: { bytes: response.bytes, sha256: response.sha256, cut: keptPart(response, responseDecoding) },
        ...(this.messagesLeftOut.length > 0 ? { webSocketMessagesLeftOut: this.messagesLeftOut } : {}),
        ...(this.droppedMessages > 0 ? { webSocketMessagesDropped: this.droppedMessages } : {}),
        ...(human ? { human: true as const } : {}),
      },
    };
    if (this.messages)
      made._webSocketMessages = this.messages.map(({ type, time, opcode, data }): WebSocketMessage => ({
        type,
        time,
        opcode,
        data: opcode === 1 ? scrub.text(data.toString("utf8")) : scrub.binary(data),
      }));
    // A text the scrub could not read through within its budget is kept as its size and SHA-256: the entry says so.
    if (scrub.undecidedTexts !== undecidedBefore) made._multienv.scrub = "undecided";
    return made;
  }

  private headers(rawHeaders: string[]): Header[] {
    const scrub = this.recorder.scrubber;
    const headers: Header[] = [];
    for (let i = 0; i < rawHeaders.length; i += 2) {
      const name = rawHeaders[i];
      const lower = name.toLowerCase();
      let value = rawHeaders[i + 1];
      if (lower === "cookie") value = this.cookieHeader(value);
      else if (lower === "set-cookie") value = this.setCookieHeader(value);
      else if (this.start.redactCredentials && isCredentialHeader(lower)) value = REDACTED;
      else value = scrub.value(name, value);
      headers.push({ name, value });
    }
    return headers;
  }

  /** A Cookie header with each cookie's value scrubbed on its own. */
  private cookieHeader(value: string): string {
    const scrub = this.recorder.scrubber;
    if (scrub.redacts("cookie")) return scrub.value("cookie", value);
    // A nameless cookie (no `=`) is all value, and stays so.
    const rebuilt = this.requestCookiesOf(value)
      .map((c) => (c.name === "" ? c.value : `${c.name}=${c.value}`))
      .join("; ");
    return scrub.text(rebuilt);
  }

  /** A Set-Cookie header with its cookie's value as the log keeps it (cookieValue), its attributes as they are. */
  private setCookieHeader(value: string): string {
    const scrub = this.recorder.scrubber;
    if (scrub.redacts("set-cookie")) return scrub.value("set-cookie", value);
    const semi = value.indexOf(";");
    const pair = semi === -1 ? value : value.slice(0, semi);
    const attributes = semi === -1 ? "" : value.slice(semi);
    // A nameless cookie (`Set-Cookie: VALUE; Path=/`) is all value, as browsers read it.
    const eq = pair.indexOf("=");
    const name = eq === -1 ? "" : pair.slice(0, eq);
    const cookie = this.cookieValue(name.trim(), eq === -1 ? pair : pair.slice(eq + 1));
    return scrub.text(`${eq === -1 ? "" : `${name}=`}${cookie}${attributes}`);
  }

  /** A cookie's value as the log keeps it: none of a recorded live site's, else scrubbed. */
  private cookieValue(name: string, value: string): string {
    return this.start.redactCredentials ? REDACTED : this.recorder.scrubber.value(name, value);
  }

  private requestCookiesOf(value: string): Cookie[] {
    const scrub = this.recorder.scrubber;
    return value
      .split(";")
      .map((pair) => pair.trim())
      .filter((pair) => pair !== "")
      .map((pair) => {
        const eq = pair.indexOf("=");
        const name = eq === -1 ? "" : pair.slice(0, eq).trim();
        const raw = eq === -1 ? pair : pair.slice(eq + 1).trim();
        return { name: scrub.text(name), value: this.cookieValue(name, raw) };
      });
  }

  private requestCookies(rawHeaders: string[]): Cookie[] {
    const cookies: Cookie[] = [];
    for (let i = 0; i < rawHeaders.length; i += 2)
      if (rawHeaders[i].toLowerCase() === "cookie") cookies.push(...this.requestCookiesOf(rawHeaders[i + 1]));
    return cookies;
  }

  private responseCookies(rawHeaders: string[]): Cookie[] {
    const scrub = this.recorder.scrubber;
    const lines: string[] = [];
    for (let i = 0; i < rawHeaders.length; i += 2)
      if (rawHeaders[i].toLowerCase() === "set-cookie") lines.push(...splitCookiesString(rawHeaders[i + 1]));
    if (lines.length === 0) return [];
    return parseSetCookie(lines, { decodeValues: false }).map((c) => ({
      name: scrub.text(c.name),
      value: this.cookieValue(c.name, c.value),
      ...(c.path !== undefined ? { path: scrub.text(c.path) } : {}),
      ...(c.domain !== undefined ? { domain: scrub.text(c.domain) } : {}),
      ...(c.expires !== undefined && !Number.isNaN(c.expires.getTime()) ? { expires: c.expires.toISOString() } : {}),
      ...(c.httpOnly !== undefined ? { httpOnly: c.httpOnly } : {}),
      ...(c.secure !== undefined ? { secure: c.secure } : {}),
      ...(c.sameSite !== undefined ? { sameSite: c.sameSite } : {}),
    }));
  }

  private query(url: string): QueryString[] {
    const at = url.indexOf("?");
    if (at === -1) return [];
    const hash = url.indexOf("#", at);
    return this.formPairs(url.slice(at + 1, hash === -1 ? undefined : hash));
  }

  /** `a=b&c=d` (a query string or a form body) as scrubbed name/value pairs. */
  private formPairs(text: string): QueryString[] {
    const scrub = this.recorder.scrubber;
    return text
      .split("&")
      .filter((pair) => pair !== "")
      .map((pair) => {
        const eq = pair.indexOf("=");
        const name = decodeQueryPart(eq === -1 ? pair : pair.slice(0, eq));
        const value = eq === -1 ? "" : decodeQueryPart(pair.slice(eq + 1));
        return { name: scrub.text(name), value: scrub.value(name, value) };
      });
  }

  private postData(
    wire: BodyDigest & { body: Buffer },
    decoding: BodyDecoding | undefined,
    mimeType: string,
  ): NonNullable<Entry["request"]["postData"]> {
    const kept = keptBody(wire, decoding);
    const { body, cut } = kept;
    const { text, plain, encoding } = bodyText(body, mimeType, cut, kept.raw, this.recorder.scrubber);
    const form = /^application\/x-www-form-urlencoded/i.test(mimeType) && plain !== undefined;
    return {
      mimeType,
      text,
      ...(encoding ? { _encoding: encoding } : {}),
      ...(form ? { params: this.formPairs(plain) } : {}),
      ...(kept.comment !== undefined
        ? { comment: kept.comment }
        : cut
          ? { comment: `cut at ${body.length} bytes` }
          : {}),
    } as NonNullable<Entry["request"]["postData"]>;
  }

  private content(
    wire: BodyDigest & { body: Buffer },
    decoding: BodyDecoding | undefined,
    mimeType: string,
  ): Entry["response"]["content"] {
    const kept = keptBody(wire, decoding);
    const { body, cut } = kept;
    const decoded = decoding !== undefined && "bytes" in decoding;
    const { text, encoding } = body.length === 0 ? {} : bodyText(body, mimeType, cut, kept.raw, this.recorder.scrubber);
    return {
      size: kept.size,
      // The bytes the coding saved; unknown when decoding stopped before the body's end.
      ...(decoded && !cut ? { compression: kept.size - wire.bytes } : {}),
      mimeType,
      ...(text !== undefined ? { text } : {}),
      ...(encoding ? { encoding } : {}),
      ...(kept.comment !== undefined
        ? { comment: kept.comment }
        : cut
          ? { comment: `cut at ${body.length} of ${kept.size} bytes` }
          : {}),
    };
  }
}

/** `url` with each query value withheld (names kept): what a person sent. */
function withheldQuery(url: string): string {
  const at = url.indexOf("?");
  if (at === -1) return url;
  const hash = url.indexOf("#", at);
  const query = url.slice(at + 1, hash === -1 ? undefined : hash);
  const mark = encodeURIComponent(PERSON_WITHHELD);
  const pairs = query.split("&").map((pair) => {
    const eq = pair.indexOf("=");
    return eq === -1 ? pair : `${pair.slice(0, eq)}=${mark}`;
  });
  return url.slice(0, at + 1) + pairs.join("&") + (hash === -1 ? "" : url.slice(hash));
}

function withheldPairs(pairs: QueryString[]): QueryString[] {
  return pairs.map(({ name }) => ({ name, value: PERSON_WITHHELD }));
}

/** The body an entry keeps: decoded when its coding was undone, else as it arrived (`raw`: still encoded). */
function keptBody(
  wire: BodyDigest & { body: Buffer },
  decoding: BodyDecoding | undefined,
): { body: Buffer; size: number; cut: boolean; raw: boolean; comment?: string } {
  if (decoding === undefined) return { body: wire.body, size: wire.bytes, cut: wire.cut, raw: false };
  if ("bytes" in decoding)
    return {
      body: decoding.body,
      size: decoding.bytes,
      cut: decoding.cut,
      raw: false,
      ...(decoding.cut
        ? {
            comment: `cut at ${decoding.body.length} decoded bytes, where decoding stopped (the ${decoding.coding} body was ${wire.bytes} bytes)`,
          }
        : {}),
    };
  const why =
    "failed" in decoding
      ? `decoding its Content-Encoding ${decoding.coding} failed (${decoding.failed})`
      : `its Content-Encoding ${decoding.coding} is not one the log decodes`;
  const cut = wire.cut ? `, cut at ${wire.body.length} of ${wire.bytes} bytes` : "";
  return {
    body: wire.body,
    size: wire.bytes,
    cut: wire.cut,
    raw: true,
    comment: `the body as it arrived, in base64: ${why}${cut}`,
  };
}

/** Whether an entry keeps only part of a body. */
function keptPart(wire: BodyDigest & { body: Buffer }, decoding: BodyDecoding | undefined): boolean {
  return keptBody(wire, decoding).cut;
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
