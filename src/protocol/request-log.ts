// The request log: every HTTP exchange a computer's site proxy decrypts, one HAR 1.2 entry per JSON line, in
// rotating files on the proxy's disk. The proxy writes the lines, its control listener serves them, the gateway
// serves them on (requests/v1, behind the control token) and the runner makes HAR documents of them, so the names
// on the wire and the entry's shape live here once.
import type { Entry, Har, Page } from "har-format";

export const REQUESTS_V1_URN = "urn:agentenv:requests/v1";
/** GET: the computers whose request logs the gateway serves (control token required). */
export const REQUESTS_LIST_PATH = "/requests/v1/computers";
/** The media type of a request log as served: one HAR entry per line, oldest first. */
export const REQUEST_LOG_MEDIA_TYPE = "application/x-ndjson";
/** The most of each body (request and answer) an entry keeps when the stack names no limit: 1 MiB. */
export const DEFAULT_REQUEST_LOG_BODY_BYTES = 1024 * 1024;

/** The path of one computer's request log (GET: its entries, one JSON line each, oldest first). */
export function requestLogPath(computer: string): string {
  return `${REQUESTS_LIST_PATH}/${encodeURIComponent(computer)}`;
}

/** GET REQUESTS_LIST_PATH answers this. */
export interface RequestLogListing {
  computers: { name: string; path: string }[];
}

/** The requests/v1 extension as the gateway declares it in its card. */
export function requestsExtension() {
  return {
    uri: REQUESTS_V1_URN,
    description:
      "Each computer's request log: every HTTP exchange its site proxy decrypted, one HAR 1.2 entry per line; control token required.",
    params: { mediaType: REQUEST_LOG_MEDIA_TYPE, entry: "HAR 1.2", order: "oldest-first" },
    paths: { list: REQUESTS_LIST_PATH, get: `${REQUESTS_LIST_PATH}/{computer}` },
  };
}

/**
 * A rotating file of the log: `requests.<N>.jsonl`, N counting up from 0 across the proxy's life and its restarts;
 * the oldest files are removed as new ones begin, as a capture's rotating files are.
 */
export const REQUEST_LOG_FILE_PATTERN = /^requests\.(\d{1,9})\.jsonl$/;

export function requestLogFileName(index: number): string {
  return `requests.${index}.jsonl`;
}

/** How an exchange ended, in `_multienv.end`. */
export type ExchangeEnd =
  /** The whole answer went back to the computer. */
  | "complete"
  /** The proxy answered itself (refused, failed): `response` is its answer. */
  | "proxy answer"
  /** A WebSocket (or other upgrade) whose relay ended: its messages are in `_webSocketMessages`. */
  | "upgrade closed"
  /** The computer went away (`stream reset (<code>)`, `connection closed`), or the answer broke (`answer broke: …`). */
  | string;

/**
 * One body as the proxy saw it pass, as it crossed the wire: the whole of it, whatever the entry keeps, and still
 * encoded when it had a Content-Encoding (the entry's `content.size` and text are then the decoded body's).
 */
export interface BodyDigest {
  /** Every byte of the body as it crossed the wire. */
  bytes: number;
  /** The SHA-256 of those bytes; absent for what a person sent (`human`). */
  sha256?: string;
  /**
   * True when the entry keeps only part of the body: its first `bodyLimitBytes` (of the decoded body, when it was
   * decoded).
   */
  cut: boolean;
}

/** The fields of our own on every entry. */
export interface MultienvEntryFields {
  computer: string;
  /** The `id` of the proxy log's `request` line of this exchange. */
  logId: string;
  end: ExchangeEnd;
  request: BodyDigest;
  response: BodyDigest;
  /**
   * WebSocket messages the entry keeps no data of, as they did not fit in what was left of the body limit (all of a
   * socket's messages together keep to it): each one's size and place among `_webSocketMessages`.
   */
  webSocketMessagesLeftOut?: WebSocketMessageLeftOut[];
  /** WebSocket messages past the most an entry keeps (10,000, listed or left out), counted. */
  webSocketMessagesDropped?: number;
  /**
   * "undecided" when a text of the entry could not be read through for tokens within the scrub's budget (work bounded
   * by its length): the parts of it that could not are kept as `[undecided: <bytes> bytes, sha256 <hex>]` (the size and
   * SHA-256 of their UTF-8), and the rest as it was. Never a token's `[redacted]`.
   */
  scrub?: "undecided";
  /**
   * True when the exchange began while a person held the computer (a takeover): the person's, not the agent's. What
   * the person sent is withheld (PERSON_WITHHELD in place of the request body and of each query value, no SHA-256 of
   * the body), since it may be what they typed: a password, a second factor's code.
   */
  human?: true;
}

/** What stands in an entry for what a person sent: the entry keeps its size alone. */
export const PERSON_WITHHELD = "[withheld: sent while a person held the computer]";

/** A WebSocket message of which the entry keeps no data. */
export interface WebSocketMessageLeftOut {
  /** Its place: the index in `_webSocketMessages` the next message kept has (the count of those kept before it). */
  at: number;
  type: "send" | "receive";
  /** Seconds since the epoch. */
  time: number;
  opcode: number;
  /** Its size, decoded; absent when it was compressed and could not be inflated (too long, or broken). */
  bytes?: number;
  /** Its payload's size on the wire (compressed, when it was). */
  wireBytes: number;
  /** True when a person sent it (their computer taken over): what they send is never kept. */
  human?: true;
}

/** Chromium's own HAR export of a WebSocket message. */
export interface WebSocketMessage {
  type: "send" | "receive";
  /** Seconds since the epoch. */
  time: number;
  opcode: number;
  data: string;
}

/** An entry of the request log: HAR 1.2's (whose `_webSocketMessages` are Chromium's), and our own fields. */
export type RequestLogEntry = Entry & { _multienv: MultienvEntryFields };

/** Parses a request log's text (one entry per line; a torn last line, still being written, is skipped). */
export function parseRequestLog(text: string): RequestLogEntry[] {
  const entries: RequestLogEntry[] = [];
  for (const line of text.split("\n")) {
    if (line.trim() === "") continue;
    try {
      entries.push(JSON.parse(line) as RequestLogEntry);
    } catch {
      // a torn last line
    }
  }
  return entries;
}

function headerValue(headers: { name: string; value: string }[], name: string): string | undefined {
  return headers.find((h) => h.name.toLowerCase() === name)?.value;
}

/** What places an entry on a page of a HAR document: when it began, its URL, and its navigation and referrer. */
export interface PageFacts {
  startedDateTime: string;
  url: string;
  /** A navigation of the browser's top frame (Sec-Fetch-Dest document, Sec-Fetch-Mode navigate). */
  navigation: boolean;
  referer: string | undefined;
}

export function pageFacts(entry: Entry): PageFacts {
  const headers = entry.request.headers;
  const dest = headerValue(headers, "sec-fetch-dest");
  return {
    startedDateTime: entry.startedDateTime,
    url: entry.request.url,
    // What the browser marks as one; without the mark, nothing is taken for a navigation.
    navigation: dest === "document" && headerValue(headers, "sec-fetch-mode") === "navigate",
    referer: headerValue(headers, "referer"),
  };
}

/**
 * The pages of a HAR document, made as its entries are placed in time order: a page for each navigation of the
 * browser's top frame, and an entry referred from a page's URL (its Referer) put on the latest such page.
 */
export class HarPages {
  readonly pages: Page[] = [];
  private readonly latestPageOf = new Map<string, string>();

  /** The page of the next entry in time order, when it has one. */
  place(facts: PageFacts): string | undefined {
    if (facts.navigation) {
      const id = `page_${this.pages.length + 1}`;
      this.pages.push({
        startedDateTime: facts.startedDateTime,
        id,
        title: facts.url,
        pageTimings: { onContentLoad: -1, onLoad: -1 },
      });
      this.latestPageOf.set(facts.url, id);
      return id;
    }
    return facts.referer !== undefined ? this.latestPageOf.get(facts.referer) : undefined;
  }
}

/**
 * A complete HAR 1.2 document of `entries` (in time order), its pages made by HarPages. (The runner writes the same
 * document streaming, entry by entry: src/runner/evidence/request-logs.ts.)
 */
export function harDocument(entries: RequestLogEntry[], creator: { name: string; version: string }): Har {
  const sorted = [...entries].sort((a, b) => a.startedDateTime.localeCompare(b.startedDateTime));
  const pages = new HarPages();
  const out = sorted.map((entry) => {
    const copy: RequestLogEntry = { ...entry };
    delete copy.pageref;
    const page = pages.place(pageFacts(entry));
    if (page !== undefined) copy.pageref = page;
    return copy;
  });
  return { log: { version: "1.2", creator, pages: pages.pages, entries: out } };
}
