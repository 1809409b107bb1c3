// A large request log written straight to disk, as a site proxy would have written it over a long episode: its
// rotating files of entries (half the bytes images' bodies in base64, half pages' text) and the proxy log's `request`
// lines that name them. What a collection of hundreds of megabytes is tested and measured on, in seconds rather than
// the hours of browsing it would take to make.
import { randomBytes } from "node:crypto";
import { closeSync, mkdirSync, openSync, writeSync } from "node:fs";
import { join } from "node:path";
import { requestLogFileName, type RequestLogEntry } from "../../src/protocol/request-log";

export interface LargeRequestLog {
  /** The exchanges' ids, in the order their entries were written. */
  ids: string[];
  /** Bytes of the request log's files. */
  bytes: number;
}

/** An entry of about `bodyBytes` of body: an image's bytes in base64, or a page's text. */
function entry(id: string, index: number, body: Buffer, image: boolean): RequestLogEntry {
  const url = `http://shop.test/${image ? "img" : "page"}/${index}`;
  return {
    startedDateTime: new Date(Date.UTC(2026, 0, 1) + index).toISOString(),
    time: 1,
    request: {
      method: "GET",
      url,
      httpVersion: "HTTP/1.1",
      cookies: [],
      headers: [
        { name: "Host", value: "shop.test" },
        { name: "User-Agent", value: "Mozilla/5.0 (X11; Linux x86_64) Chrome/140.0 Safari/537.36" },
        { name: "Accept", value: image ? "image/avif,image/webp,*/*" : "text/html,application/xhtml+xml" },
      ],
      queryString: [],
      headersSize: -1,
      bodySize: 0,
    },
    response: {
      status: 200,
      statusText: "OK",
      httpVersion: "HTTP/1.1",
      cookies: [],
      headers: [{ name: "Content-Type", value: image ? "image/png" : "text/html; charset=utf-8" }],
      content: image
        ? { size: body.length, mimeType: "image/png", text: body.toString("base64"), encoding: "base64" }
        : { size: body.length, mimeType: "text/html; charset=utf-8", text: body.toString("utf8") },
      redirectURL: "",
      headersSize: -1,
      bodySize: body.length,
    },
    cache: {},
    timings: { send: 0, wait: 1, receive: 0 },
    _multienv: {
      computer: "agent",
      logId: id,
      end: "complete",
      request: { bytes: 0, sha256: "", cut: false },
      response: { bytes: body.length, sha256: "", cut: false },
    },
  };
}

/** Words as a page's markup and scripts have them. */
function pageText(bytes: number): Buffer {
  const words = ['<div class="item">', "price", "order", "</div>", "const", "return", "cart", "\n", "shop", "value"];
  const parts: string[] = [];
  let length = 0;
  for (let i = 0; length < bytes; i++) {
    const word = words[(i * 7919) % words.length] + (i % 13 === 0 ? String(i) : "") + " ";
    parts.push(word);
    length += word.length;
  }
  return Buffer.from(parts.join("").slice(0, bytes));
}

/**
 * Writes a request log of about `mib` MiB into `dir` (files of `fileBytes`) and a `request` line for each of its
 * exchanges into the proxy log `proxyLog`: entries of `bodyBytes` each, images and pages in turn.
 */
export function writeLargeRequestLog(
  dir: string,
  proxyLog: string,
  mib: number,
  { bodyBytes = 256 * 1024, fileBytes = 64 * 1024 * 1024 } = {},
): LargeRequestLog {
  mkdirSync(dir, { recursive: true });
  const image = randomBytes(bodyBytes);
  const page = pageText(bodyBytes);
  const ids: string[] = [];
  const requests: string[] = [];
  let bytes = 0;
  let file = 0;
  let inFile = 0;
  let fd = openSync(join(dir, requestLogFileName(file)), "w");
  for (let index = 0; bytes < mib * 1024 * 1024; index++) {
    const id = `bench0000-${index + 1}`;
    const isImage = index % 2 === 0;
    // Each image's bytes differ a little, as each image does.
    if (isImage) image.writeUInt32BE(index, 0);
    const line = Buffer.from(JSON.stringify(entry(id, index, isImage ? image : page, isImage)) + "\n");
    if (inFile > 0 && inFile + line.length > fileBytes) {
      closeSync(fd);
      fd = openSync(join(dir, requestLogFileName(++file)), "w");
      inFile = 0;
    }
    writeSync(fd, line);
    inFile += line.length;
    bytes += line.length;
    ids.push(id);
    const time = new Date(Date.UTC(2026, 0, 1) + index).toISOString();
    requests.push(
      JSON.stringify({
        event: "request",
        time,
        id,
        method: "GET",
        host: "shop.test",
        port: 80,
        site: "shop",
        status: 200,
      }),
    );
  }
  closeSync(fd);
  const log = openSync(proxyLog, "a");
  writeSync(log, requests.join("\n") + "\n");
  closeSync(log);
  return { ids, bytes };
}
