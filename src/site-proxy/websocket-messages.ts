// A relayed WebSocket's messages for the request log: each side's bytes are read again, beside the relay. Only
// reading: what is relayed is the bytes as they came. The frames are read here rather than by `ws`'s Receiver, which
// holds a whole message before handing it on and stops for good at the first one past its limit: a log that did so
// would go blind to every later message of that side, for a few dozen bytes of permessage-deflate. Here a message is
// read as it streams: its first `keepBytes` (decoded) bytes kept, every byte counted, and the next message read
// whatever came before. A compressed message is inflated whole (with context takeover the next one needs its
// window), its output past `keepBytes` counted and let go, up to MAX_INFLATED_BYTES a message: past that, or when
// inflating fails, that side's compressed messages are counted by their bytes on the wire alone. A frame that breaks
// the protocol (which the receiving end closes on) ends the reading of its side; the relay goes on.
import type { Readable } from "node:stream";
import * as zlib from "node:zlib";
// The namespace, not the default export: bundled, `ws` is its ES module wrapper, whose default (the WebSocket class)
// lacks the parts the CommonJS entry hangs on it.
import * as wsModule from "ws";

/** The parts of `ws` this uses (RFC 7692's extension header parser), which its type declarations leave out. */
interface WsParts {
  extension: { parse(header: string): Record<string, Record<string, unknown[]>[]> };
}

// Run from the TypeScript (tsx), the namespace is the CommonJS entry's, whose parts are on its default export.
const ws = ("extension" in wsModule
  ? wsModule
  : (wsModule as unknown as { default: unknown }).default) as unknown as WsParts;

const PERMESSAGE_DEFLATE = "permessage-deflate";

/**
 * The most one compressed message is inflated to (what `ws` takes as a message by default): past it, inflating that
 * side stops, so a few bytes on the wire cost the proxy no more than this each.
 */
export const MAX_INFLATED_BYTES = 100 * 1024 * 1024;

/** RFC 7692: what a message's compressed bytes end with once the sender's trailing empty block is put back. */
const DEFLATE_TAIL = Buffer.from([0x00, 0x00, 0xff, 0xff]);

/** A WebSocket message as read for the log. */
export interface ReadMessage {
  type: "send" | "receive";
  /** 1 text, 2 binary. */
  opcode: 1 | 2;
  /** Seconds since the epoch when its last frame arrived. */
  time: number;
  /** Its first bytes, up to the reader's `keepBytes` (decoded, when it was compressed and could be inflated). */
  data: Buffer;
  /** Its size, decoded; undefined when it was compressed and could not be inflated (then `wireBytes` alone). */
  bytes: number | undefined;
  /** Its payload's size on the wire (compressed, when it was). */
  wireBytes: number;
}

export type MessageSink = (message: ReadMessage) => void;

/** Resolves once every message of the bytes read so far is out of the reader: none waits for its inflate. */
export type MessagesSettled = () => Promise<void>;

interface FrameHeader {
  headerBytes: number;
  fin: boolean;
  rsv1: boolean;
  /** RSV2 or RSV3: no extension this reads sets them. */
  otherRsv: boolean;
  opcode: number;
  mask: Buffer | undefined;
  payloadBytes: number;
}

/** A frame's header (RFC 6455 section 5.2) from the bytes so far: "more" when they do not hold all of it yet. */
function frameHeader(bytes: Buffer): FrameHeader | "more" | "broken" {
  if (bytes.length < 2) return "more";
  const short = bytes[1] & 0x7f;
  const lengthBytes = short === 126 ? 2 : short === 127 ? 8 : 0;
  const masked = (bytes[1] & 0x80) !== 0;
  const headerBytes = 2 + lengthBytes + (masked ? 4 : 0);
  if (bytes.length < headerBytes) return "more";
  let payloadBytes = short;
  if (short === 126) payloadBytes = bytes.readUInt16BE(2);
  else if (short === 127) {
    const long = bytes.readBigUInt64BE(2);
    if (long > BigInt(Number.MAX_SAFE_INTEGER)) return "broken";
    payloadBytes = Number(long);
  }
  return {
    headerBytes,
    fin: (bytes[0] & 0x80) !== 0,
    rsv1: (bytes[0] & 0x40) !== 0,
    otherRsv: (bytes[0] & 0x30) !== 0,
    opcode: bytes[0] & 0x0f,
    mask: masked ? Buffer.from(bytes.subarray(2 + lengthBytes, headerBytes)) : undefined,
    payloadBytes,
  };
}

/** Payload bytes `at` bytes into their frame, unmasked (a copy: the relay sends on the bytes as they came). */
function unmasked(part: Buffer, mask: Buffer | undefined, at: number): Buffer {
  if (mask === undefined) return part;
  const out = Buffer.allocUnsafe(part.length);
  for (let i = 0; i < part.length; i++) out[i] = part[i] ^ mask[(at + i) & 3];
  return out;
}

/** The message being read: its frames so far. */
interface Message {
  opcode: 1 | 2;
  compressed: boolean;
  kept: Buffer[];
  keptBytes: number;
  bytes: number;
  wireBytes: number;
  /** Inflating it stopped (too long, or broken): only its wire bytes are known. */
  undecodable: boolean;
}

/** One side's frames read into messages. */
class SideReader {
  private header = Buffer.alloc(0);
  /** The frame whose payload is being read, and how much of it is left. */
  private frame: FrameHeader | undefined;
  private payloadLeft = 0;
  /** How far into the frame's payload: where the mask is. */
  private payloadAt = 0;
  private message: Message | undefined;
  private done = false;
  private inflater: zlib.InflateRaw | undefined;
  /** Inflating stopped for this side: its compressed messages are counted by their wire bytes. */
  private inflateStopped = false;
  /** The message whose compressed bytes the inflater is decoding now. */
  private inflating: Message | undefined;
  /** Every step after the first compressed message waits for those before it, so messages come out in order. */
  private chain: Promise<void> = Promise.resolve();
  private chained = false;

  constructor(
    private readonly type: "send" | "receive",
    /** permessage-deflate was chosen, and whether its sender starts each message afresh (no context takeover). */
    private readonly deflate: { fresh: boolean } | undefined,
    private readonly keepBytes: number,
    private readonly sink: MessageSink,
  ) {}

  /** Reads a chunk of the side's bytes. */
  write(chunk: Buffer): void {
    let at = 0;
    while (at < chunk.length && !this.done) {
      if (this.frame === undefined) {
        const before = this.header.length;
        const taken = chunk.subarray(at, at + 14 - before);
        const bytes = before === 0 ? taken : Buffer.concat([this.header, taken]);
        const header = frameHeader(bytes);
        if (header === "more") {
          this.header = Buffer.from(bytes);
          at += taken.length;
          continue;
        }
        this.header = Buffer.alloc(0);
        at += header === "broken" ? 0 : header.headerBytes - before;
        if (header === "broken" || !this.startFrame(header)) return this.stop();
      } else {
        const part = chunk.subarray(at, at + this.payloadLeft);
        at += part.length;
        this.payload(part);
      }
      if (this.frame !== undefined && this.payloadLeft === 0) this.endFrame();
    }
  }

  /** False when the frame breaks the protocol. */
  private startFrame(header: FrameHeader): boolean {
    const { opcode } = header;
    if (header.otherRsv) return false;
    if (opcode >= 8) {
      // Control frames (close, ping, pong) are no messages; they may stand between a message's frames.
      if (!header.fin || header.payloadBytes > 125 || header.rsv1 || opcode > 10) return false;
      if (opcode === 8) this.done = true;
    } else if (opcode === 0) {
      if (this.message === undefined || header.rsv1) return false;
    } else if (opcode === 1 || opcode === 2) {
      if (this.message !== undefined || (header.rsv1 && this.deflate === undefined)) return false;
      const compressed = header.rsv1;
      this.message = {
        opcode,
        compressed,
        kept: [],
        keptBytes: 0,
        bytes: 0,
        wireBytes: 0,
        undecodable: compressed && this.inflateStopped,
      };
    } else return false;
    this.frame = header;
    this.payloadLeft = header.payloadBytes;
    this.payloadAt = 0;
    return true;
  }

  private payload(part: Buffer): void {
    const frame = this.frame!;
    const at = this.payloadAt;
    this.payloadLeft -= part.length;
    this.payloadAt += part.length;
    const message = this.message;
    if (frame.opcode >= 8 || message === undefined) return;
    message.wireBytes += part.length;
    if (message.compressed) {
      if (message.undecodable) return;
      const compressed = unmasked(part, frame.mask, at);
      return this.step(() => this.inflate(message, compressed));
    }
    message.bytes += part.length;
    const room = this.keepBytes - message.keptBytes;
    // A copy of what is kept, not a view holding the whole chunk it came in.
    if (room > 0) this.keep(message, Buffer.from(unmasked(part.subarray(0, room), frame.mask, at)));
  }

  private keep(message: Message, decoded: Buffer): void {
    const room = this.keepBytes - message.keptBytes;
    if (room <= 0) return;
    const part = decoded.length <= room ? decoded : decoded.subarray(0, room);
    message.kept.push(part);
    message.keptBytes += part.length;
  }

  private endFrame(): void {
    const frame = this.frame!;
    this.frame = undefined;
    const message = this.message;
    if (frame.opcode >= 8 || !frame.fin || message === undefined) return;
    this.message = undefined;
    const time = Date.now() / 1000;
    if (message.compressed && !message.undecodable) this.step(() => this.inflated(message, time));
    else this.step(() => this.emit(message, time));
  }

  /** Runs `what` once every step before it is done (at once when none waits). */
  private step(what: () => void | Promise<void>): void {
    if (!this.chained) {
      const result = what();
      if (result === undefined) return;
      this.chained = true;
      this.chain = result;
      return;
    }
    // A step that fails loses its own message alone: the chain goes on.
    this.chain = this.chain.then(what).catch(() => undefined);
  }

  private inflate(message: Message, compressed: Buffer): void {
    if (message.undecodable || compressed.length === 0) return;
    if (this.inflater === undefined) {
      const inflater = zlib.createInflateRaw({ windowBits: 15 });
      inflater.on("data", (chunk: Buffer) => this.inflatedChunk(chunk));
      inflater.on("error", () => this.stopInflating());
      this.inflater = inflater;
    }
    this.inflating = message;
    this.inflater.write(compressed);
  }

  private inflatedChunk(chunk: Buffer): void {
    const message = this.inflating;
    if (message === undefined || message.undecodable) return;
    message.bytes += chunk.length;
    this.keep(message, chunk);
    if (message.bytes > MAX_INFLATED_BYTES) this.stopInflating();
  }

  /** Inflating this side stops for good: the message being inflated and every later compressed one are undecodable. */
  private stopInflating(): void {
    this.inflateStopped = true;
    if (this.inflating !== undefined) this.inflating.undecodable = true;
    if (this.message?.compressed) this.message.undecodable = true;
    this.inflater?.destroy();
    this.inflater = undefined;
  }

  /** Resolves once the message's compressed bytes are all inflated and handed on, then emits it. */
  private inflated(message: Message, time: number): Promise<void> | void {
    const inflater = this.inflater;
    if (message.undecodable || inflater === undefined) return this.emit(message, time);
    this.inflating = message;
    return new Promise<void>((resolve) => {
      let finished = false;
      const finish = () => {
        if (finished) return;
        finished = true;
        inflater.off("close", finish);
        // What the flush inflates is emitted before its callback; it is all handed on by the turn after.
        setImmediate(() => {
          this.inflating = undefined;
          if (this.deflate?.fresh && this.inflater === inflater) {
            inflater.destroy();
            this.inflater = undefined;
          }
          this.emit(message, time);
          resolve();
        });
      };
      inflater.write(DEFLATE_TAIL);
      inflater.flush(zlib.constants.Z_SYNC_FLUSH, finish);
      // A stream that fails, or is destroyed for its size, calls back no flush.
      inflater.once("close", finish);
    }).then(() => undefined);
  }

  private emit(message: Message, time: number): void {
    const undecodable = message.compressed && message.undecodable;
    this.sink({
      type: this.type,
      opcode: message.opcode,
      time,
      data: undecodable ? Buffer.alloc(0) : Buffer.concat(message.kept, message.keptBytes),
      bytes: undecodable ? undefined : message.bytes,
      wireBytes: message.wireBytes,
    });
  }

  private stop(): void {
    this.done = true;
  }

  /** Resolves once every message read so far is handed on. */
  settled(): Promise<void> {
    return this.chain;
  }
}

/** Whether a side's messages can be read with the extensions the host chose, and how. */
function deflateFor(
  type: "send" | "receive",
  extensionsHeader: string | undefined,
): { fresh: boolean } | undefined | "unreadable" {
  if (extensionsHeader === undefined || extensionsHeader.trim() === "") return undefined;
  let chosen: Record<string, Record<string, unknown[]>[]>;
  try {
    chosen = ws.extension.parse(extensionsHeader);
  } catch {
    return "unreadable";
  }
  for (const name of Object.keys(chosen)) if (name !== PERMESSAGE_DEFLATE) return "unreadable";
  const params = chosen[PERMESSAGE_DEFLATE]?.[0];
  if (params === undefined) return undefined;
  // The computer's frames are the client's; the host's the server's.
  return { fresh: `${type === "send" ? "client" : "server"}_no_context_takeover` in params };
}

/**
 * Reads `from`'s frames (after `first`, bytes it sent before the relay began) into `sink`, beside the relay; returns
 * when what was read so far is all in `sink`.
 */
function readSide(
  from: Readable,
  first: Buffer,
  type: "send" | "receive",
  extensionsHeader: string | undefined,
  keepBytes: number,
  sink: MessageSink,
): MessagesSettled {
  const deflate = deflateFor(type, extensionsHeader);
  if (deflate === "unreadable") return async () => {};
  const reader = new SideReader(type, deflate, keepBytes, sink);
  if (first.length > 0) reader.write(first);
  from.on("data", (chunk: Buffer) => reader.write(chunk));
  return () => reader.settled();
}

/**
 * Reads the messages of a WebSocket relayed between `computer` and `host`: `early` the computer's bytes sent before
 * the host switched protocols, `head` the host's after its 101, `extensionsHeader` the Sec-WebSocket-Extensions the
 * host chose; of each message its first `keepBytes` (decoded) bytes are kept and its size counted. Returns when what
 * both sides sent so far is all in `sink`.
 */
export function readWebSocketMessages(
  computer: Readable,
  host: Readable,
  early: Buffer,
  head: Buffer,
  extensionsHeader: string | undefined,
  keepBytes: number,
  sink: MessageSink,
): MessagesSettled {
  const sent = readSide(computer, early, "send", extensionsHeader, keepBytes, sink);
  const received = readSide(host, head, "receive", extensionsHeader, keepBytes, sink);
  return async () => void (await Promise.all([sent(), received()]));
}
