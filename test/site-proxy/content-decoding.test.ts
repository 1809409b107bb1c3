// The request log's decoding of Content-Encoding, stacked codings included, both ways it is done: a whole body at
// once and a body as it streams (in small chunks, as a slow answer arrives).
import * as zlib from "node:zlib";
import { describe, expect, it } from "vitest";
import {
  BodyDecoder,
  contentCoding,
  DECODE_SLACK,
  decodeWhole,
  type Decoded,
} from "../../src/site-proxy/content-decoding";

const LIMIT = 64 * 1024;
const TEXT = Buffer.from("stacked codings, undone in turn: ".repeat(400));

/** `body` decoded as it streams, 1,000 bytes at a time. */
async function streamed(value: string, body: Buffer, limit = LIMIT): Promise<Decoded> {
  const codings = contentCoding(value);
  if (!Array.isArray(codings)) throw new Error(`${value} is not decoded`);
  const decoder = new BodyDecoder(codings, limit);
  for (let at = 0; at < body.length; at += 1000) decoder.write(body.subarray(at, at + 1000));
  return decoder.end(true);
}

function whole(value: string, body: Buffer, limit = LIMIT): Decoded | undefined {
  const codings = contentCoding(value);
  if (!Array.isArray(codings)) throw new Error(`${value} is not decoded`);
  return decodeWhole(codings, body, limit);
}

describe("content decoding for the request log", () => {
  it("reads a Content-Encoding as the codings to undo, the last applied first", () => {
    expect(contentCoding(undefined)).toBe("identity");
    expect(contentCoding(" identity ")).toBe("identity");
    expect(contentCoding("x-gzip")).toEqual(["gzip"]);
    expect(contentCoding("gzip, br")).toEqual(["br", "gzip"]);
    expect(contentCoding("deflate,GZIP , identity, br")).toEqual(["br", "gzip", "deflate"]);
    expect(contentCoding("gzip, zstd")).toEqual({ unsupported: "gzip, zstd" });
    // Each stacked coding is a decoder's worth of memory: a long stack is kept as it arrived.
    expect(contentCoding("gzip, gzip, gzip, gzip, gzip")).toEqual({ unsupported: "gzip, gzip, gzip, gzip, gzip" });
  });

  it("decodes stacked codings in order, whole and streaming alike", async () => {
    const stacks: Array<[string, Buffer]> = [
      ["gzip, br", zlib.brotliCompressSync(zlib.gzipSync(TEXT))],
      ["br, gzip", zlib.gzipSync(zlib.brotliCompressSync(TEXT))],
      ["deflate, gzip", zlib.gzipSync(zlib.deflateSync(TEXT))],
      ["gzip, deflate", zlib.deflateRawSync(zlib.gzipSync(TEXT))],
      ["gzip, gzip, br", zlib.brotliCompressSync(zlib.gzipSync(zlib.gzipSync(TEXT)))],
    ];
    for (const [value, body] of stacks) {
      const expected = { body: TEXT, bytes: TEXT.length, cut: false };
      expect(whole(value, body), value).toEqual(expected);
      expect(await streamed(value, body), value).toEqual(expected);
    }
  });

  it("says why stacked codings fail when one of them does not decode", async () => {
    // Brotli around bytes that are not gzip.
    const body = zlib.brotliCompressSync(Buffer.from("not gzip at all"));
    expect(whole("gzip, br", body)).toBeUndefined();
    expect(await streamed("gzip, br", body)).toEqual({ failed: expect.stringMatching(/header/) });
  });

  it("cuts a stacked bomb at the limit, each stage fed no more than the limit and a margin", async () => {
    // 50 MB of zeros, gzipped (about 50 KB), then brotli-compressed (a few hundred bytes).
    const bomb = zlib.brotliCompressSync(zlib.gzipSync(Buffer.alloc(50 * 1024 * 1024), { level: 9 }));
    expect(bomb.length).toBeLessThan(1024);
    // At once it cannot be settled: the streaming decoder finds the cut.
    expect(whole("gzip, br", bomb)).toBeUndefined();
    expect(await streamed("gzip, br", bomb)).toEqual({ body: Buffer.alloc(LIMIT), bytes: LIMIT, cut: true });
    // The outer stage's output past the limit and its margin is not fed on: a gzip header whose comment is longer
    // than that (its "hi" comes after) decodes to nothing, and says it was cut.
    const plain = zlib.gzipSync("hi");
    const header = Buffer.from(plain.subarray(0, 10));
    header[3] = 0x10; // FCOMMENT: a zero-terminated comment follows the header
    const longHeader = Buffer.concat([
      header,
      Buffer.alloc(LIMIT + DECODE_SLACK, "c"),
      Buffer.from([0]),
      plain.subarray(10),
    ]);
    expect(zlib.gunzipSync(longHeader).toString()).toBe("hi");
    const stacked = zlib.brotliCompressSync(longHeader);
    expect(whole("gzip, br", stacked)).toBeUndefined();
    expect(await streamed("gzip, br", stacked)).toEqual({ body: Buffer.alloc(0), bytes: 0, cut: true });
  });

  it("decodes a body to exactly the limit whole, and one byte more as cut", async () => {
    const exact = zlib.gzipSync(Buffer.alloc(LIMIT, "x"));
    expect(whole("gzip", exact)).toEqual({ body: Buffer.alloc(LIMIT, "x"), bytes: LIMIT, cut: false });
    expect(await streamed("gzip", exact)).toEqual({ body: Buffer.alloc(LIMIT, "x"), bytes: LIMIT, cut: false });
    const over = zlib.gzipSync(Buffer.alloc(LIMIT + 1, "x"));
    expect(whole("gzip", over)).toBeUndefined();
    expect(await streamed("gzip", over)).toEqual({ body: Buffer.alloc(LIMIT, "x"), bytes: LIMIT, cut: true });
  });
});
