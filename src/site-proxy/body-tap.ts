// One body of an exchange as it crosses the wire, for the request log: its first bytes kept up to the limit, every
// byte counted and hashed as it streams, and its Content-Encoding (stacked codings too) decoded up to the limit of
// decoded bytes (content-decoding.ts): at its end when it is small and arrived whole, else as it streams.
import { createHash, hash, type Hash } from "node:crypto";
import type { BodyDigest } from "../protocol/request-log";
import { BodyDecoder, contentCoding, decodeWhole, type ContentCoding, type Decoded } from "./content-decoding";

/** What a body's Content-Encoding made of it: decoded, or why it is kept as it arrived. */
export type BodyDecoding = { coding: string } & (Decoded | { unsupported: true });

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
export const STREAMED = Symbol("streamed");

/**
 * One body passing as it crossed the wire: its first `limit` bytes kept, every byte counted and hashed (a body kept
 * whole is hashed when it ends, from what was kept; a longer one as it passes, from the chunk that passes the limit).
 */
export class BodyTap {
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
