// A headful computer's X server: Debian's Xvfb, one screen of HEADFUL_SCREEN, kept across Chromium's restarts and
// started again if it died.
import { spawn, type ChildProcess } from "node:child_process";
import { HEADFUL_SCREEN, running, signalGroup, sleep } from "./chromium";

/** How long Xvfb may take to open its display. */
const XVFB_START_MS = 15_000;

type Log = (record: Record<string, unknown>) => void;

/**
 * Starts Xvfb on a display of its own choosing (`-displayfd`: it writes the number once it accepts clients, so two
 * launchers on one machine never collide and no lock file is guessed at); resolves with the display and the process.
 * Only local clients: no TCP listener.
 */
async function startXvfb(xvfb: string, log: Log): Promise<{ proc: ChildProcess; display: string }> {
  const { width, height, depth } = HEADFUL_SCREEN;
  const proc = spawn(xvfb, ["-displayfd", "3", "-screen", "0", `${width}x${height}x${depth}`, "-nolisten", "tcp"], {
    stdio: ["ignore", "ignore", "pipe", "pipe"],
    detached: true,
  });
  let stderr = "";
  proc.stderr?.setEncoding("utf8");
  proc.stderr?.on("data", (c: string) => (stderr = (stderr + c).slice(-2000)));
  const displayFd = proc.stdio[3] as NodeJS.ReadableStream;
  displayFd.setEncoding("utf8");
  const display = await new Promise<string>((resolve, reject) => {
    let written = "";
    let settled = false;
    const fail = (why: string) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      signalGroup(proc, "SIGKILL");
      reject(new Error(`Xvfb ${why}${stderr.trim() ? `: ${stderr.trim().split("\n").at(-1)}` : ""}`));
    };
    const timer = setTimeout(() => fail(`did not open a display within ${XVFB_START_MS / 1000} s`), XVFB_START_MS);
    displayFd.on("data", (c: string) => {
      written += c;
      if (settled || !written.includes("\n")) return;
      settled = true;
      clearTimeout(timer);
      resolve(`:${written.trim()}`);
    });
    proc.once("error", (e) => fail(`could not start (${e.message})`));
    proc.once("exit", (code, signal) => fail(`exited (${signal ?? `code ${code}`}) before opening a display`));
  });
  log({ event: "xvfb-started", pid: proc.pid, display });
  return { proc, display };
}

/** The X server a headful computer's Chromiums (the one in use and its standby) draw on. */
export class XServer {
  private server: { proc: ChildProcess; display: string } | undefined;
  /** A start under way, shared by whoever asks for the display meanwhile. */
  private starting: Promise<string> | undefined;
  private stopped = false;

  constructor(
    private readonly xvfb: string,
    private readonly log: Log,
  ) {}

  /** The display, its Xvfb started (again) first when it is not running. */
  display(): Promise<string> {
    if (this.server !== undefined && running(this.server.proc)) return Promise.resolve(this.server.display);
    this.starting ??= startXvfb(this.xvfb, this.log)
      .then((server) => {
        this.server = server;
        server.proc.once("exit", (code, signal) => {
          if (!this.stopped) this.log({ event: "xvfb-exited", code, signal });
        });
        return server.display;
      })
      .finally(() => (this.starting = undefined));
    return this.starting;
  }

  /** The display while its Xvfb runs. */
  current(): { display: string; pid: number } | undefined {
    return this.server !== undefined && running(this.server.proc)
      ? { display: this.server.display, pid: this.server.proc.pid! }
      : undefined;
  }

  /** Ends Xvfb (after the Chromiums on it: it would take the X server's end for a crash). */
  async stop(): Promise<void> {
    this.stopped = true;
    const x = this.server?.proc;
    if (!running(x)) return;
    const exited = new Promise((r) => x.once("exit", r));
    signalGroup(x, "SIGTERM");
    await Promise.race([exited, sleep(5000)]);
    signalGroup(x, "SIGKILL");
  }
}
