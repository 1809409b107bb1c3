// The Chromium in use: the one the DevTools relay reaches. It is started again whenever it dies (a computer's browser
// must come back without the runner's help), on the same profile and with the start tabs, until a fresh profile ends
// it and puts another in its place (adopt).
import type { ChildProcess } from "node:child_process";
import { killChromium, running, signalGroup, sleep, type RunningChromium } from "./chromium";
import type { StartChromium } from "./standby";

export interface ActiveOptions {
  startChromium: StartChromium;
  /** The profile in use, which a restart after a crash goes on with. */
  profile: () => number;
  startTabs: readonly string[];
  restartDelayMs: number;
  log: (record: Record<string, unknown>) => void;
  /** Called each time a Chromium is put in use. */
  adopted: () => void;
}

export class ActiveChromium {
  private chromium: RunningChromium | undefined;
  /** The process of a (re)start under way, before it answers. */
  private starting: ChildProcess | undefined;
  /** The (re)start under way. */
  private supervising: Promise<void> | undefined;
  /** Counts the ends: a (re)start begun before one is not the Chromium in use. */
  private generation = 0;
  private stopped = false;
  private waiters: (() => void)[] = [];

  constructor(private readonly options: ActiveOptions) {}

  /** The Chromium in use's DevTools port, undefined while none is. */
  port(): number | undefined {
    return this.chromium?.port;
  }

  pid(): number | undefined {
    return this.chromium?.proc.pid;
  }

  /** Resolves once the next Chromium is put in use (a start, a restart, a fresh profile). */
  ready(): Promise<void> {
    return new Promise<void>((r) => this.waiters.push(r));
  }

  /** (Re)starts Chromium on the profile in use with its start tabs, again after each failure, until one is in use. */
  start(restart = false): Promise<void> {
    const generation = this.generation;
    const abandoned = () => this.stopped || generation !== this.generation;
    const supervise = async () => {
      while (!abandoned()) {
        try {
          if (restart) this.options.log({ event: "restarted" });
          const chromium = await this.options.startChromium(this.options.profile(), {
            urls: this.options.startTabs,
            standby: false,
            spawned: (proc) => (this.starting = proc),
            abandoned,
          });
          this.starting = undefined;
          if (abandoned()) return void (await killChromium(chromium.proc));
          this.adopt(chromium, this.options.startTabs);
          return;
        } catch (error) {
          this.starting = undefined;
          if (abandoned()) return;
          this.options.log({ event: "error", error: (error as Error).message });
        }
        restart = true;
        await sleep(this.options.restartDelayMs);
      }
    };
    this.supervising = supervise();
    return this.supervising;
  }

  /** Puts a running Chromium in use (the relay reaches it from now on), and watches it. */
  adopt(chromium: RunningChromium, startTabs: readonly string[]): void {
    this.chromium = chromium;
    this.options.log({ event: "chromium-started", pid: chromium.proc.pid, profile: chromium.profile, startTabs });
    const waiters = this.waiters;
    this.waiters = [];
    waiters.forEach((w) => w());
    this.options.adopted();
    const generation = this.generation;
    chromium.proc.once("exit", (code, signal) => {
      if (this.chromium !== chromium) return; // ended on purpose
      this.chromium = undefined;
      if (this.stopped) return;
      this.options.log({ event: "chromium-exited", code, signal });
      void sleep(this.options.restartDelayMs).then(() => {
        if (generation === this.generation) void this.start(true);
      });
    });
  }

  /**
   * Ends the Chromium in use (every process of it) and any (re)start of it under way; none starts again until adopt
   * or start. DevTools clients of the ended one are disconnected with it.
   */
  async end(): Promise<void> {
    this.generation += 1;
    const chromium = this.chromium;
    this.chromium = undefined;
    await Promise.all([killChromium(chromium?.proc), killChromium(this.starting)]);
    await this.supervising;
  }

  /** Ends the Chromium in use, with a moment to exit on its own first. */
  async stop(): Promise<void> {
    this.stopped = true;
    const proc = this.chromium?.proc ?? this.starting;
    if (running(proc)) {
      const exited = new Promise((r) => proc.once("exit", r));
      proc.kill("SIGTERM");
      await Promise.race([exited, sleep(5000)]);
      signalGroup(proc, "SIGKILL");
    }
  }
}
