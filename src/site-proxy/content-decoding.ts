// A body's Content-Encoding undone for the request log: HAR's `content.text` is the decoded body, so a consumer that
// replays it (Playwright's routeFromHAR, the replay server, which drops Content-Encoding) serves what the site meant.
// Stacked codings (`gzip, br`: gzip applied first) are undone in turn, last applied first, each stage's output fed to
// the next. The decoding never costs more than the body limit: it keeps at most `limit` decoded bytes and stops there
// (a decompression bomb is cut, not inflated), and each stage is fed at most `limit` + DECODE_SLACK bytes, so what
// waits in a decoder is bounded too, however fast the body arrives.
// Two ways to the same result: a small body that arrived whole is decoded at once (`decodeWhole`, node:zlib's sync
// calls bounded by maxOutputLength: no stream, no thread-pool round trips, which cost more than the decoding of a
// page's usual assets), and any other body as it streams (`BodyDecoder`). Whatever the sync call cannot settle (a
// bound reached, an error) is left to the streaming decoder, so the two never differ in what they keep or say.
import * as zlib from "node:zlib";

/** The codings the log decodes (RFC 9110 8.4.1; x-gzip is gzip). */
export type ContentCoding = "gzip" | "deflate" | "br";

/**
 * Encoded bytes fed past the limit: what a coding's own framing costs (headers, stored blocks' lengths), so a body
 * that decodes to at most the limit is decoded whole.
 */
export const DECODE_SLACK = 64 * 1024;

/** The most codings one body may stack for the log to undo them (each is a decoder's worth of memory). */
export const MAX_STACKED_CODINGS = 4;

/**
 * What a Content-Encoding value asks: nothing to undo, the codings to undo in the order to undo them (the last
 * applied first), or a value the log does not decode.
 */
export function contentCoding(value: string | undefined): ContentCoding[] | "identity" | { unsupported: string } {
  const codings = (value ?? "")
    .split(",")
    .map((c) => c.trim().toLowerCase())
    .filter((c) => c !== "" && c !== "identity");
  if (codings.length === 0) return "identity";
  const known = codings.map((coding): ContentCoding | undefined =>
    coding === "gzip" || coding === "x-gzip" ? "gzip" : coding === "deflate" || coding === "br" ? coding : undefined,
  );
  if (codings.length > MAX_STACKED_CODINGS || known.includes(undefined)) return { unsupported: codings.join(", ") };
  return (known as ContentCoding[]).reverse();
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

/**
 * A whole body decoded at once, or undefined when that cannot settle it: a stage's output would pass its bound (the
 * streaming decoder then finds where the body is cut) or the bytes do not decode (it then says why, as it would have).
 */
export function decodeWhole(codings: readonly ContentCoding[], body: Buffer, limit: number): Decoded | undefined {
  let bytes = body;
  try {
    for (let i = 0; i < codings.length; i++) {
      const maxOutputLength = i === codings.length - 1 ? limit : limit + DECODE_SLACK;
      if (bytes.length > limit + DECODE_SLACK) return undefined;
      const coding = codings[i];
      if (coding === "gzip") bytes = zlib.gunzipSync(bytes, { maxOutputLength });
      else if (coding === "br") bytes = zlib.brotliDecompressSync(bytes, { maxOutputLength });
      else if (bytes.length < 2) return undefined;
      else if (zlibHeader(bytes[0], bytes[1])) bytes = zlib.inflateSync(bytes, { maxOutputLength });
      else bytes = zlib.inflateRawSync(bytes, { maxOutputLength });
    }
  } catch {
    return undefined;
  }
  return { body: bytes, bytes: bytes.length, cut: false };
}

type Decoder = zlib.Gunzip | zlib.Inflate | zlib.InflateRaw | zlib.BrotliDecompress;

/** One coding undone as its bytes stream: fed at most `feedLimit` bytes, its output handed on. */
class Stage {
  private decoder: Decoder | undefined;
  /** The first byte of a deflate body, held until the second tells zlib from raw deflate. */
  private head: Buffer | undefined;
  private fed = 0;
  /** False once no more is fed: the stage decodes what it has, then ends. */
  feeding = true;

  constructor(
    private readonly coding: ContentCoding,
    private readonly feedLimit: number,
    private readonly on: { data(chunk: Buffer): void; end(): void; error(message: string): void },
  ) {}

  /** Feeds a chunk; false when part of it was past what this stage may be fed (the body is cut there). */
  write(chunk: Buffer): boolean {
    if (!this.feeding || chunk.length === 0) return true;
    const room = this.feedLimit - this.fed;
    const part = chunk.length <= room ? chunk : chunk.subarray(0, room);
    this.fed += part.length;
    if (part.length > 0) this.feed(part);
    return part.length === chunk.length;
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

  private open(decoder: Decoder): void {
    this.decoder = decoder;
    decoder.on("data", (chunk: Buffer) => this.on.data(chunk));
    decoder.once("error", (err: Error) => this.on.error(err.message));
    decoder.once("end", () => this.on.end());
  }

  /** Every byte of its input was fed: what was fed must decode to its end. */
  end(): void {
    if (!this.feeding) return;
    this.feeding = false;
    if (this.head !== undefined) return this.on.error("unexpected end of file");
    if (this.decoder === undefined) return this.on.end();
    this.decoder.end();
  }

  /** Decodes what was fed and calls `then` once its output is handed on; false when nothing could decode. */
  flush(then: () => void): boolean {
    this.feeding = false;
    // One byte of deflate: too little for either kind, so nothing decodes of it.
    if (this.head !== undefined) return false;
    if (this.decoder === undefined) then();
    // What the flush decodes is emitted before its callback; the output is handed on by the turn after.
    else this.decoder.flush(() => setImmediate(then));
    return true;
  }

  destroy(): void {
    this.decoder?.destroy();
  }
}

export class BodyDecoder {
  private readonly stages: Stage[];
  private readonly kept: Buffer[] = [];
  private keptBytes = 0;
  private cut = false;
  private feeding = true;
  private failed: string | undefined;
  private done = false;
  private readonly settled: Promise<void>;
  private settle!: () => void;

  constructor(
    codings: readonly ContentCoding[],
    private readonly limit: number,
  ) {
    this.settled = new Promise((resolve) => (this.settle = resolve));
    this.stages = codings.map(
      (coding, i) =>
        new Stage(coding, limit + DECODE_SLACK, {
          data: (chunk) => this.stageOutput(i, chunk),
          // A stage that ended whole ends the next with it.
          end: () => (i === codings.length - 1 ? this.finishDecoding() : this.stages[i + 1].end()),
          error: (message) => {
            this.failed = message;
            this.finishDecoding();
          },
        }),
    );
  }

  /** Feeds a chunk of the body as it arrived. */
  write(chunk: Buffer): void {
    if (this.done || !this.feeding) return;
    // More arrived than may be fed: what was fed is decoded, and the body is cut there.
    if (!this.stages[0].write(chunk)) this.stop(0, true);
  }

  private stageOutput(i: number, chunk: Buffer): void {
    if (this.done) return;
    const next = this.stages[i + 1];
    if (next === undefined) return this.output(chunk);
    if (!next.feeding) return;
    if (!next.write(chunk)) this.stop(i + 1, true);
  }

  private output(chunk: Buffer): void {
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

  /** Stops feeding stage `from` (and those before it), decodes what it and those after it hold, then ends. */
  private stop(from: number, cut: boolean): void {
    if (this.done) return;
    this.feeding = false;
    if (cut) this.cut = true;
    for (const stage of this.stages.slice(0, from)) stage.feeding = false;
    const flush = (i: number): void => {
      if (this.done) return;
      if (i === this.stages.length) return this.finishDecoding();
      if (!this.stages[i].flush(() => flush(i + 1))) {
        this.failed = "unexpected end of file";
        this.finishDecoding();
      }
    };
    flush(from);
  }

  private finishDecoding(): void {
    if (this.done) return;
    this.done = true;
    for (const stage of this.stages) stage.destroy();
    this.settle();
  }

  /**
   * The body ended: `whole` when every byte of it arrived (what was fed must then decode to its end; a body the
   * exchange broke off is decoded as far as it goes).
   */
  async end(whole: boolean): Promise<Decoded> {
    if (!this.done && this.feeding) {
      this.feeding = false;
      if (whole) this.stages[0].end();
      else this.stop(0, false);
    }
    await this.settled;
    if (this.failed !== undefined) return { failed: this.failed };
    return { body: Buffer.concat(this.kept, this.keptBytes), bytes: this.keptBytes, cut: this.cut };
  }
}
