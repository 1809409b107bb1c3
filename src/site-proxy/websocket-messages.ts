// A relayed WebSocket's messages for the request log: each side's bytes are read again, beside the relay, by the
// `ws` package's own frame parser (Receiver, with permessage-deflate when the two sides chose it), which a proxy
// should not hand-write. Only reading: what is relayed is the bytes as they came. A side whose frames cannot be read
// (a message past the limit, a broken frame) is no longer read; the relay goes on.
import type { Readable, Writable } from "node:stream";
// The namespace, not the default export: bundled, `ws` is its ES module wrapper, whose default (the WebSocket class)
// lacks the parts the CommonJS entry hangs on it.
import * as wsModule from "ws";

/** The parts of `ws` this uses, which its type declarations leave out. */
interface WsParts {
  Receiver: new (options: {
    isServer: boolean;
    maxPayload: number;
    extensions: Record<string, unknown>;
    skipUTF8Validation: boolean;
  }) => Writable & {
    on(event: "message", listener: (data: Buffer, isBinary: boolean) => void): unknown;
    on(event: "error", listener: (err: Error) => void): unknown;
  };
  PerMessageDeflate: (new (options: { isServer: boolean; maxPayload: number }) => {
    accept(configurations: unknown[]): unknown;
  }) & { extensionName: string };
  extension: { parse(header: string): Record<string, unknown[]> };
}

// Run from the TypeScript (tsx), the namespace is the CommonJS entry's, whose parts are on its default export.
const ws = ("Receiver" in wsModule
  ? wsModule
  : (wsModule as unknown as { default: unknown }).default) as unknown as WsParts;

/** A WebSocket message as the request log keeps it: text (opcode 1) or binary (opcode 2). */
export type MessageSink = (type: "send" | "receive", opcode: 1 | 2, data: Buffer) => void;

/** A reader of one direction's frames; undefined when the extensions chosen cannot be read. */
function reader(
  isServer: boolean,
  extensionsHeader: string | undefined,
  maxPayload: number,
  onMessage: (data: Buffer, isBinary: boolean) => void,
) {
  const extensions: Record<string, unknown> = {};
  if (extensionsHeader !== undefined && extensionsHeader.trim() !== "") {
    try {
      const offered = ws.extension.parse(extensionsHeader);
      for (const name of Object.keys(offered)) if (name !== ws.PerMessageDeflate.extensionName) return undefined;
      const deflate = offered[ws.PerMessageDeflate.extensionName];
      if (deflate !== undefined) {
        const pmd = new ws.PerMessageDeflate({ isServer, maxPayload });
        pmd.accept(deflate);
        extensions[ws.PerMessageDeflate.extensionName] = pmd;
      }
    } catch {
      return undefined;
    }
  }
  const receiver = new ws.Receiver({ isServer, maxPayload, extensions, skipUTF8Validation: true });
  receiver.on("message", onMessage);
  return receiver;
}

/** Resolves once every message of the bytes read so far is out of the reader: none waits for its inflate. */
export type MessagesSettled = () => Promise<void>;

/**
 * Reads `from`'s frames (after `first`, bytes it sent before the relay began) into `sink`, beside the relay; returns
 * when what was read so far is all in `sink`.
 */
function readSide(
  from: Readable,
  first: Buffer,
  type: "send" | "receive",
  extensionsHeader: string | undefined,
  maxPayload: number,
  sink: MessageSink,
): MessagesSettled {
  // The computer's frames are a client's (masked): read as a server reads them; the host's as a client does.
  const frames = reader(type === "send", extensionsHeader, maxPayload, (data, isBinary) =>
    sink(type, isBinary ? 2 : 1, data),
  );
  if (frames === undefined) return async () => {};
  // A copy: the reader unmasks a frame in place, and the relay sends on the bytes as they came.
  const onData = (chunk: Buffer) => frames.write(Buffer.from(chunk));
  frames.on("error", () => from.off("data", onData));
  if (first.length > 0) frames.write(Buffer.from(first));
  from.on("data", onData);
  // A compressed message is inflated off the loop, and its event comes after: the reader calls back a write once it
  // has parsed all written before it, so an empty write's callback is the moment every message read so far is out.
  return () =>
    new Promise<void>((resolve) => {
      if (frames.destroyed) return resolve();
      frames.write(Buffer.alloc(0), () => resolve());
    });
}

/**
 * Reads the messages of a WebSocket relayed between `computer` and `host`: `early` the computer's bytes sent before
 * the host switched protocols, `head` the host's after its 101, `extensionsHeader` the Sec-WebSocket-Extensions the
 * host chose. A message longer than `maxPayload` ends the reading of its side. Returns when what both sides sent so
 * far is all in `sink`.
 */
export function readWebSocketMessages(
  computer: Readable,
  host: Readable,
  early: Buffer,
  head: Buffer,
  extensionsHeader: string | undefined,
  maxPayload: number,
  sink: MessageSink,
): MessagesSettled {
  const sent = readSide(computer, early, "send", extensionsHeader, maxPayload, sink);
  const received = readSide(host, head, "receive", extensionsHeader, maxPayload, sink);
  return async () => void (await Promise.all([sent(), received()]));
}
