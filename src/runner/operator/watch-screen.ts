// A computer's screen as `multienv watch` follows it: a DevTools connection to its browser through the gateway (with
// the control token), the screencast's frames of the tab on screen (as the browser's target list says: screens.ts),
// switched to another tab as the agent opens, closes or switches tabs, the tab's URL as it navigates, and a person's
// input sent to the screencast's own tab. Watching only looks: nothing is sent to a page but the screencast's own
// commands and a person's input during a takeover.
import { chromium, type Browser, type BrowserContext, type CDPSession, type Page } from "playwright-core";
import { gatewayClient } from "../../protocol/gateway-client";
import { errorMessage } from "../errors";
import type { GatewayAccess } from "../stack/outputs";
import { activateTab, bounded, pageOfTarget, pageTargets, type PageTarget } from "./screens";
import { dispatchPersonInput, type FrameSize, type PersonInput, type TakeoverRecord } from "./takeover";
import type { FeedEvent } from "./watch-feeds";

/**
 * The screencast's frames, at most 960x600: Chromium draws the next frame only once the last is encoded and sent,
 * and the frame's size is what that costs. Straight from a headful Chromium on a 1280x800 screen (the frames
 * acknowledged at once, a page changing every animation frame), frames of 960x600 came about twice as often as
 * full-size ones (9.5 to 13.5 against 4.0 to 7.0 per second on a loaded machine), while JPEG quality 40 against 70,
 * or acknowledging 20 ms later, changed nothing beyond the noise. A person's input is placed by the frame's own size
 * in CSS pixels (its metadata), so a smaller picture moves nothing.
 */
export const SCREENCAST = { format: "jpeg", quality: 70, maxWidth: 960, maxHeight: 600 } as const;

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

/** One computer's screen, followed look by look while `running()` says its feed runs. */
export class ScreenFollower {
  private browser: Browser | undefined;
  private session: CDPSession | undefined;
  private page: Page | undefined;
  /** The size of the last frame of the screencast under way, in its tab's CSS pixels. */
  private frameSize: FrameSize | undefined;
  /** The URL last shown; undefined: none shown since (re)connecting. */
  private lastUrl: string | undefined;
  /** The tabs last listed to the page: a person may switch to these alone. */
  private tabs: PageTarget[] = [];
  private lastTabs: string | undefined;

  constructor(
    private readonly access: GatewayAccess,
    private readonly computer: string,
    private readonly running: () => boolean,
  ) {}

  /** The feed (re)starts: its URL is shown again whatever it is. */
  restart(): void {
    this.lastUrl = undefined;
  }

  /** One look: connected if it was not, the screencast on the tab on screen, its tabs and URL when they changed. */
  async look(emit: (event: FeedEvent) => void): Promise<void> {
    if (this.browser === undefined) await this.connect(emit);
    const context = this.browser?.contexts()[0];
    if (!this.running() || context === undefined) return;
    try {
      await this.follow(context, emit);
    } catch (error) {
      // A tab that closed while it was looked at, or DevTools not answering: the next look tries again.
      if (this.running()) {
        emit({ type: "error", message: errorMessage(error).split("\n")[0] });
        await this.stopScreencast();
      }
    }
  }

  /** Sends a person's input: a switch to a listed tab, or input to the tab whose frames the person sees. */
  async act(input: PersonInput, record: TakeoverRecord): Promise<void> {
    const { computer } = this;
    if (input.kind === "tab") {
      // One of the tabs the page was shown, brought to the front through the gateway (the control token); the
      // next look follows it, as it follows the agent's own switches.
      const tab = this.tabs.find((t) => t.id === input.targetId);
      if (tab === undefined) throw new Error(`computer ${computer} has no such tab (it may have closed)`);
      await activateTab(this.access, computer, tab.id);
      record.inputs.push({ at: new Date().toISOString(), kind: "tab", host: hostOf(tab.url) });
      return;
    }
    // Only the tab whose frames the person sees takes the person's input, placed on its last frame.
    if (this.session === undefined || this.frameSize === undefined)
      throw new Error(`computer ${computer} shows no tab yet: nothing to send input to`);
    await bounded(dispatchPersonInput(this.session, this.frameSize, input, record), `DevTools input (${input.kind})`);
  }

  /** Stops the screencast and disconnects (over CDP this only disconnects: the computer's browser keeps running). */
  async disconnect(): Promise<void> {
    await this.stopScreencast();
    const { browser } = this;
    if (browser !== undefined) await bounded(browser.close(), "DevTools disconnecting", 5_000).catch(() => undefined);
    this.browser = undefined;
  }

  private async stopScreencast(): Promise<void> {
    const old = this.session;
    this.session = undefined;
    this.page = undefined;
    if (old) {
      await bounded(old.send("Page.stopScreencast"), "DevTools Page.stopScreencast").catch(() => undefined);
      await bounded(old.detach(), "DevTools Target.detachFromTarget").catch(() => undefined);
    }
  }

  private async connect(emit: (event: FeedEvent) => void): Promise<void> {
    const { computer } = this;
    let connected: Browser;
    try {
      const gateway = gatewayClient(this.access);
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
    if (!this.running()) {
      await connected.close().catch(() => undefined);
      return;
    }
    this.browser = connected;
    // The browser restarted (its launcher brings a dead one back) or the gateway went away: the next look connects
    // again, and the screencast starts over on whatever tab is then on screen.
    connected.on("disconnected", () => {
      if (this.browser !== connected) return;
      this.browser = undefined;
      this.session = undefined;
      this.page = undefined;
      this.lastUrl = undefined;
      this.lastTabs = undefined;
      if (this.running())
        emit({ type: "error", message: `computer ${computer}'s DevTools connection closed; connecting again` });
    });
  }

  /** The screencast on the tab on screen, switched to it when the agent switched tabs; its URL when it changed. */
  private async follow(context: BrowserContext, emit: (event: FeedEvent) => void): Promise<void> {
    const listed = await pageTargets(this.access, this.computer);
    const [target] = listed;
    this.tabs = listed;
    const tabsText = JSON.stringify(listed);
    if (tabsText !== this.lastTabs) {
      this.lastTabs = tabsText;
      emit({ type: "tabs", tabs: listed.map(({ id, url, title }) => ({ id, url, title })) });
    }
    const onScreen = target === undefined ? undefined : await pageOfTarget(context, target.id);
    // A tab so new that this connection has not seen it yet: the next look has.
    if (target !== undefined && onScreen === undefined) return;
    if (this.running() && onScreen !== this.page) {
      await this.stopScreencast();
      if (onScreen !== undefined) {
        this.frameSize = undefined;
        this.session = await screencast(context, onScreen, emit, (size) => (this.frameSize = size));
        this.page = onScreen;
      }
    }
    const url = this.page === undefined ? "" : (target?.url ?? "");
    if (url !== this.lastUrl) {
      this.lastUrl = url;
      emit({ type: "url", url: url || "(no tab open)", title: this.page === undefined ? "" : (target?.title ?? "") });
    }
  }
}
