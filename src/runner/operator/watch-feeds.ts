// The watch page's frame feed: what each computer's Feed reports (watch.ts), fanned out to the page's viewers. The
// feeds run only while someone watches: all start when the first viewer connects and stop when the last one leaves,
// so an idle `watch` costs the computers nothing. A viewer who connects is shown at once what came before it (each
// computer's last frame, URL, tabs, error and recent log lines), and each viewer is sent the newest frame alone.
//
// On the live channel a frame is a binary message, every other message JSON text: a frame is the JPEG's bytes after
// a three-byte header (FRAME_KIND, then the computer's place in the page's list of computers, 16 bits big-endian).
// The page decodes it with createImageBitmap, off its main thread; a frame inside JSON as base64 would be parsed,
// turned into a data: URL and decoded on the page's main thread.
import { WebSocket } from "ws";
import type { TakeoverState } from "../../protocol/takeover";
import type { PersonInput, TakeoverRecord } from "./takeover";

/** One line of a computer's proxy log as the page shows it. */
export interface WatchLogLine {
  time: string;
  event: "request" | "refused";
  method: string;
  host: string;
  port: number;
  /** A request's status. */
  status?: number;
  /** Why a host was refused. */
  why?: string;
}

/** What a feed reports. */
export type FeedEvent =
  | { type: "frame"; data: string }
  | { type: "url"; url: string; title?: string }
  /** The computer's tabs, in the browser's order (the one on screen first), when they changed. */
  | { type: "tabs"; tabs: { id: string; url: string; title: string }[] }
  | { type: "log"; lines: WatchLogLine[] }
  | { type: "error"; message: string };

/** The live source of one computer. start() is called when the first viewer connects, stop() when the last leaves. */
export interface Feed {
  start(emit: (event: FeedEvent) => void): Promise<void>;
  stop(): Promise<void>;
  /** Sends a person's input to the tab on screen, adding what the evidence keeps of it to `record`. */
  act?(input: PersonInput, record: TakeoverRecord): Promise<void>;
}

/** A message on the page's live channel: a feed's event, for one computer, or the greeting. */
export type WatchMessage =
  | (FeedEvent & { computer: string })
  | { type: "hello"; stack: string; computers: string[]; takeover: boolean; operator?: string }
  | { type: "takeover"; computer: string; state: TakeoverState; mine: boolean };

/** The first byte of a frame's binary message. */
export const FRAME_KIND = 1;
/** The header before a frame's JPEG: FRAME_KIND and the computer's index in the page's computers (uint16 BE). */
export const FRAME_HEADER_BYTES = 3;

/** A frame's binary message: the header, then the JPEG (`data`: the screencast's base64). */
export function frameMessage(index: number, data: string): Buffer {
  const jpeg = Buffer.from(data, "base64");
  const message = Buffer.allocUnsafe(FRAME_HEADER_BYTES + jpeg.length);
  message.writeUInt8(FRAME_KIND, 0);
  message.writeUInt16BE(index, 1);
  jpeg.copy(message, FRAME_HEADER_BYTES);
  return message;
}

/**
 * A message of the live channel as the page reads it: JSON text, or a binary frame of `computers[index]` (its JPEG
 * as base64 in `data`, as the feed reported it); undefined for a binary message that is no frame of a known computer.
 */
export function readWatchMessage(data: Buffer, isBinary: boolean, computers: string[]): WatchMessage | undefined {
  if (!isBinary) return JSON.parse(data.toString("utf8")) as WatchMessage;
  if (data.length < FRAME_HEADER_BYTES || data.readUInt8(0) !== FRAME_KIND) return undefined;
  const computer = computers[data.readUInt16BE(1)];
  if (computer === undefined) return undefined;
  return { type: "frame", computer, data: data.subarray(FRAME_HEADER_BYTES).toString("base64") };
}

/** Log lines a new viewer gets of what came before it, per computer. */
const BACKLOG_LINES = 200;

/** The first line of an error's message: what the page shows of it. */
export function firstLine(error: unknown): string {
  return (error instanceof Error ? error.message : String(error)).split("\n")[0];
}

/**
 * Frames to one viewer, the newest alone: one frame is written at a time, and a frame that comes while the last is
 * still being written replaces the one waiting for that computer. A viewer slower than the screencast sees fewer
 * frames, never older ones, and once it catches up it is shown the newest (a still page sends no next frame to make
 * up for one skipped).
 */
class FrameSender {
  private writing = false;
  private readonly waiting = new Map<string, Buffer>();

  constructor(private readonly viewer: WebSocket) {}

  send(computer: string, frame: Buffer): void {
    this.waiting.delete(computer);
    this.waiting.set(computer, frame);
    this.next();
  }

  private next(): void {
    if (this.writing || this.viewer.readyState !== WebSocket.OPEN) return;
    const first = this.waiting.entries().next();
    if (first.done) return;
    const [computer, frame] = first.value;
    this.waiting.delete(computer);
    this.writing = true;
    this.viewer.send(frame, { binary: true }, () => {
      this.writing = false;
      this.next();
    });
  }
}

/** What a viewer who connects now is shown at once of a computer. */
interface Seen {
  /** The last frame's binary message. */
  frame?: Buffer;
  url?: WatchMessage;
  tabs?: WatchMessage;
  error?: WatchMessage;
  log: WatchLogLine[];
}

/** The feeds of a page's computers and the page's viewers: the feeds run while there is a viewer. */
export class LiveFeeds {
  readonly computers: string[];
  private readonly viewers = new Map<WebSocket, FrameSender>();
  private readonly last: Record<string, Seen>;
  private running = false;
  private transition: Promise<void> = Promise.resolve();

  /** `onFeeding` is told when the feeds are to start (true) or stop (false), before they do. */
  constructor(
    private readonly feeds: Record<string, Feed>,
    private readonly onFeeding: (feeding: boolean) => Promise<void>,
  ) {
    this.computers = Object.keys(feeds);
    this.last = Object.fromEntries(this.computers.map((c) => [c, { log: [] }]));
  }

  /** Viewers connected now. */
  viewerCount(): number {
    return this.viewers.size;
  }

  /** True while the feeds run. */
  feeding(): boolean {
    return this.running;
  }

  /** Sends `message` to every viewer (JSON text; a frame is sent by sendFrame). */
  broadcast(message: WatchMessage): void {
    const text = JSON.stringify(message);
    for (const viewer of this.viewers.keys()) if (viewer.readyState === WebSocket.OPEN) viewer.send(text);
  }

  /** Sends a computer's frame (its binary message) to every viewer, each through its FrameSender. */
  private sendFrame(computer: string, frame: Buffer): void {
    for (const [viewer, frames] of this.viewers) if (viewer.readyState === WebSocket.OPEN) frames.send(computer, frame);
  }

  /** A new viewer: sent `greeting`, then what came before it of each computer; the feeds start if they did not run. */
  add(viewer: WebSocket, greeting: WatchMessage[]): void {
    const frames = new FrameSender(viewer);
    this.viewers.set(viewer, frames);
    for (const message of greeting) viewer.send(JSON.stringify(message));
    for (const computer of this.computers) {
      const seen = this.last[computer];
      if (seen.url) viewer.send(JSON.stringify(seen.url));
      if (seen.tabs) viewer.send(JSON.stringify(seen.tabs));
      if (seen.error) viewer.send(JSON.stringify(seen.error));
      if (seen.frame) frames.send(computer, seen.frame);
      if (seen.log.length > 0) viewer.send(JSON.stringify({ type: "log", computer, lines: seen.log }));
    }
    viewer.on("error", () => undefined);
    viewer.on("close", () => {
      this.viewers.delete(viewer);
      this.settle();
    });
    this.settle();
  }

  /** Ends every viewer's connection, and resolves once the feeds stopped. */
  async close(): Promise<void> {
    for (const viewer of this.viewers.keys()) viewer.terminate();
    this.viewers.clear();
    this.settle();
    await this.transition;
  }

  private emitFor(computer: string): (event: FeedEvent) => void {
    return (event) => {
      // A feed stopping may still report its last event; nobody is there to see it.
      if (!this.running) return;
      const seen = this.last[computer];
      if (event.type === "frame") {
        seen.frame = frameMessage(this.computers.indexOf(computer), event.data);
        this.sendFrame(computer, seen.frame);
        return;
      }
      if (event.type === "url") seen.url = { ...event, computer };
      else if (event.type === "tabs") seen.tabs = { ...event, computer };
      else if (event.type === "error") seen.error = { ...event, computer };
      else seen.log = [...seen.log, ...event.lines].slice(-BACKLOG_LINES);
      this.broadcast({ ...event, computer });
    };
  }

  /** Starting and stopping follow the number of viewers, one transition at a time. */
  private settle(): void {
    this.transition = this.transition.then(async () => {
      const wanted = this.viewers.size > 0;
      if (wanted === this.running) return;
      this.running = wanted;
      await this.onFeeding(wanted);
      await Promise.all(
        this.computers.map(async (computer) => {
          const feed = this.feeds[computer];
          try {
            if (wanted) await feed.start(this.emitFor(computer));
            else await feed.stop();
          } catch (error) {
            if (wanted) this.emitFor(computer)({ type: "error", message: firstLine(error) });
          }
        }),
      );
      // Viewers may have come or gone meanwhile.
      this.settle();
    });
  }
}
