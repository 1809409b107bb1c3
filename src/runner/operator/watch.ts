// The feeds of `multienv watch` (watch-feeds.ts), one per computer, both through the gateway with the control token:
// - its screen: DevTools screencast frames of the tab on screen, followed as the agent switches tabs (watch-screen.ts);
// - its proxy log: the `request` and `refused` lines, what was appended read every second (an HTTP Range request).
// Watching only looks: nothing is sent to a page but the screencast's own commands.
import { parseLiveSiteProxyLog, type RefusedRecord, type RequestRecord } from "../../protocol/site-proxy";
import { errorMessage } from "../errors";
import { fetchProxyLogPiece, type ProxyLogPiece } from "../evidence/proxy-logs";
import type { GatewayAccess } from "../stack/outputs";
import type { Feed, FeedEvent, WatchLogLine } from "./watch-feeds";
import { ScreenFollower } from "./watch-screen";

/** How often the feed looks again for the tab on screen (the agent may switch tabs) and reads the proxy log. */
const FOLLOW_MS = 1_000;
/** The log lines a viewer gets of what happened before the feed started. */
const LOG_BACKLOG = 50;

/** The request and refusal lines of a log's text, as the page shows them. */
export function watchLines(text: string): WatchLogLine[] {
  return parseLiveSiteProxyLog(text)
    .filter((r): r is RequestRecord | RefusedRecord => r.event === "request" || r.event === "refused")
    .map((r) => ({
      time: r.time,
      event: r.event,
      method: r.method,
      host: r.host,
      port: r.port,
      ...(r.event === "request" ? { status: r.status } : { why: r.why }),
    }));
}

/**
 * Follows a growing log by the pieces read of it (../evidence/proxy-logs.ts, fetchProxyLogPiece): `part()` is what
 * to ask for next, `next(piece)` gives the complete lines added since the last call (a torn last line waits for the
 * next). The first read is the log's tail, whose first line is torn unless the tail starts the log. A log smaller
 * than what was read of it was started over (a restarted proxy); it is read from its start again.
 */
export class LogFollower {
  /** Where the next read starts: the end of the last complete line read. */
  private offset = 0;
  private started = false;

  constructor(private readonly tailBytes = 64 * 1024) {}

  part(): { from: number } | { last: number } {
    return this.started ? { from: this.offset } : { last: this.tailBytes };
  }

  next(piece: ProxyLogPiece): string {
    if (piece.size !== undefined && piece.size < this.offset) {
      // Started over (a restarted proxy): read from its start again.
      this.offset = 0;
      if (piece.start !== 0) return "";
    }
    let begin = this.offset - piece.start;
    if (!this.started) {
      this.started = true;
      begin = piece.start === 0 ? 0 : piece.bytes.indexOf(0x0a) + 1 || piece.bytes.length;
      this.offset = piece.start + begin;
    }
    if (begin < 0) begin = 0;
    const end = piece.bytes.lastIndexOf(0x0a) + 1;
    if (end <= begin) return "";
    this.offset = piece.start + end;
    return piece.bytes.subarray(begin, end).toString("utf8");
  }
}

/** A computer's live screen and proxy log, through the gateway: one look every FOLLOW_MS while the feed runs. */
export function computerFeed(access: GatewayAccess, computer: string): Feed {
  let timer: NodeJS.Timeout | undefined;
  let running = false;
  let busy = false;
  const screen = new ScreenFollower(access, computer, () => running);
  const follower = new LogFollower();

  // The log's lines appended since the last look (its last LOG_BACKLOG lines at the first).
  const readLog = async (emit: (event: FeedEvent) => void, first: boolean) => {
    try {
      const piece = await fetchProxyLogPiece(access.gatewayUrl, access.controlToken, computer, follower.part());
      const lines = watchLines(follower.next(piece));
      const shown = first ? lines.slice(-LOG_BACKLOG) : lines;
      if (shown.length > 0 && running) emit({ type: "log", lines: shown });
    } catch (error) {
      if (running) emit({ type: "error", message: errorMessage(error).split("\n")[0] });
    }
  };

  // One look: the tab on screen, its URL, the log's new lines.
  const look = async (emit: (event: FeedEvent) => void, first: boolean) => {
    if (busy || !running) return;
    busy = true;
    try {
      await screen.look(emit);
      await readLog(emit, first);
    } finally {
      busy = false;
    }
  };

  return {
    act: (input, record) => screen.act(input, record),
    async start(emit) {
      running = true;
      screen.restart();
      // A browser that does not answer yet is no failure of the feed: each look tries again.
      await look(emit, true);
      timer = setInterval(() => void look(emit, false), FOLLOW_MS);
    },
    async stop() {
      running = false;
      if (timer) clearInterval(timer);
      timer = undefined;
      while (busy) await new Promise((r) => setTimeout(r, 20));
      await screen.disconnect();
    },
  };
}
