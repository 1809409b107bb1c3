// The request log's HAR 1.2 entry of one exchange, made from what the tap captured of it (recorder.ts) and scrubbed
// as it is made: the control token and the config's redacted names never reach the log, a recorded live site's
// credentials (cookies' values, credential headers) are left out unless the site keeps them, and what a person sent
// while holding the computer keeps its names alone (PERSON_WITHHELD).
import type { Cookie, Entry, Header, QueryString } from "har-format";
import { isUtf8 } from "node:buffer";
import { splitCookiesString, parse as parseSetCookie } from "set-cookie-parser";
import {
  PERSON_WITHHELD,
  type BodyDigest,
  type ExchangeEnd,
  type RequestLogEntry,
  type WebSocketMessage,
  type WebSocketMessageLeftOut,
} from "../protocol/request-log";
import { REDACTED, type Scrubber } from "../protocol/scrub";
import type { BodyDecoding } from "./body-tap";
import type { TappedAnswer } from "./forward";
import type { ReadMessage } from "./websocket-messages";

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

/** A body as it crossed the wire: its digest and the bytes kept of it. */
export type CapturedBody = BodyDigest & { body: Buffer };

/** What the tap captured of one exchange: everything its entry is made of. */
export interface CapturedExchange {
  start: ExchangeStart;
  /** The computer whose exchange it is. */
  computer: string;
  end: ExchangeEnd;
  startedAt: Date;
  /** performance.now() readings: the exchange's start, its request's end, its answer's head, its end. */
  startedPerf: number;
  requestEndedPerf: number | undefined;
  answeredPerf: number | undefined;
  endedPerf: number;
  request: CapturedBody;
  requestDecoding: BodyDecoding | undefined;
  response: CapturedBody;
  responseDecoding: BodyDecoding | undefined;
  answer: TappedAnswer | undefined;
  /** The WebSocket's messages kept whole, their data still bytes. */
  messages: ReadMessage[] | undefined;
  /** The WebSocket's messages of which no data is kept, in order among the rest. */
  messagesLeftOut: WebSocketMessageLeftOut[];
  droppedMessages: number;
  /** Whether a person held the computer when the exchange began: it is theirs. */
  human: boolean;
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

/** A header's first value (`name` in lower case). */
export function headerOf(rawHeaders: string[], name: string): string | undefined {
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

/** Milliseconds between two performance.now() readings, at least 0, to the microsecond. */
function span(from: number | undefined, to: number | undefined): number {
  if (from === undefined || to === undefined) return 0;
  return Math.max(0, Math.round((to - from) * 1000) / 1000);
}

/** The exchange's entry, every value in it scrubbed by `scrub`. */
export function harEntry(captured: CapturedExchange, scrub: Scrubber): RequestLogEntry {
  const { start, end, endedPerf, answer, human, request, response, requestDecoding, responseDecoding } = captured;
  const values = new EntryValues(scrub, start.redactCredentials === true);
  const undecidedBefore = scrub.undecidedTexts;
  const requestHeaders = values.headers(start.rawHeaders);
  const requestType = headerOf(start.rawHeaders, "content-type") ?? "";
  const responseHeaders = answer ? values.headers(answer.rawHeaders) : [];
  const responseType = (answer && headerOf(answer.rawHeaders, "content-type")) ?? "";
  const requestEnded = captured.requestEndedPerf ?? captured.answeredPerf ?? endedPerf;
  const entry: RequestLogEntry = {
    startedDateTime: captured.startedAt.toISOString(),
    time: span(captured.startedPerf, endedPerf),
    request: {
      method: start.method,
      url: scrub.url(human ? withheldQuery(start.url) : start.url),
      httpVersion: start.httpVersion,
      cookies: values.requestCookies(start.rawHeaders),
      headers: requestHeaders,
      queryString: human ? withheldPairs(values.query(start.url)) : values.query(start.url),
      ...(request.bytes > 0 || headerOf(start.rawHeaders, "content-length") !== undefined
        ? {
            postData: human
              ? { mimeType: requestType, text: PERSON_WITHHELD }
              : values.postData(request, requestDecoding, requestType),
          }
        : {}),
      headersSize: -1,
      bodySize: request.bytes,
    },
    response: {
      status: answer?.status ?? 0,
      statusText: answer?.statusText ?? "",
      httpVersion: answer?.httpVersion ?? "",
      cookies: answer ? values.responseCookies(answer.rawHeaders) : [],
      headers: responseHeaders,
      content: values.content(response, responseDecoding, responseType),
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
      send: span(captured.startedPerf, Math.min(requestEnded, captured.answeredPerf ?? requestEnded)),
      wait: answer ? span(Math.min(requestEnded, captured.answeredPerf!), captured.answeredPerf) : 0,
      receive: answer ? span(captured.answeredPerf, endedPerf) : 0,
    },
    ...(answer?.serverAddress ? { serverIPAddress: answer.serverAddress } : {}),
    connection: start.connection,
    _multienv: {
      computer: captured.computer,
      logId: start.logId,
      end,
      // The bytes as they crossed the wire (encoded, when the body had a Content-Encoding: HAR's content.size
      // and postData are the decoded body's), and whether the entry keeps only part of the body.
      // A person's body keeps no SHA-256: a short secret's is guessed back from a list.
      request: human
        ? { bytes: request.bytes, cut: false }
        : { bytes: request.bytes, sha256: request.sha256, cut: keptPart(request, requestDecoding) },
      response: { bytes: response.bytes, sha256: response.sha256, cut: keptPart(response, responseDecoding) },
      ...(captured.messagesLeftOut.length > 0 ? { webSocketMessagesLeftOut: captured.messagesLeftOut } : {}),
      ...(captured.droppedMessages > 0 ? { webSocketMessagesDropped: captured.droppedMessages } : {}),
      ...(human ? { human: true as const } : {}),
    },
  };
  if (captured.messages)
    entry._webSocketMessages = captured.messages.map(({ type, time, opcode, data }): WebSocketMessage => ({
      type,
      time,
      opcode,
      data: opcode === 1 ? scrub.text(data.toString("utf8")) : scrub.binary(data),
    }));
  // A text the scrub could not read through within its budget is kept as its size and SHA-256: the entry says so.
  if (scrub.undecidedTexts !== undecidedBefore) entry._multienv.scrub = "undecided";
  return entry;
}

/** The values of one entry as the log keeps them: scrubbed, and a recorded live site's credentials left out. */
class EntryValues {
  constructor(
    private readonly scrub: Scrubber,
    /** Keep no credential's value: the exchange is a recorded live site's whose credentials the log does not keep. */
    private readonly redactCredentials: boolean,
  ) {}

  headers(rawHeaders: string[]): Header[] {
    const scrub = this.scrub;
    const headers: Header[] = [];
    for (let i = 0; i < rawHeaders.length; i += 2) {
      const name = rawHeaders[i];
      const lower = name.toLowerCase();
      let value = rawHeaders[i + 1];
      if (lower === "cookie") value = this.cookieHeader(value);
      else if (lower === "set-cookie") value = this.setCookieHeader(value);
      else if (this.redactCredentials && isCredentialHeader(lower)) value = REDACTED;
      else value = scrub.value(name, value);
      headers.push({ name, value });
    }
    return headers;
  }

  /** A Cookie header with each cookie's value scrubbed on its own. */
  private cookieHeader(value: string): string {
    const scrub = this.scrub;
    if (scrub.redacts("cookie")) return scrub.value("cookie", value);
    // A nameless cookie (no `=`) is all value, and stays so.
    const rebuilt = this.requestCookiesOf(value)
      .map((c) => (c.name === "" ? c.value : `${c.name}=${c.value}`))
      .join("; ");
    return scrub.text(rebuilt);
  }

  /** A Set-Cookie header with its cookie's value as the log keeps it (cookieValue), its attributes as they are. */
  private setCookieHeader(value: string): string {
    const scrub = this.scrub;
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
    return this.redactCredentials ? REDACTED : this.scrub.value(name, value);
  }

  private requestCookiesOf(value: string): Cookie[] {
    const scrub = this.scrub;
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

  requestCookies(rawHeaders: string[]): Cookie[] {
    const cookies: Cookie[] = [];
    for (let i = 0; i < rawHeaders.length; i += 2)
      if (rawHeaders[i].toLowerCase() === "cookie") cookies.push(...this.requestCookiesOf(rawHeaders[i + 1]));
    return cookies;
  }

  responseCookies(rawHeaders: string[]): Cookie[] {
    const scrub = this.scrub;
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

  query(url: string): QueryString[] {
    const at = url.indexOf("?");
    if (at === -1) return [];
    const hash = url.indexOf("#", at);
    return this.formPairs(url.slice(at + 1, hash === -1 ? undefined : hash));
  }

  /** `a=b&c=d` (a query string or a form body) as scrubbed name/value pairs. */
  private formPairs(text: string): QueryString[] {
    const scrub = this.scrub;
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

  postData(
    wire: BodyDigest & { body: Buffer },
    decoding: BodyDecoding | undefined,
    mimeType: string,
  ): NonNullable<Entry["request"]["postData"]> {
    const kept = keptBody(wire, decoding);
    const { body, cut } = kept;
    const { text, plain, encoding } = bodyText(body, mimeType, cut, kept.raw, this.scrub);
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

  content(
    wire: BodyDigest & { body: Buffer },
    decoding: BodyDecoding | undefined,
    mimeType: string,
  ): Entry["response"]["content"] {
    const kept = keptBody(wire, decoding);
    const { body, cut } = kept;
    const decoded = decoding !== undefined && "bytes" in decoding;
    const { text, encoding } = body.length === 0 ? {} : bodyText(body, mimeType, cut, kept.raw, this.scrub);
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
