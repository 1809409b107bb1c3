// Reading a tunnel's upstream socket into one large shared buffer instead of node's default of a fresh 64 KiB
// buffer per read pushed through a Readable stream: about a third less CPU per byte relayed (bench/proxy.ts), and
// no memory held by a tunnel between reads, so idle tunnels stay small.
//
// Sharing is safe because reads run one at a time on the event loop and each chunk is handed on before the next
// read: when the write it is handed to leaves it queued (the peer's socket buffer was full), the chunk is still
// referenced by that write, so later reads go to a fresh buffer instead.

/** Large enough for a full loopback socket buffer in one read. */
const READ_BUFFER_BYTES = 256 * 1024;

let shared = Buffer.allocUnsafe(READ_BUFFER_BYTES);

/** Call when a chunk from a bulk read was left queued in a write: the shared buffer may not be reused. */
export function chunkRetained(): void {
  shared = Buffer.allocUnsafe(READ_BUFFER_BYTES);
}

export type Sink = (chunk: Buffer) => boolean;

/** The `onread` option of one socket, and where its chunks go (bytes that arrive before `attach` are kept). */
export class BulkReads {
  private sink: Sink | undefined;
  private early: Buffer[] = [];

  /** Pass as `net.connect({ onread })`. */
  readonly onread = {
    buffer: () => shared,
    // Returning false pauses the socket until it is resumed.
    callback: (bytes: number, buffer: Uint8Array): boolean => {
      const chunk = Buffer.from(buffer.buffer, buffer.byteOffset, bytes);
      if (this.sink) return this.sink(chunk);
      this.early.push(Buffer.from(chunk)); // a copy: the shared buffer is reused by the next read
      return true;
    },
  };

  /** Sends every chunk read from now on (and any read before) to `sink`. */
  attach(sink: Sink): void {
    this.sink = sink;
    for (const chunk of this.early.splice(0)) sink(chunk);
  }
}
