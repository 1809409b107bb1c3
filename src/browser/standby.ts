// The standby: a Chromium started ahead of the next fresh profile, on a new, empty profile of its own (its own HOME and
// user data, the computer's flags, at about:blank), so that a fresh profile is a promotion rather than Chromium's
// start. Until it is promoted no one reaches it: the relay passes only to the Chromium in use, and its DevTools port
// is on 127.0.0.1, where a page cannot go (Chromium sends loopback to the site proxy, which refuses it). On a headful
// computer its window is beside the screen until it is promoted. One that dies is started again; one that is taken
// and no longer answers (or trusts an env CA replaced since) is ended and its profile deleted, never handed out.
import type { ChildProcess } from "node:child_process";
import { answers, killChromium, sleep, type RunningChromium } from "./chromium";
import type { Profiles } from "./profiles";

/** A Chromium started on a profile it prepared, with the env CA bytes that profile trusts. */
export interface PreparedChromium extends RunningChromium {
  ca: Buffer;
}

/** How the launcher starts a Chromium on a profile (see launcher.ts). */
export type StartChromium = (
  profile: number,
  use: {
    urls: readonly string[];
    standby: boolean;
    spawned: (proc: ChildProcess) => void;
    /** True once no one wants this Chromium any more: its start stops where it is. */
    abandoned: () => boolean;
  },
) => Promise<PreparedChromium>;

interface Entry {
  profile: number;
  proc?: ChildProcess;
  /** The standby once it answers, or undefined when its start failed or it was dropped. */
  ready: Promise<PreparedChromium | undefined>;
  state: "standby" | "taken" | "dropped";
}

export class Standby {
  private entry: Entry | undefined;
  /** The standby once it answers. */
  private answering: RunningChromium | undefined;
  private stopped = false;

  constructor(
    private readonly profiles: Profiles,
    private readonly startChromium: StartChromium,
    /** The profile in use: the standby's is numbered above it. */
    private readonly inUse: () => number,
    private readonly log: (record: Record<string, unknown>) => void,
    private readonly restartDelayMs: number,
  ) {}

  /** The standby once it answers (its pid, DevTools port and profile), if there is one. */
  current(): RunningChromium | undefined {
    return this.answering;
  }

  /** The standby's profile, from the moment its start begins. */
  profile(): number | undefined {
    return this.entry?.profile;
  }

  /** Starts a standby in the background, unless there is one. */
  keep(): void {
    if (this.stopped || this.entry !== undefined) return;
    const profile = this.profiles.next(this.inUse());
    const entry: Entry = { profile, state: "standby", ready: Promise.resolve(undefined) };
    this.entry = entry;
    entry.ready = this.startChromium(profile, {
      urls: [],
      standby: true,
      spawned: (proc) => (entry.proc = proc),
      abandoned: () => this.stopped || entry.state === "dropped",
    }).then(
      (chromium) => {
        if (entry.state === "dropped") return void killChromium(chromium.proc);
        if (entry.state === "standby") this.answering = chromium;
        this.log({ event: "standby-started", pid: chromium.proc.pid, profile });
        chromium.proc.once("exit", (code, signal) => {
          if (entry.state !== "standby") return;
          this.log({ event: "standby-exited", profile, code, signal });
          void this.replace(entry);
        });
        return chromium;
      },
      (error: Error) => {
        if (entry.state === "standby") {
          this.log({ event: "standby-failed", profile, error: error.message });
          void this.replace(entry);
        }
        return undefined;
      },
    );
  }

  /**
   * The standby, no longer one: waited for while it starts (at most `timeoutMs`; `started` then says it was not up
   * when asked, so the caller waited for a start as long as one of its own), and given only when it answers on
   * DevTools and `usable` says so; otherwise it is ended, its profile deleted, and undefined returned.
   */
  async take(
    timeoutMs: number,
    usable: (chromium: PreparedChromium) => boolean,
  ): Promise<{ chromium: PreparedChromium; started: boolean } | undefined> {
    const entry = this.entry;
    if (entry === undefined) return undefined;
    const started = this.answering === undefined;
    this.entry = undefined;
    this.answering = undefined;
    entry.state = "taken";
    let timer: NodeJS.Timeout | undefined;
    const chromium = await Promise.race([
      entry.ready,
      new Promise<undefined>((r) => (timer = setTimeout(() => r(undefined), timeoutMs))),
    ]).finally(() => clearTimeout(timer));
    if (chromium !== undefined && usable(chromium) && (await answers(chromium))) return { chromium, started };
    await this.drop(entry);
    return undefined;
  }

  /** Ends a standby that was not given out, and deletes its profile. */
  private async drop(entry: Entry): Promise<void> {
    entry.state = "dropped";
    await killChromium(entry.proc);
    await entry.ready;
    await this.profiles.remove(entry.profile);
  }

  /** A standby that died or could not start: its profile deleted, another started after a moment. */
  private async replace(entry: Entry): Promise<void> {
    if (this.entry === entry) {
      this.entry = undefined;
      this.answering = undefined;
    }
    await this.drop(entry);
    await sleep(this.restartDelayMs);
    this.keep();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    const entry = this.entry;
    this.entry = undefined;
    this.answering = undefined;
    if (entry !== undefined) {
      entry.state = "dropped";
      await killChromium(entry.proc);
    }
  }
}
