// Test helpers: HAR entries as the request log, Chromium and Playwright write them, and the real replay server
// process (src/replay-server/main.ts through tsx) on loopback over a HAR file.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { spawnService, tempDir, type ServiceProcess } from "../helpers/processes";

const MAIN = join(__dirname, "..", "..", "src", "replay-server", "main.ts");
export const REPLAY_SERVER_ARGS = ["--require", "tsx/cjs", MAIN];
export const REPLAY_TOKEN = "replay-test-token-0123456789abcdefghijklmnop";

export interface EntryOptions {
  method?: string;
  requestHeaders?: Record<string, string> | [string, string][];
  postData?: { mimeType: string; text: string };
  status?: number;
  statusText?: string;
  headers?: Record<string, string> | [string, string][];
  body?: string;
  base64?: boolean;
  mimeType?: string;
  started?: string;
  webSocketMessages?: { type: "send" | "receive"; time: number; opcode: number; data: string }[];
}

const headerList = (headers: EntryOptions["headers"]) =>
  (Array.isArray(headers) ? headers : Object.entries(headers ?? {})).map(([name, value]) => ({ name, value }));

let clock = Date.parse("2024-03-01T12:00:00.000Z");

/** A HAR 1.2 entry; each one starts a second after the previous unless `started` says when. */
export function entry(url: string, options: EntryOptions = {}): Record<string, unknown> {
  clock += 1000;
  const body = options.body ?? "";
  const mimeType = options.mimeType ?? "text/html";
  return {
    startedDateTime: options.started ?? new Date(clock).toISOString(),
    time: 12,
    request: {
      method: options.method ?? "GET",
      url,
      httpVersion: "HTTP/1.1",
      headers: headerList(options.requestHeaders),
      queryString: [],
      cookies: [],
      headersSize: -1,
      bodySize: options.postData ? options.postData.text.length : 0,
      ...(options.postData ? { postData: options.postData } : {}),
    },
    response: {
      status: options.status ?? 200,
      statusText: options.statusText ?? "OK",
      httpVersion: "HTTP/1.1",
      headers: headerList(options.headers ?? { "Content-Type": mimeType }),
      cookies: [],
      content: {
        size: body.length,
        mimeType,
        ...(options.base64
          ? { text: Buffer.from(body).toString("base64"), encoding: "base64" }
          : body === ""
            ? {}
            : { text: body }),
      },
      redirectURL: "",
      headersSize: -1,
      bodySize: -1,
    },
    cache: {},
    timings: { send: 0, wait: 10, receive: 2 },
    ...(options.webSocketMessages ? { _webSocketMessages: options.webSocketMessages } : {}),
  };
}

export function har(entries: unknown[]): Record<string, unknown> {
  return { log: { version: "1.2", creator: { name: "multienv-test", version: "1" }, pages: [], entries } };
}

/** Writes `document` (a HAR object, or text as it is) to a temp file; returns its path. */
export function harFile(document: unknown): string {
  const file = join(tempDir("multienv-replay-"), "recording.har");
  writeFileSync(file, typeof document === "string" ? document : JSON.stringify(document));
  return file;
}

export interface ReplayServerProcess extends ServiceProcess {
  url: string;
  port: number;
  control: string;
}

/** Spawns a replay server over the HAR at `file` on 127.0.0.1 (both listeners on port 0). */
export async function startReplayServer(
  file: string,
  config: Record<string, unknown> = {},
): Promise<ReplayServerProcess> {
  const service = spawnService(REPLAY_SERVER_ARGS, {
    MULTIENV_REPLAY_SERVER_CONFIG: JSON.stringify({
      listen: { host: "127.0.0.1", port: 0 },
      control: { host: "127.0.0.1", port: 0 },
      recording: file,
      ...config,
    }),
    MULTIENV_REPLAY_SERVER_TOKEN: REPLAY_TOKEN,
  });
  const line = await service.listening;
  const port = line.port as number;
  return { ...service, port, url: `http://127.0.0.1:${port}`, control: `http://127.0.0.1:${line.controlPort}` };
}

export const bearer = { Authorization: `Bearer ${REPLAY_TOKEN}` };
