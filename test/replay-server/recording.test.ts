// Reading HAR files as the request log, Chromium's DevTools export and Playwright's recordHar write them; refusing
// what is not HAR with one line naming the file.
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { loadRecording, rawTarget, recordingOf, RecordingError } from "../../src/replay-server/recording";
import { cleanup, tempDir } from "../helpers/processes";
import { entry, har, harFile } from "./helpers";

afterEach(cleanup);

describe("recordingOf", () => {
  it("reads Chromium's export: HTTP/2 pseudo-headers, base64 bodies, a body left out, WebSocket messages", async () => {
    const chromium = {
      log: {
        version: "1.2",
        creator: { name: "WebInspector", version: "537.36" },
        pages: [{ startedDateTime: "2024-03-01T12:00:00.000Z", id: "page_1", title: "", pageTimings: {} }],
        entries: [
          {
            _initiator: { type: "other" },
            _priority: "VeryHigh",
            _resourceType: "document",
            cache: {},
            pageref: "page_1",
            startedDateTime: "2024-03-01T12:00:01.000Z",
            request: {
              method: "GET",
              url: "https://Shop.Example:443/index.html?x=1#top",
              httpVersion: "http/2.0",
              headers: [
                { name: ":authority", value: "shop.example" },
                { name: ":method", value: "GET" },
                { name: "accept", value: "text/html" },
              ],
              queryString: [{ name: "x", value: "1" }],
              cookies: [],
              headersSize: -1,
              bodySize: 0,
            },
            response: {
              status: 200,
              statusText: "",
              httpVersion: "http/2.0",
              headers: [
                { name: "content-type", value: "image/png" },
                { name: "content-encoding", value: "br" },
              ],
              cookies: [],
              content: { size: 4, mimeType: "image/png", text: "iVBORw==", encoding: "base64" },
              redirectURL: "",
              headersSize: -1,
              bodySize: -1,
              _transferSize: 100,
            },
            serverIPAddress: "192.0.2.1",
            timings: {},
            time: 1,
          },
          {
            startedDateTime: "2024-03-01T12:00:02.000Z",
            request: { method: "GET", url: "https://shop.example/empty", headers: [] },
            response: { status: 200, headers: [], content: { size: 10, mimeType: "text/css" } },
          },
          {
            startedDateTime: "2024-03-01T12:00:03.000Z",
            _resourceType: "websocket",
            request: { method: "GET", url: "wss://shop.example/live", headers: [] },
            response: {
              status: 101,
              statusText: "Switching Protocols",
              headers: [],
              content: { size: 0, mimeType: "x-unknown" },
            },
            _webSocketMessages: [
              { type: "send", time: 1709294403.1, opcode: 1, data: "hello" },
              { type: "receive", time: 1709294403.2, opcode: 1, data: "hi" },
            ],
          },
          {
            startedDateTime: "2024-03-01T12:00:04.000Z",
            request: { method: "GET", url: "https://blocked.example/ad.js", headers: [] },
            response: {
              status: 0,
              statusText: "",
              headers: [],
              content: { size: 0, mimeType: "x-unknown" },
              _error: "net::ERR_BLOCKED_BY_CLIENT",
            },
          },
        ],
      },
    };
    const { exchanges, skipped, bodiesMissing } = await recordingOf(chromium, "chromium.har");
    expect(exchanges.map((e) => [e.scheme, e.host, e.target, e.status])).toEqual([
      ["https", "shop.example", "/index.html?x=1", 200],
      ["https", "shop.example", "/empty", 200],
      ["https", "shop.example", "/live", 101],
    ]);
    expect(exchanges[0].responseBody).toEqual(Buffer.from([0x89, 0x50, 0x4e, 0x47]));
    expect(exchanges[0].responseBodyIsText).toBe(false);
    expect(exchanges[0].startedMs).toBe(Date.parse("2024-03-01T12:00:01.000Z"));
    expect(exchanges[1].responseBody.length).toBe(0);
    expect(bodiesMissing).toBe(1); // /empty: 10 bytes recorded, none kept
    expect(exchanges[2].webSocketMessages).toEqual(chromium.log.entries[2]._webSocketMessages);
    expect(skipped).toEqual({
      count: 1,
      reasons: ["log.entries[3]: no response status (the request failed while recording)"],
    });
  });

  it("reads a WebSocket the request log recorded over HTTP/2 (extended CONNECT) as the GET upgrade it answers", async () => {
    const socket = (method: string, status: number, messages?: unknown[]) => ({
      startedDateTime: "2024-03-01T12:00:03.000Z",
      request: { method, url: "https://shop.example/live", httpVersion: "HTTP/2.0", headers: [] },
      response: { status, headers: [], content: { size: 0, mimeType: "x-unknown" } },
      ...(messages ? { _webSocketMessages: messages } : {}),
    });
    const { exchanges } = await recordingOf(
      {
        log: {
          entries: [
            socket("CONNECT", 101, [{ type: "send", time: 1, opcode: 1, data: "hello" }]),
            // A CONNECT the site refused is no WebSocket: it stays what it was.
            socket("CONNECT", 404),
          ],
        },
      },
      "request-log.har",
    );
    expect(exchanges.map((e) => [e.method, e.status])).toEqual([
      ["GET", 101],
      ["CONNECT", 404],
    ]);
  });

  it("reads Playwright's bodies kept in files beside the HAR, never a file outside its folder", async () => {
    const root = tempDir("multienv-replay-pw-");
    const dir = join(root, "har");
    mkdirSync(dir);
    writeFileSync(join(dir, "abc.html"), "<p>from a file</p>");
    writeFileSync(join(root, "outside.txt"), "secret");
    const entries = [entry("https://shop.example/", {}), entry("https://shop.example/x", {})];
    (entries[0].response as { content: object }).content = { size: 18, mimeType: "text/html", _file: "abc.html" };
    (entries[1].response as { content: object }).content = { size: 6, mimeType: "text/plain", _file: "../outside.txt" };
    const { exchanges, bodiesMissing } = await recordingOf(har(entries), "pw.har", dir);
    expect(exchanges[0].responseBody.toString()).toBe("<p>from a file</p>");
    expect(exchanges[1].responseBody.length).toBe(0);
    expect(bodiesMissing).toBe(1); // the file outside the HAR's folder, never read
  });

  it("keeps recorded order by start time, entries written as they ended put back in order", async () => {
    const late = entry("https://shop.example/a", { started: "2024-03-01T12:00:05.000Z", body: "second" });
    const early = entry("https://shop.example/a", { started: "2024-03-01T12:00:01.000Z", body: "first" });
    const { exchanges } = await recordingOf(har([late, early]), "ours.har");
    expect(exchanges.map((e) => [e.index, e.responseBody.toString()])).toEqual([
      [0, "first"],
      [1, "second"],
    ]);
  });

  it("takes the request-target as written", () => {
    expect(rawTarget("https://e.com")).toBe("/");
    expect(rawTarget("https://e.com?q=1")).toBe("/?q=1");
    expect(rawTarget("https://e.com/a%2Fb?q=%20#f")).toBe("/a%2Fb?q=%20");
  });
});

describe("loadRecording refuses what is not a HAR file, naming the file", () => {
  it.each([
    ["a missing file", undefined, /recording .*missing\.har: cannot be read \(ENOENT\); give the path of a HAR file/],
    ["not JSON", "<html>", /recording .*: is not JSON .*; give a HAR 1\.2 file/],
    ["JSON but not HAR", '{"entries": []}', /recording .*: is not HAR \(no "log" object\); give a HAR 1\.2 file/],
    ["no entries list", '{"log": {"entries": {}}}', /recording .*: log\.entries is not a list; give a HAR 1\.2 file/],
  ])("%s", async (_what, text, message) => {
    const file = text === undefined ? join(tempDir(), "missing.har") : harFile(text);
    const error = await loadRecording(file).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RecordingError);
    expect((error as Error).message).toMatch(message);
    expect((error as Error).message).not.toContain("\n");
  });
});
