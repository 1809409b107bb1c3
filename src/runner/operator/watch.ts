// The feeds of `multienv watch` (watch-server.ts), one per computer, both through the gateway with the control token:
// - its screen: DevTools screencast frames (`Page.startScreencast` on a CDP session of the tab on screen, as the
//   browser's target list says: screens.ts), following it as the agent opens, closes or switches tabs, and the tab's
//   URL as it navigates;
// - its proxy log: the `request` and `refused` lines, what was appended read every second (an HTTP Range request).
// Watching only looks: nothing is sent to a page but the screencast's own commands.
import { chromium, type Browser, type BrowserContext, type CDPSession, type Page } from "playwright-core";
import { gatewayClient } from "../../protocol/gateway-client";
import { parseLiveSiteProxyLog, type RefusedRecord, type RequestRecord } from "../../protocol/site-proxy";
import { errorMessage } from "../errors";
import { fetchProxyLogPiece, type ProxyLogPiece } from "../evidence/proxy-logs";
import type { GatewayAccess } from "../stack/outputs";
import { activateTab, bounded, pageOfTarget, pageTargets, type PageTarget } from "./screens";
import { dispatchPersonInput, type FrameSize } from "./takeover";
import type { Feed, FeedEvent, WatchLogLine } from "./watch-server";

/** How often the feed looks again for the tab on screen (the agent may switch tabs) and reads the proxy log. */
const FOLLOW_MS = 1_000;
/** The log lines a viewer gets of what happened before the feed started. */
const LOG_BACKLOG = 50;

/**
 * The screencast's frames, at most 960x600: Chromium draws the next frame only once the last is encoded and sent,
 * and the frame's size is what that costs. Straight from a headful Chromium on a 1280x800 screen (the frames
 * acknowledged at once, a page changing every animation frame), frames of 960x600 came about twice as often as
 * full-size ones (9.5 to 13.5 against 4.0 to 7.0 per second on a loaded machine), while JPEG quality 40 against 70,
 * or acknowledging 20 ms later, changed nothing beyond the noise. A person's input is placed by the frame's own size
 * in CSS pixels (its metadata), so a smaller picture moves nothing.
 */
export const SCREENCAST = { format: "jpeg", quality: 70, maxWidth: 960, maxHeight: 600 } as const;

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

/** The screencast of one tab on a CDP session. */
async function screencast(
  context: BrowserContext,
  page: Page,
  emit: (event: FeedEvent) => void,
  onSize: (size: FrameSize) => void,
): Promise<CDPSession> {
  const session = await bounded(context.newCDPSession(page), "DevTools Target.attachToTarget");
  session.on(
    "Page.screencastFrame",
    (frame: { data: string; sessionId: number; metadata: { deviceWidth: number; deviceHeight: number } }) => {
      // Chromium sends the next frame once this one is acknowledged.
      void session.send("Page.screencastFrameAck", { sessionId: frame.sessionId }).catch(() => undefined);
      // A person's input is placed on the frame the page shows: its size in the tab's CSS pixels.
      onSize({ width: frame.metadata.deviceWidth, height: frame.metadata.deviceHeight });
      emit({ type: "frame", data: frame.data });
    },
  );
  try {
    await bounded(session.send("Page.startScreencast", SCREENCAST), "DevTools Page.startScreencast");
  } catch (error) {
    void session.detach().catch(() => undefined);
    throw error;
  }
  return session;
}

/** A URL's host, or "" for one without (about:blank). */
function hostOf(url: string): string {
  return URL.canParse(url) ? new URL(url).host : "";
}

/** A computer's live screen and proxy log, through the gateway. */
export function computerFeed(access: GatewayAccess, computer: string): Feed {
  let browser: Browser | undefined;
  let session: CDPSession | undefined;
  let page: Page | undefined;
  /** The size of the last frame of the screencast under way, in its tab's CSS pixels. */
  let frameSize: FrameSize | undefined;
  let timer: NodeJS.Timeout | undefined;
  let running = false;
  let busy = false;
  /** The URL last shown; undefined: none shown since (re)connecting. */
  let lastUrl: string | undefined;
  /** The tabs last listed to the page: a person may switch to these alone. */
  let tabs: PageTarget[] = [];
  let lastTabs: string | undefined;
  const follower = new LogFollower();

  const stopScreencast = async () => {
    const old = session;
    session = undefined;
    page = undefined;
    if (old) {
      await bounded(old.send("Page.stopScreencast"), "DevTools Page.stopScreencast").catch(() => undefined);
      await bounded(old.detach(), "DevTools Target.detachFromTarget").catch(() => undefined);
    }
  };

  const connect = async (emit: (event: FeedEvent) => void) => {
    let connected: Browser;
    try {
      const gateway = gatewayClient(access);
      connected = await chromium.connectOverCDP(gateway.cdpUrl(computer), {
        headers: { Authorization: gateway.authorization() },
        timeout: 30_000,
      });
    } catch (error) {
      emit({
        type: "error",
        message: `computer ${computer}'s browser did not answer on DevTools through the gateway: ${errorMessage(error).split("\n")[0]}; trying again`,
      });
      return;
    }
    if (!running) {
      await connected.close().catch(() => undefined);
      return;
    }
    browser = connected;
    // The browser restarted (its launcher brings a dead one back) or the gateway went away: the next look connects
    // again, and the screencast starts over on whatever tab is then on screen.
    connected.on("disconnected", () => {
      if (browser !== connected) return;
      browser = undefined;
      session = undefined;
      page = undefined;
      lastUrl = undefined;
      lastTabs = undefined;
      if (running)
        emit({ type: "error", message: `computer ${computer}'s DevTools connection closed; connecting again` });
    });
  };

  // The screencast on the tab on screen, switched to it when the agent switched tabs; its URL when it changed.
  const followScreen = async (context: BrowserContext, emit: (event: FeedEvent) => void) => {
    const listed = await pageTargets(access, computer);
    const [target] = listed;
    tabs = listed;
    const tabsText = JSON.stringify(listed);
    if (tabsText !== lastTabs) {
      lastTabs = tabsText;
      emit({ type: "tabs", tabs: listed.map(({ id, url, title }) => ({ id, url, title })) });
    }
    const onScreen = target === undefined ? undefined : await pageOfTarget(context, target.id);
    // A tab so new that this connection has not seen it yet: the next look has.
    if (target !== undefined && onScreen === undefined) return;
    if (running && onScreen !== page) {
      await stopScreencast();
      if (onScreen !== undefined) {
        frameSize = undefined;
        session = await screencast(context, onScreen, emit, (size) => (frameSize = size));
        page = onScreen;
      }
    }
    const url = page === undefined ? "" : (target?.url ?? "");
    if (url !== lastUrl) {
      lastUrl = url;
      emit({ type: "url", url: url || "(no tab open)", title: page === undefined ? "" : (target?.title ?? "") });
    }
  };

  // One look: the tab on screen, its URL, the log's new lines.
  const look = async (emit: (event: FeedEvent) => void, first: boolean) => {
    if (busy || !running) return;
    busy = true;
    try {
      if (browser === undefined) await connect(emit);
      const context = browser?.contexts()[0];
      if (running && context !== undefined) {
        try {
          await followScreen(context, emit);
        } catch (error) {
          // A tab that closed while it was looked at, or DevTools not answering: the next look tries again.
          if (running) {
            emit({ type: "error", message: errorMessage(error).split("\n")[0] });
            await stopScreencast();
          }
        }
      }
      try {
        const piece = await fetchProxyLogPiece(access.gatewayUrl, access.controlToken, computer, follower.part());
        const lines = watchLines(follower.next(piece));
        const shown = first ? lines.slice(-LOG_BACKLOG) : lines;
        if (shown.length > 0 && running) emit({ type: "log", lines: shown });
      } catch (error) {
        if (running) emit({ type: "error", message: errorMessage(error).split("\n")[0] });
      }
    } finally {
      busy = false;
    }
  };

  return {
    async act(input, record) {
      if (input.kind === "tab") {
        // One of the tabs the page was shown, brought to the front through the gateway (the control token); the
        // next look follows it, as it follows the agent's own switches.
        const tab = tabs.find((t) => t.id === input.targetId);
        if (tab === undefined) throw new Error(`computer ${computer} has no such tab (it may have closed)`);
        await activateTab(access, computer, tab.id);
        record.inputs.push({ at: new Date().toISOString(), kind: "tab", host: hostOf(tab.url) });
        return;
      }
      // Only the tab whose frames the person sees takes the person's input, placed on its last frame.
      if (session === undefined || frameSize === undefined)
        throw new Error(`computer ${computer} shows no tab yet: nothing to send input to`);
      await bounded(dispatchPersonInput(session, frameSize, input, record), `DevTools input (${input.kind})`);
    },
    async start(emit) {
      running = true;
      lastUrl = undefined;
      // A browser that does not answer yet is no failure of the feed: each look tries again.
      await look(emit, true);
      timer = setInterval(() => void look(emit, false), FOLLOW_MS);
    },
    async stop() {
      running = false;
      if (timer) clearInterval(timer);
      timer = undefined;
      while (busy) await new Promise((r) => setTimeout(r, 20));
      await stopScreencast();
      // Over CDP this only disconnects; the computer's browser keeps running.
      if (browser !== undefined) await bounded(browser.close(), "DevTools disconnecting", 5_000).catch(() => undefined);
      browser = undefined;
    },
  };
}
