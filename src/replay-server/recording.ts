// A HAR 1.2 recording read into the exchanges the replay server answers from. Read from the request log (the site
// proxy's), Chromium's DevTools export and Playwright's recordHar alike, whose differences it tolerates:
// bodies as text or base64 (`content.encoding`), a body missing (served empty), Playwright's bodies in files beside
// the HAR (`content._file`), HTTP/2 pseudo-headers, `_webSocketMessages`, and any other `_`-prefixed field.
// A file that is not HAR is refused with one line naming the file and the field; an entry that cannot be served
// (no URL, no status: the request failed while recording) is skipped and counted.
import { readFile } from "node:fs/promises";
import { dirname, isAbsolute, join, normalize } from "node:path";

export interface HarHeader {
  name: string;
  value: string;
}

/** A WebSocket frame as Chromium's HAR export writes it: `send` from the browser, `receive` from the server. */
export interface WebSocketMessage {
  type: "send" | "receive";
  time: number;
  opcode: number;
  data: string;
}

export interface RecordedExchange {
  /** Its place in the recording, by request start (ties kept in file order): "recorded order". */
  index: number;
  /** When the request started, ms since the epoch: the time a page's Date is frozen at. */
  startedMs: number;
  method: string;
  /** `http` or `https`. */
  scheme: string;
  /** Lower case, without the scheme's default port. */
  host: string;
  /** The request-target as sent: path and query, percent-encoding kept. */
  target: string;
  requestHeaders: HarHeader[];
  requestBody: { mimeType: string; bytes: Buffer } | undefined;
  status: number;
  statusText: string;
  responseHeaders: HarHeader[];
  /** Decoded (HAR holds bodies after content-coding is undone). */
  responseBody: Buffer;
  /** The body was text in the HAR (so it is served as UTF-8), not base64 bytes. */
  responseBodyIsText: boolean;
  webSocketMessages: WebSocketMessage[] | undefined;
}

export interface Recording {
  exchanges: RecordedExchange[];
  /** Entries not served, with why (the first few). */
  skipped: { count: number; reasons: string[] };
  /** Exchanges served with an empty body although the HAR says the body had bytes (the recorder left it out). */
  bodiesMissing: number;
}

/** A recording that cannot be read: the message is one line naming the file, the field and the fix. */
export class RecordingError extends Error {
  override name = "RecordingError";
}

type Json = Record<string, unknown>;
const isObject = (value: unknown): value is Json =>
  typeof value === "object" && value !== null && !Array.isArray(value);

const DEFAULT_PORTS: Record<string, string> = { "http:": "80", "https:": "443", "ws:": "80", "wss:": "443" };

/** `host[:port]` in lower case, the scheme's default port dropped: how a host is compared. */
export function normalizeHost(authority: string, scheme: string): string {
  const lower = authority.toLowerCase().replace(/\.$/, "");
  const colon = lower.lastIndexOf(":");
  if (colon > lower.lastIndexOf("]") && lower.slice(colon + 1) === DEFAULT_PORTS[`${scheme}:`])
    return lower.slice(0, colon);
  return lower;
}

function headersOf(value: unknown): HarHeader[] {
  if (!Array.isArray(value)) return [];
  return value
    .filter((h): h is Json => isObject(h) && typeof h.name === "string" && typeof h.value === "string")
    .map((h) => ({ name: h.name as string, value: h.value as string }));
}

function webSocketMessagesOf(value: unknown): WebSocketMessage[] | undefined {
  if (!Array.isArray(value)) return undefined;
  return value
    .filter((m): m is Json => isObject(m) && (m.type === "send" || m.type === "receive") && typeof m.data === "string")
    .map((m) => ({
      type: m.type as "send" | "receive",
      time: typeof m.time === "number" ? m.time : 0,
      opcode: typeof m.opcode === "number" ? m.opcode : 1,
      data: m.data as string,
    }));
}

/** A Playwright `_file` body: a plain name in the HAR's folder, never a path out of it. */
async function attachedBody(file: string, harDir: string | undefined): Promise<Buffer | undefined> {
  if (harDir === undefined || isAbsolute(file) || normalize(file).startsWith("..") || file.includes("\0"))
    return undefined;
  try {
    return await readFile(join(harDir, file));
  } catch {
    return undefined;
  }
}

/** The recorded body's size, when the HAR says it (`content.size`). */
function declaredSize(response: Json): number {
  return isObject(response.content) && typeof response.content.size === "number" ? response.content.size : 0;
}

async function responseBodyOf(content: unknown, harDir: string | undefined): Promise<[Buffer, boolean]> {
  if (!isObject(content)) return [Buffer.alloc(0), false];
  if (typeof content.text === "string")
    return content.encoding === "base64"
      ? [Buffer.from(content.text, "base64"), false]
      : [Buffer.from(content.text, "utf8"), true];
  if (typeof content._file === "string") {
    const bytes = await attachedBody(content._file, harDir);
    if (bytes) return [bytes, false];
  }
  return [Buffer.alloc(0), false];
}

async function requestBodyOf(postData: unknown, harDir: string | undefined): Promise<RecordedExchange["requestBody"]> {
  if (!isObject(postData)) return undefined;
  const mimeType = typeof postData.mimeType === "string" ? postData.mimeType : "";
  if (typeof postData.text === "string")
    return {
      mimeType,
      bytes: postData.encoding === "base64" ? Buffer.from(postData.text, "base64") : Buffer.from(postData.text, "utf8"),
    };
  if (typeof postData._file === "string") {
    const bytes = await attachedBody(postData._file, harDir);
    if (bytes) return { mimeType, bytes };
  }
  // HAR 1.2 allows a form as `params` alone.
  if (Array.isArray(postData.params)) {
    const form = new URLSearchParams();
    for (const param of postData.params)
      if (isObject(param) && typeof param.name === "string")
        form.append(param.name, typeof param.value === "string" ? param.value : "");
    return { mimeType: mimeType || "application/x-www-form-urlencoded", bytes: Buffer.from(form.toString()) };
  }
  return undefined;
}

/** One entry, or why it cannot be served. */
async function exchangeOf(entry: unknown, harDir: string | undefined): Promise<RecordedExchange | string> {
  if (!isObject(entry)) return "not an object";
  const { request, response } = entry;
  if (!isObject(request) || typeof request.url !== "string" || typeof request.method !== "string")
    return "no request.url or request.method";
  if (!URL.canParse(request.url)) return `request.url ${JSON.stringify(request.url.slice(0, 200))} is not a URL`;
  const url = new URL(request.url);
  if (!["http:", "https:", "ws:", "wss:"].includes(url.protocol)) return `request.url is ${url.protocol}, not http(s)`;
  if (!isObject(response) || typeof response.status !== "number" || response.status < 100 || response.status > 999)
    return "no response status (the request failed while recording)";
  const scheme = url.protocol === "ws:" ? "http" : url.protocol === "wss:" ? "https" : url.protocol.slice(0, -1);
  const started = typeof entry.startedDateTime === "string" ? Date.parse(entry.startedDateTime) : NaN;
  const [responseBody, responseBodyIsText] = await responseBodyOf(response.content, harDir);
  const method = request.method.toUpperCase();
  return {
    index: 0,
    startedMs: Number.isFinite(started) ? started : 0,
    // A WebSocket the browser opened over HTTP/2 (RFC 8441's extended CONNECT) is the GET upgrade an HTTP/1.1
    // browser sends, and the one the replay server is asked for.
    method:
      method === "CONNECT" && (response.status === 101 || entry._webSocketMessages !== undefined) ? "GET" : method,
    scheme,
    host: normalizeHost(url.host, scheme),
    // The URL as recorded, not as WHATWG re-serialises it: the raw text after the authority.
    target: rawTarget(request.url),
    requestHeaders: headersOf(request.headers),
    requestBody: await requestBodyOf(request.postData, harDir),
    status: response.status,
    statusText: typeof response.statusText === "string" ? response.statusText : "",
    responseHeaders: headersOf(response.headers),
    responseBody,
    responseBodyIsText,
    webSocketMessages: webSocketMessagesOf(entry._webSocketMessages),
  };
}

/** `/path?query` of an absolute URL as written (fragment dropped); `/` when it has no path. */
export function rawTarget(absolute: string): string {
  const afterScheme = absolute.indexOf("//");
  const pathStart = absolute.slice(afterScheme + 2).search(/[/?#]/);
  let rest = pathStart === -1 ? "" : absolute.slice(afterScheme + 2 + pathStart);
  const hash = rest.indexOf("#");
  if (hash !== -1) rest = rest.slice(0, hash);
  if (rest === "" || rest.startsWith("?")) rest = `/${rest}`;
  return rest;
}

/** The exchanges of a HAR document already parsed; `harDir` is where Playwright's `_file` bodies are. */
export async function recordingOf(har: unknown, file: string, harDir?: string): Promise<Recording> {
  const where = `recording ${file}`;
  if (!isObject(har) || !isObject(har.log))
    throw new RecordingError(`${where}: is not HAR (no "log" object); give a HAR 1.2 file`);
  if (!Array.isArray(har.log.entries))
    throw new RecordingError(`${where}: log.entries is not a list; give a HAR 1.2 file`);
  const exchanges: RecordedExchange[] = [];
  const skipped = { count: 0, reasons: [] as string[] };
  let bodiesMissing = 0;
  for (const [i, entry] of (har.log.entries as unknown[]).entries()) {
    const exchange = await exchangeOf(entry, harDir);
    if (typeof exchange === "string") {
      skipped.count += 1;
      if (skipped.reasons.length < 5) skipped.reasons.push(`log.entries[${i}]: ${exchange}`);
      continue;
    }
    exchanges.push(exchange);
    const bodiless = exchange.status === 204 || exchange.status === 304 || exchange.status < 200;
    if (!bodiless && exchange.responseBody.length === 0 && declaredSize((entry as Json).response as Json) > 0)
      bodiesMissing += 1;
  }
  // Array.prototype.sort is stable: entries that started at the same instant keep their order in the file.
  exchanges.sort((a, b) => a.startedMs - b.startedMs);
  exchanges.forEach((exchange, index) => (exchange.index = index));
  return { exchanges, skipped, bodiesMissing };
}

/** Reads and parses the HAR file at `file`. */
export async function loadRecording(file: string): Promise<Recording> {
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch (error) {
    throw new RecordingError(
      `recording ${file}: cannot be read (${(error as NodeJS.ErrnoException).code ?? (error as Error).message}); give the path of a HAR file`,
    );
  }
  let har: unknown;
  try {
    har = JSON.parse(text.charCodeAt(0) === 0xfeff ? text.slice(1) : text);
  } catch (error) {
    throw new RecordingError(`recording ${file}: is not JSON (${(error as Error).message}); give a HAR 1.2 file`);
  }
  return recordingOf(har, file, dirname(file));
}
