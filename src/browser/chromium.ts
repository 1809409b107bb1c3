// One Chromium process of a computer: its flags, its start on a profile (a directory that is its HOME and holds its
// user data) with DevTools on a loopback port of its own choosing, its end (its whole process group), and the few
// DevTools requests the launcher makes of it over HTTP.
import { spawn, type ChildProcess } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import path from "node:path";
import { WebSocket, type RawData } from "ws";

/**
 * Flags of every computer's Chromium, headless or headful: no sandbox (containers), nothing that phones home past the
 * proxy, and loopback sent to the proxy too (Chromium bypasses the proxy for loopback by default): a page's request
 * to localhost, DevTools' own port included, reaches the site proxy, which refuses it. DevTools keeps its default
 * Origin check (no --remote-allow-origins): a page's WebSocket carries an Origin and is refused, while DevTools
 * clients (the gateway, Playwright) send none.
 */
export const CHROMIUM_BASE_FLAGS = [
  "--no-sandbox",
  "--disable-gpu",
  "--no-first-run",
  "--disable-dev-shm-usage",
  "--proxy-bypass-list=<-loopback>",
  // Chromium's own traffic (sign-in, updates, network time, optimization hints, the search engine's preconnect,
  // field trials) would be hosts the computer contacted, in the env's evidence: the switches Playwright's
  // chromiumSwitches uses to keep a test browser quiet, those that bear on the network.
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
  "--disable-field-trial-config",
  "--disable-breakpad",
  "--disable-component-extensions-with-background-pages",
  "--disable-default-apps",
  "--no-default-browser-check",
  "--metrics-recording-only",
  "--password-store=basic",
  "--no-service-autorun",
  "--disable-search-engine-choice-screen",
  "--disable-domain-reliability",
  "--disable-features=OptimizationHints,NetworkTimeServiceQuerying,AimEnabled,PreconnectToSearch,MediaRouter,DialMediaRouteProvider,Translate,AutofillServerCommunication,CertificateTransparencyComponentUpdater",
  "--enable-features=SkipListAccountsWithoutGaiaCookies",
];

/** A headless computer's Chromium (the default): it draws nowhere. */
export const CHROMIUM_FLAGS = ["--headless", ...CHROMIUM_BASE_FLAGS];

/**
 * A headful computer's screen (Xvfb's one screen) and Chromium's window filling it: with no window manager, the window
 * is where and as large as its flags say.
 */
export const HEADFUL_SCREEN = { width: 1280, height: 800, depth: 24 };

/** Where a headful computer's window is: filling the screen, or (a standby's) wholly beside it, where none sees it. */
function windowFlags(onScreen: boolean): string[] {
  const left = onScreen ? 0 : HEADFUL_SCREEN.width * 2;
  return [`--window-position=${left},0`, `--window-size=${HEADFUL_SCREEN.width},${HEADFUL_SCREEN.height}`];
}

/** A headful computer's Chromium, on an X display (DISPLAY, set by the launcher). */
export const HEADFUL_CHROMIUM_FLAGS = [
  ...CHROMIUM_BASE_FLAGS,
  // X11 itself, not whatever Chromium would guess from the environment (Wayland, or its headless platform).
  "--ozone-platform=x11",
  ...windowFlags(true),
];

/** How long a Chromium may take to answer on DevTools once started. */
const DEVTOOLS_START_MS = 30_000;

/**
 * How long a DevTools request that waits on Chromium's own work (opening or closing a tab, listing its targets, a
 * browser command) may take. Such a request is answered once Chromium's browser process has done the work, and on a
 * loaded machine (a load of 30-55 on two cores was seen) that process is scheduled so rarely that a tab opening in
 * 50 ms on a quiet one takes seconds: a reset then failed with its start tabs unopened although nothing was wrong. So
 * the bound is one a loaded machine does not outlast, as long as a Chromium's start (DEVTOOLS_START_MS), and still
 * below the gateway's 60 s idle timeout on the request that asked for the operation, so a Chromium that truly hangs is
 * reported by the launcher, naming DevTools, rather than as the gateway's idle upstream. A health probe (`answers`)
 * keeps its short bound: there a quick answer is the point.
 */
export const DEVTOOLS_WORK_MS = 30_000;

/** Chromium's user data, inside a profile. */
export const USER_DATA_DIR = "chromium";

/** A Chromium that answers on DevTools. */
export interface RunningChromium {
  proc: ChildProcess;
  /** Its own DevTools port on 127.0.0.1 (chosen by Chromium). */
  port: number;
  /** The number of the profile it runs on. */
  profile: number;
}

export interface ChromiumStart {
  executable: string;
  /** The computer's site proxy: Chromium's only way out. */
  proxy: string;
  /** The profile's directory (Chromium's HOME; its user data in USER_DATA_DIR), made ready by profiles.ts. */
  root: string;
  profile: number;
  /** The tabs it opens: the first on its command line, the others over DevTools; about:blank when none. */
  urls: readonly string[];
  /** A headful computer's X display; headless when undefined. */
  display?: string;
  /** A headful window placed beside the screen (a standby's), to be moved onto it with showWindow. */
  offScreen?: boolean;
  /** Called with the process as soon as it is spawned, before it answers: whoever ends it early needs it. */
  spawned?: (proc: ChildProcess) => void;
}

/** Signals Chromium's whole process group (it runs detached, as the group's leader): its helpers too. */
export function signalGroup(proc: ChildProcess, signal: NodeJS.Signals): void {
  try {
    process.kill(-proc.pid!, signal);
  } catch {
    proc.kill(signal);
  }
}

export function running(proc: ChildProcess | undefined): proc is ChildProcess {
  return proc !== undefined && proc.exitCode === null && proc.signalCode === null;
}

/** The processes of the group `pgid` leads that still run (a zombie runs no more: it is only not yet reaped). */
function runningInGroup(pgid: number): number[] {
  const members: number[] = [];
  for (const name of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      // pid (comm) state ppid pgrp ...: comm may hold spaces and parentheses, so fields are read after its last ")".
      const stat = fs.readFileSync(`/proc/${name}/stat`, "utf8");
      const [state, , pgrp] = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (Number(pgrp) === pgid && state !== "Z" && state !== "X") members.push(Number(name));
    } catch {
      /* gone meanwhile */
    }
  }
  return members;
}

/**
 * Ends a Chromium at once, every process of it (nothing of its profile is kept: no graceful shutdown), and waits
 * until none runs, its helpers too: only then may its profile go.
 */
export async function killChromium(proc: ChildProcess | undefined): Promise<void> {
  if (proc?.pid === undefined) return;
  if (running(proc)) {
    const exited = new Promise((r) => proc.once("exit", r));
    signalGroup(proc, "SIGKILL");
    await exited;
  }
  for (const until = Date.now() + 5_000; Date.now() < until && runningInGroup(proc.pid).length > 0;) {
    signalGroup(proc, "SIGKILL");
    await sleep(10);
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** One HTTP request to a Chromium's own DevTools port. */
export function devtools(
  port: number,
  method: string,
  pathAndQuery: string,
  timeoutMs = DEVTOOLS_WORK_MS,
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: "127.0.0.1", port, method, path: pathAndQuery, headers: { host: "localhost" } },
      (res) => {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (c) => (body += c));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
      },
    );
    req.on("error", reject);
    req.setTimeout(timeoutMs, () => req.destroy(new Error(`DevTools did not answer in ${timeoutMs} ms`)));
    req.end();
  });
}

/** True when a Chromium still runs and its DevTools answers. */
export async function answers(chromium: RunningChromium, timeoutMs = 2000): Promise<boolean> {
  if (!running(chromium.proc)) return false;
  try {
    return (await devtools(chromium.port, "GET", "/json/version", timeoutMs)).status === 200;
  } catch {
    return false;
  }
}

/** The port Chromium's DevTools took (`--remote-debugging-port=0`), read from the profile once it answers. */
async function waitForDevtools(userDataDir: string, child: ChildProcess): Promise<number> {
  const deadline = Date.now() + DEVTOOLS_START_MS;
  while (Date.now() < deadline) {
    if (!running(child)) throw new Error("Chromium exited before DevTools answered");
    try {
      const port = Number(fs.readFileSync(path.join(userDataDir, "DevToolsActivePort"), "utf8").split("\n")[0]);
      // Each probe may take what is left of the start's bound: a loaded machine's slow answer is still an answer.
      const left = Math.max(1, deadline - Date.now());
      if (port > 0 && (await devtools(port, "GET", "/json/version", left)).status === 200) return port;
    } catch {
      /* not listening yet */
    }
    await sleep(25);
  }
  throw new Error(`Chromium's DevTools did not answer within ${DEVTOOLS_START_MS / 1000} s`);
}

/** Starts Chromium on a prepared profile; resolves once it answers on DevTools with its tabs open. */
export async function launchChromium(start: ChromiumStart): Promise<RunningChromium> {
  const userData = path.join(start.root, USER_DATA_DIR);
  const [first, ...rest] = start.urls;
  const headful = start.display !== undefined;
  const args = [
    ...(headful ? [...CHROMIUM_BASE_FLAGS, "--ozone-platform=x11", ...windowFlags(!start.offScreen)] : CHROMIUM_FLAGS),
    `--proxy-server=${start.proxy}`,
    // A port of Chromium's choosing on 127.0.0.1, read back from the profile: two browsers never collide.
    "--remote-debugging-port=0",
    `--user-data-dir=${userData}`,
    first ?? "about:blank",
  ];
  const proc = spawn(start.executable, args, {
    // Every place Chromium writes outside its user data is the profile's too.
    env: {
      ...process.env,
      HOME: start.root,
      XDG_CONFIG_HOME: path.join(start.root, ".config"),
      XDG_CACHE_HOME: path.join(start.root, ".cache"),
      XDG_DATA_HOME: path.join(start.root, ".local", "share"),
      TMPDIR: path.join(start.root, "tmp"),
      ...(headful ? { DISPLAY: start.display } : {}),
    },
    stdio: ["ignore", "ignore", "pipe"],
    // A group of its own, so that ending it ends its helper processes at once, before the profile goes.
    detached: true,
  });
  // A Chromium that cannot be spawned at all has its exit code set, which waitForDevtools reports.
  proc.once("error", () => undefined);
  start.spawned?.(proc);
  proc.stderr?.resume();
  try {
    const port = await waitForDevtools(userData, proc);
    // Chromium takes one URL on its command line here; the other tabs are opened over DevTools.
    for (const url of rest) await devtools(port, "PUT", `/json/new?${encodeURI(url)}`);
    return { proc, port, profile: start.profile };
  } catch (error) {
    await killChromium(proc);
    throw error;
  }
}

/** One DevTools command on the browser's own WebSocket. */
async function browserCommand(port: number, method: string, params: Record<string, unknown>): Promise<unknown> {
  const version = JSON.parse((await devtools(port, "GET", "/json/version")).body) as { webSocketDebuggerUrl: string };
  // Its URL names the Host the request was sent with (localhost, no port): the path is what identifies the browser.
  const socket = new WebSocket(`ws://127.0.0.1:${port}${new URL(version.webSocketDebuggerUrl).pathname}`);
  try {
    return await new Promise((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`DevTools did not answer ${method} in ${DEVTOOLS_WORK_MS} ms`)),
        DEVTOOLS_WORK_MS,
      );
      socket.once("error", reject);
      socket.once("open", () => socket.send(JSON.stringify({ id: 1, method, params })));
      socket.on("message", (data: RawData) => {
        const message = JSON.parse(String(data)) as { id?: number; result?: unknown; error?: { message: string } };
        if (message.id !== 1) return;
        clearTimeout(timer);
        if (message.error) reject(new Error(`${method}: ${message.error.message}`));
        else resolve(message.result);
      });
    });
  } finally {
    socket.close();
  }
}

/** Moves a headful Chromium's window (a standby's, beside the screen) onto the screen, filling it. */
export async function showWindow(chromium: RunningChromium): Promise<void> {
  const pages = JSON.parse((await devtools(chromium.port, "GET", "/json/list")).body) as { id: string; type: string }[];
  const page = pages.find((t) => t.type === "page");
  if (page === undefined) throw new Error("Chromium has no tab whose window could be shown");
  const { windowId } = (await browserCommand(chromium.port, "Browser.getWindowForTarget", { targetId: page.id })) as {
    windowId: number;
  };
  const { width, height } = HEADFUL_SCREEN;
  await browserCommand(chromium.port, "Browser.setWindowBounds", {
    windowId,
    bounds: { left: 0, top: 0, width, height },
  });
}
