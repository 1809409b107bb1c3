// A body's Content-Encoding undone for the request log, as it streams: HAR's `content.text` is the decoded body, so
// a consumer that replays it (Playwright's routeFromHAR, the replay server, which drops Content-Encoding) serves what
// the site meant. The decoding never costs more than the body limit: it keeps at most `limit` decoded bytes and stops
// there (a decompression bomb is cut, not inflated), and it is fed at most `limit` + DECODE_SLACK encoded bytes, so
// what waits in the decoder is bounded too, however fast the body arrives.
import * as zlib from "node:zlib";

/** The codings the log decodes (RFC 9110 8.4.1; x-gzip is gzip). */
export type ContentCoding = "gzip" | "deflate" | "br";

/**
 * Encoded bytes fed past the limit: what a coding's own framing costs (headers, stored blocks' lengths), so a body
 * that decodes to at most the limit is decoded whole.
 */
export const DECODE_SLACK = 64 * 1024;

/** What a Content-Encoding value asks: nothing to undo, one coding the log decodes, or one it does not. */
export function contentCoding(value: string | undefined): ContentCoding | "identity" | { unsupported: string } {
  const codings = (value ?? "")
    .split(",")
    .map((c) => c.trim().toLowerCase())
    .filter((c) => c !== "" && c !== "identity");
  if (codings.length === 0) return "identity";
  if (codings.length === 1) {
    const [coding] = codings;
    if (coding === "gzip" || coding === "x-gzip") return "gzip";
    if (coding === "deflate" || coding === "br") return coding;
  }
  return { unsupported: codings.join(", ") };
}

/** A decoding's outcome: the decoded bytes kept, or why decoding failed. */
export type Decoded =
  | {
      /** The decoded bytes kept: at most the limit. */
      body: Buffer;
      /** The decoded size: the whole body's unless `cut`. */
      bytes: number;
      /** Decoding stopped before the body's end: the limit was reached, or more was encoded than it may be fed. */
      cut: boolean;
    }
  | { failed: string };

/** True when two bytes open a zlib stream (RFC 1950): HTTP's "deflate", though some servers send raw deflate. */
function zlibHeader(first: number, second: number): boolean {
  return (first & 0x0f) === 8 && ((first << 8) | second) % 31 === 0;
}

export class BodyDecoder {
  private decoder: zlib.Gunzip | zlib.Inflate | zlib.InflateRaw | zlib.BrotliDecompress | undefined;
  /** The first byte of a deflate body, held until the second tells zlib from raw deflate. */
  private head: Buffer | undefined;
  private readonly kept: Buffer[] = [];
  private keptBytes = 0;
  private fed = 0;
  private cut = false;
  /** False once no more is fed: the decoder decodes what it has, then ends. */
  private feeding = true;
  private failed: string | undefined;
  private done = false;
  private readonly settled: Promise<void>;
  private settle!: () => void;

  constructor(
    private readonly coding: ContentCoding,
    private readonly limit: number,
  ) {
    this.settled = new Promise((resolve) => (this.settle = resolve));
  }

  /** Feeds a chunk of the body as it arrived. */
  write(chunk: Buffer): void {
    if (this.done || !this.feeding || chunk.length === 0) return;
    const room = this.limit + DECODE_SLACK - this.fed;
    const part = chunk.length <= room ? chunk : chunk.subarray(0, room);
    this.fed += part.length;
    this.feed(part);
    // More arrived than may be fed: what was fed is decoded, and the body is cut there.
    if (part.length < chunk.length) this.stop(true);
  }

  private feed(part: Buffer): void {
    if (this.decoder === undefined) {
      if (this.coding === "deflate") {
        const head = this.head ? Buffer.concat([this.head, part]) : part;
        if (head.length < 2) return void (this.head = head);
        this.head = undefined;
        this.open(zlibHeader(head[0], head[1]) ? zlib.createInflate() : zlib.createInflateRaw());
        return void this.decoder!.write(head);
      }
      this.open(this.coding === "gzip" ? zlib.createGunzip() : zlib.createBrotliDecompress());
    }
    this.decoder!.write(part);
  }

  private open(decoder: NonNullable<BodyDecoder["decoder"]>): void {
    this.decoder = decoder;
    decoder.on("data", (chunk: Buffer) => this.output(chunk));
    decoder.once("error", (err: Error) => {
      this.failed = err.message;
      this.finishDecoding();
    });
    decoder.once("end", () => this.finishDecoding());
  }

  private output(chunk: Buffer): void {
    if (this.done) return;
    const room = this.limit - this.keptBytes;
    if (chunk.length <= room) {
      this.kept.push(chunk);
      this.keptBytes += chunk.length;
      return;
    }
    // Past the limit: what fits is kept and the decoding ends here, so a bomb costs no more than the limit.
    if (room > 0) this.kept.push(chunk.subarray(0, room));
    this.keptBytes += room;
    this.cut = true;
    this.finishDecoding();
  }

  /** Decodes what was fed, then ends: `cut` says the body went on past it. */
  private stop(cut: boolean): void {
    if (this.done || !this.feeding) return;
    this.feeding = false;
    if (cut) this.cut = true;
    if (this.head !== undefined) {
      // One byte of deflate: too little for either kind, so nothing decodes of it.
      this.failed = "unexpected end of file";
      return this.finishDecoding();
    }
    const decoder = this.decoder;
    if (decoder === undefined) return this.finishDecoding();
    // What the flush decodes is emitted before its callback; the decoding ends on the turn after.
    decoder.flush(() => setImmediate(() => this.finishDecoding()));
  }

  private finishDecoding(): void {
    if (this.done) return;
    this.done = true;
    this.decoder?.destroy();
    this.settle();
  }

  /**
   * The body ended: `whole` when every byte of it arrived (what was fed must then decode to its end; a body the
   * exchange broke off is decoded as far as it goes).
   */
  async end(whole: boolean): Promise<Decoded> {
    if (!this.done && this.feeding) {
      if (whole && this.head === undefined && this.decoder !== undefined) {
        this.feeding = false;
        this.decoder.end();
      } else this.stop(false);
    }
    await this.settled;
    if (this.failed !== undefined) return { failed: this.failed };
    return { body: Buffer.concat(this.kept, this.keptBytes), bytes: this.keptBytes, cut: this.cut };
  }
}
