// Relaying bytes between two sockets until both sides are done, with the two waits docs/design.md bounds: a connection
// with no traffic either way ends after the idle timeout, and so does a write to a peer that stopped reading
// (even while the other direction is busy, which would keep the sockets' own idle timers from firing).
import type { Duplex } from "node:stream";
import { type BulkReads, chunkRetained } from "./bulk-reads";

/** Why a relayed socket was ended by the relay (`idle`, `stalled write`, an error code), for its log line. */
export const endedByRelay = new WeakMap<object, string>();

interface Relayed {
  setTimeout(ms: number): unknown;
  once(event: "timeout", listener: () => void): unknown;
}

/**
 * Copies `from` into `to`, pausing `from` while `to` is full. `onStall` runs when `to` has not drained
 * for `stallMs`.
 */
function forward(from: Duplex, to: Duplex, stallMs: number, onStall: () => void): void {
  let stallTimer: NodeJS.Timeout | undefined;
  const onDrain = () => {
    clearTimeout(stallTimer);
    stallTimer = undefined;
    from.resume();
  };
  from.on("data", (chunk: Buffer) => {
    if (!to.write(chunk) && stallTimer === undefined) {
      from.pause();
      stallTimer = setTimeout(onStall, stallMs);
      to.once("drain", onDrain);
    }
  });
  from.once("end", () => to.end());
  from.once("close", () => clearTimeout(stallTimer));
}

/** Like `forward`, for a socket whose reads come through `bulk` (bulk-reads.ts) rather than 'data' events. */
function forwardBulk(from: Duplex, bulk: BulkReads, to: Duplex, stallMs: number, onStall: () => void): void {
  let stallTimer: NodeJS.Timeout | undefined;
  const onDrain = () => {
    clearTimeout(stallTimer);
    stallTimer = undefined;
    from.resume();
  };
  bulk.attach((chunk) => {
    const flushed = to.write(chunk);
    if (to.writableLength > 0) chunkRetained();
    if (flushed) return true;
    if (stallTimer === undefined) {
      stallTimer = setTimeout(onStall, stallMs);
      to.once("drain", onDrain);
    }
    return false;
  });
  from.once("end", () => to.end());
  from.once("close", () => clearTimeout(stallTimer));
}

/**
 * Relays `client` <-> `upstream` until both are closed; why the relay ended them, when it did, is in
 * `endedByRelay`. `upstreamBulk` is given when the upstream socket was opened with bulk reads.
 */
export function relay(
  client: Duplex & Relayed,
  upstream: Duplex & Relayed,
  idleTimeoutMs: number,
  upstreamBulk?: BulkReads,
): void {
  let endedBy: string | undefined;
  const stop = (why: string) => {
    endedBy ??= why;
    endedByRelay.set(client, endedBy);
    endedByRelay.set(upstream, endedBy);
    client.destroy();
    upstream.destroy();
  };
  for (const socket of [client, upstream]) {
    socket.setTimeout(idleTimeoutMs);
    socket.once("timeout", () => stop("idle"));
    socket.on("error", (err: NodeJS.ErrnoException) => stop(err.code ?? err.message));
    // Each side ends the other's writing when it ends (half-close kept); only a side already gone ends both.
    if ((socket as Duplex).closed) stop("closed before the relay started");
  }
  forward(client, upstream, idleTimeoutMs, () => stop("stalled write"));
  if (upstreamBulk) forwardBulk(upstream, upstreamBulk, client, idleTimeoutMs, () => stop("stalled write"));
  else forward(upstream, client, idleTimeoutMs, () => stop("stalled write"));
}
