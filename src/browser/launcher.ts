// Runs Chromium for a browser computer: waits for the env CA, trusts it, launches Chromium (headless, or for a headful
// computer on a display of its own Xvfb) behind the computer's site proxy with its start tabs, and launches it again
// whenever it dies (a computer's browser must come back without the runner's help), on the same profile.
// On request (its relay's fresh-profile operation, which a reset calls) it ends Chromium and starts it on a new,
// empty profile: a profile is a directory that is Chromium's HOME and user data both, so everything an episode
// could leave on the browser's disk (cookies, every origin's storage, service workers, HSTS, permissions, history,
// downloads, caches, the NSS store) is in it, and is deleted with it.
import { spawn, type ChildProcess } from "node:child_process";
import dns from "node:dns";
import fs from "node:fs";
import http from "node:http";
import path from "node:path";
import { BROWSER_OPERATION_PATHS, type FreshProfileAnswer, type StartTabsAnswer } from "../protocol/browser-config";
import type { BrowserConfig } from "./config";
import { startDevtoolsRelay } from "./devtools-relay";
import { trustCaByCopy } from "./nss";

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

/** A headful computer's Chromium, on an X display (DISPLAY, set by the launcher). */
export const HEADFUL_CHROMIUM_FLAGS = [
  ...CHROMIUM_BASE_FLAGS,
  // X11 itself, not whatever Chromium would guess from the environment (Wayland, or its headless platform).
  "--ozone-platform=x11",
  "--window-position=0,0",
  `--window-size=${HEADFUL_SCREEN.width},${HEADFUL_SCREEN.height}`,
];

/** How long Xvfb may take to open its display. */
const XVFB_START_MS = 15_000;

/** How long the relay's host name may take to resolve at start (Docker's DNS learns a container's aliases late). */
const RESOLVE_MS = 5_000;

export interface LauncherOptions {
  chromium?: string;
  certutil?: string;
  /** Debian's Xvfb, for a headful computer. */
  xvfb?: string;
  /**
   * The launcher's directory. Each profile is `profiles/<n>` under it, Chromium's HOME (its NSS trust store at
   * .pki/nssdb, its downloads, caches and temporary files) with its user data in `chromium/`. A profile is kept
   * across restarts, so a signed-in session survives a crash; a fresh profile replaces it.
   */
  home?: string;
  restartDelayMs?: number;
  log?: (record: Record<string, unknown>) => void;
}

export interface Launcher {
  /** The running Chromium's pid, if any. */
  pid(): number | undefined;
  /** A headful computer's X display (`:<n>`) while its Xvfb runs; undefined when headless. */
  display(): string | undefined;
  /** A headful computer's Xvfb's pid while it runs. */
  xvfbPid(): number | undefined;
  /** The running Chromium's own DevTools port on 127.0.0.1 (chosen by Chromium at each start), if any. */
  devtoolsPort(): number | undefined;
  /** The address the DevTools relay listens on. */
  relayAddress(): string;
  /** Resolves after the next (re)start of Chromium has opened its start tabs. */
  ready(): Promise<void>;
  /** The directory of the profile in use (Chromium's HOME). */
  profileDir(): string;
  /**
   * Ends Chromium (every process of it), starts it on a new, empty profile at a blank tab, and deletes every earlier
   * profile; resolves once it answers on DevTools. DevTools clients of the old Chromium are disconnected. Its start
   * tabs wait for openStartTabs(): a reset opens them once the sites are emptied, not before.
   */
  freshProfile(): Promise<FreshProfileAnswer>;
  /** Opens the start tabs in the running Chromium and closes every other tab. */
  openStartTabs(): Promise<StartTabsAnswer>;
  /** Closes every tab of the running Chromium but one new blank one: an episode's pages stop. */
  blankTab(): Promise<Record<string, never>>;
  stop(): Promise<void>;
}

const PROFILES_DIR = "profiles";
/** The NSS db trusting the env CA that each profile's is copied from (a HOME of its own, outside every profile). */
const NSS_TEMPLATE_DIR = "nss-template";
/** How long Chromium may take to start on a fresh profile. */
const FRESH_PROFILE_MS = 60_000;
/** Chromium's user data, inside a profile. */
const USER_DATA_DIR = "chromium";

/** Signals Chromium's whole process group (it runs detached, as the group's leader): its helpers too. */
function signalGroup(proc: ChildProcess, signal: NodeJS.Signals): void {
  try {
    process.kill(-proc.pid!, signal);
  } catch {
    proc.kill(signal);
  }
}

function running(proc: ChildProcess | undefined): proc is ChildProcess {
  return proc !== undefined && proc.exitCode === null && proc.signalCode === null;
}

/** The profiles under `dir` by number, oldest first. */
function profileNumbers(dir: string): number[] {
  const names = fs.existsSync(dir) ? fs.readdirSync(dir) : [];
  return names
    .filter((n) => /^[1-9][0-9]*$/.test(n))
    .map(Number)
    .sort((a, b) => a - b);
}

export function jsonLog(record: Record<string, unknown>): void {
  process.stdout.write(JSON.stringify({ ...record, time: new Date().toISOString() }) + "\n");
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

async function waitForFile(
  file: string,
  isStopped: () => boolean,
  log: (r: Record<string, unknown>) => void,
): Promise<void> {
  let logged = false;
  while (!isStopped()) {
    try {
      if (fs.statSync(file).size > 0) return;
    } catch {
      /* not written yet */
    }
    if (!logged) log({ event: "waiting-for-ca", caFile: file });
    logged = true;
    await sleep(200);
  }
}

function devtools(port: number, method: string, pathAndQuery: string): Promise<{ status: number; body: string }> {
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
    req.setTimeout(5000, () => req.destroy(new Error("DevTools did not answer in 5 s")));
    req.end();
  });
}

/** The port Chromium's DevTools took (`--remote-debugging-port=0`), read from the profile once it answers. */
async function waitForDevtools(userDataDir: string, child: ChildProcess): Promise<number> {
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null)
      throw new Error("Chromium exited before DevTools answered");
    try {
      const port = Number(fs.readFileSync(path.join(userDataDir, "DevToolsActivePort"), "utf8").split("\n")[0]);
      if (port > 0 && (await devtools(port, "GET", "/json/version")).status === 200) return port;
    } catch {
      /* not listening yet */
    }
    await sleep(25);
  }
  throw new Error("Chromium's DevTools did not answer within 30 s");
}

/**
 * Starts Xvfb on a display of its own choosing (`-displayfd`: it writes the number once it accepts clients, so two
 * launchers on one machine never collide and no lock file is guessed at); resolves with the display and the process.
 * Only local clients: no TCP listener.
 */
async function startXvfb(
  xvfb: string,
  log: (r: Record<string, unknown>) => void,
): Promise<{ proc: ChildProcess; display: string }> {
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

/** The address `host` names (an address stays itself), asked again for RESOLVE_MS while the DNS catches up. */
async function relayAddress(host: string): Promise<string> {
  const until = Date.now() + RESOLVE_MS;
  for (;;) {
    try {
      const { address } = await dns.promises.lookup(host.replace(/^\[|\]$/g, ""));
      if (address === "0.0.0.0" || address === "::")
        throw new Error(`cdpHost "${host}" resolves to ${address}, which listens on every network`);
      return address;
    } catch (e) {
      if ((e as Error).message.startsWith("cdpHost")) throw e;
      if (Date.now() > until)
        throw new Error(`cdpHost "${host}" does not resolve (${(e as Error).message}) after ${RESOLVE_MS} ms`, {
          cause: e,
        });
      await sleep(250);
    }
  }
}

export async function start(config: BrowserConfig, options: LauncherOptions = {}): Promise<Launcher> {
  const log = options.log ?? jsonLog;
  const home = options.home ?? process.env.HOME ?? "/root";
  const profilesDir = path.join(home, PROFILES_DIR);
  // A restarted container goes on with the profile it had; any other is what an interrupted fresh profile left.
  let profile = profileNumbers(profilesDir).at(-1) ?? 1;
  const profileRoot = (n = profile) => path.join(profilesDir, String(n));
  for (const n of profileNumbers(profilesDir))
    if (n !== profile) fs.rmSync(profileRoot(n), { recursive: true, force: true });
  let child: ChildProcess | undefined;
  /** A headful computer's X server, kept across Chromium's restarts, started again if it died. */
  let xserver: { proc: ChildProcess; display: string } | undefined;
  let internalPort: number | undefined;
  let stopped = false;
  /** A fresh profile under way: Chromium's exit is its doing, not a crash, and the next start is at once. */
  let renewing = false;
  let renewal: Promise<FreshProfileAnswer> | undefined;
  /** False for the start a fresh profile asked for: at a blank tab. */
  let withStartTabs = true;
  let readyWaiters: Array<() => void> = [];
  const nextReady = () => new Promise<void>((r) => readyWaiters.push(r));

  const listenAddress = await relayAddress(config.cdpHost);
  log({
    event: "startup",
    proxy: config.proxy,
    startTabs: config.startTabs,
    cdpHost: config.cdpHost,
    cdpAddress: listenAddress,
    cdpPort: config.cdpPort,
    headful: config.headful,
    profile,
  });

  const display = async (): Promise<string> => {
    if (xserver === undefined || !running(xserver.proc)) {
      xserver = await startXvfb(options.xvfb ?? "Xvfb", log);
      const started = xserver.proc;
      started.once("exit", (code, signal) => {
        if (!stopped) log({ event: "xvfb-exited", code, signal });
      });
    }
    return xserver.display;
  };

  const launchOnce = async (): Promise<ChildProcess> => {
    await waitForFile(config.caFile, () => stopped, log);
    const root = profileRoot();
    const userData = path.join(root, USER_DATA_DIR);
    const tmp = path.join(root, "tmp");
    for (const dir of [userData, tmp]) fs.mkdirSync(dir, { recursive: true });
    await trustCaByCopy(config.caFile, root, path.join(home, NSS_TEMPLATE_DIR), options.certutil);
    // A Chromium killed with -9 leaves its singleton lock behind; the profile is ours alone.
    // So is the port file of the last run, which would name a port no one listens on any more.
    for (const f of ["SingletonLock", "SingletonSocket", "SingletonCookie", "DevToolsActivePort"])
      fs.rmSync(path.join(userData, f), { force: true });
    const [first, ...rest] = withStartTabs ? config.startTabs : [];
    const onDisplay = config.headful ? await display() : undefined;
    const args = [
      ...(onDisplay === undefined ? CHROMIUM_FLAGS : HEADFUL_CHROMIUM_FLAGS),
      `--proxy-server=${config.proxy}`,
      // A port of Chromium's choosing on 127.0.0.1, read back from the profile: two browsers never collide.
      "--remote-debugging-port=0",
      `--user-data-dir=${userData}`,
      first ?? "about:blank",
    ];
    const proc = spawn(options.chromium ?? "chromium", args, {
      // Every place Chromium writes outside its user data is the profile's too.
      env: {
        ...process.env,
        HOME: root,
        XDG_CONFIG_HOME: path.join(root, ".config"),
        XDG_CACHE_HOME: path.join(root, ".cache"),
        XDG_DATA_HOME: path.join(root, ".local", "share"),
        TMPDIR: tmp,
        ...(onDisplay === undefined ? {} : { DISPLAY: onDisplay }),
      },
      stdio: ["ignore", "ignore", "pipe"],
      // A group of its own, so that ending it ends its helper processes at once, before the profile goes.
      detached: true,
    });
    child = proc;
    proc.stderr?.resume();
    const port = await waitForDevtools(userData, proc);
    // A fresh profile asked for while this one was starting: this start is not the one it waits for.
    if (root !== profileRoot()) {
      signalGroup(proc, "SIGKILL");
      throw new Error(`a fresh profile replaced profile ${root} while Chromium started on it`);
    }
    // Chromium takes one URL on its command line here; the other tabs are opened over DevTools.
    for (const url of rest) await devtools(port, "PUT", `/json/new?${encodeURI(url)}`);
    internalPort = port;
    log({ event: "chromium-started", pid: proc.pid, profile, startTabs: withStartTabs ? config.startTabs : [] });
    // Any later start (a crash) opens them again.
    withStartTabs = true;
    return proc;
  };

  const supervise = async (restart: boolean): Promise<void> => {
    while (!stopped) {
      try {
        if (restart) log({ event: "restarted" });
        const proc = await launchOnce();
        const waiters = readyWaiters;
        readyWaiters = [];
        waiters.forEach((w) => w());
        const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((r) => {
          if (proc.exitCode !== null || proc.signalCode !== null) r([proc.exitCode, proc.signalCode]);
          else proc.once("exit", (c, s) => r([c, s]));
        });
        child = undefined;
        internalPort = undefined;
        if (stopped) return;
        if (renewing) {
          restart = false;
          continue;
        }
        log({ event: "chromium-exited", code, signal });
      } catch (e) {
        if (child) signalGroup(child, "SIGKILL");
        child = undefined;
        internalPort = undefined;
        if (stopped) return;
        if (renewing) {
          restart = false;
          continue;
        }
        log({ event: "error", error: (e as Error).message });
      }
      restart = true;
      await sleep(options.restartDelayMs ?? 500);
    }
  };

  const freshProfile = async (): Promise<FreshProfileAnswer> => {
    if (stopped) throw new Error("the launcher is stopping");
    renewing = true;
    const started = Date.now();
    const ready = nextReady();
    profile += 1;
    withStartTabs = false;
    const old = profileRoot(profile - 1);
    const proc = child;
    if (running(proc)) {
      const exited = new Promise((r) => proc.once("exit", r));
      // Nothing of the old profile is kept, so nothing needs writing out: no graceful shutdown.
      signalGroup(proc, "SIGKILL");
      await exited;
    }
    // Its processes are gone: it is deleted while the new one starts.
    const deleted = fs.promises.rm(old, { recursive: true, force: true, maxRetries: 10, retryDelay: 50 });
    deleted.catch(() => undefined); // awaited below
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      ready,
      new Promise((_, reject) => {
        timer = setTimeout(
          () => reject(new Error(`Chromium did not start on a fresh profile within ${FRESH_PROFILE_MS / 1000} s`)),
          FRESH_PROFILE_MS,
        );
      }),
    ]).finally(() => clearTimeout(timer));
    await deleted;
    // Once the new profile's Chromium runs, no process of an older one is left to write to it.
    for (const n of profileNumbers(profilesDir))
      if (n !== profile)
        await fs.promises.rm(profileRoot(n), { recursive: true, force: true, maxRetries: 10, retryDelay: 50 });
    renewing = false;
    const answer = { profile, seconds: (Date.now() - started) / 1000 };
    log({ event: "fresh-profile", ...answer });
    return answer;
  };

  /** Opens `urls` as tabs, one after another (so they stand in that order), then closes every tab there was. */
  const replaceTabs = async (urls: string[]): Promise<void> => {
    const port = internalPort;
    if (port === undefined) throw new Error("Chromium is not running");
    const pages = async () =>
      (JSON.parse((await devtools(port, "GET", "/json/list")).body) as { id: string; type: string }[])
        .filter((t) => t.type === "page")
        .map((t) => t.id);
    const others = await pages();
    // Never none: a browser with no tab left would exit.
    if (urls.length === 0) return;
    for (const url of urls) await devtools(port, "PUT", `/json/new?${encodeURI(url)}`);
    for (const id of others) await devtools(port, "GET", `/json/close/${id}`);
    // A tab closes a moment after DevTools says it will: answered once they are gone.
    const until = Date.now() + 5_000;
    while (Date.now() < until && (await pages()).some((id) => others.includes(id))) await sleep(25);
  };

  const openStartTabs = async (): Promise<StartTabsAnswer> => {
    await replaceTabs(config.startTabs);
    log({ event: "start-tabs", startTabs: config.startTabs });
    return { startTabs: config.startTabs.length };
  };

  const blankTab = async (): Promise<Record<string, never>> => {
    await replaceTabs(["about:blank"]);
    log({ event: "blank-tab" });
    return {};
  };

  // One at a time: a second request while one is under way gets the same fresh profile.
  const renew = () =>
    (renewal ??= freshProfile().finally(() => {
      renewing = false;
      renewal = undefined;
    }));
  const relay: http.Server = await startDevtoolsRelay(
    { host: listenAddress, port: config.cdpPort },
    () => internalPort,
    {
      [BROWSER_OPERATION_PATHS.freshProfile]: renew,
      [BROWSER_OPERATION_PATHS.startTabs]: openStartTabs,
      [BROWSER_OPERATION_PATHS.blankTab]: blankTab,
    },
  );
  void supervise(false);

  return {
    pid: () => child?.pid,
    display: () => (xserver !== undefined && running(xserver.proc) ? xserver.display : undefined),
    xvfbPid: () => (xserver !== undefined && running(xserver.proc) ? xserver.proc.pid : undefined),
    devtoolsPort: () => internalPort,
    relayAddress: () => listenAddress,
    ready: nextReady,
    profileDir: () => profileRoot(),
    freshProfile: renew,
    openStartTabs,
    blankTab,
    stop: async () => {
      stopped = true;
      const proc = child;
      if (running(proc)) {
        const exited = new Promise((r) => proc.once("exit", r));
        proc.kill("SIGTERM");
        await Promise.race([exited, sleep(5000)]);
        signalGroup(proc, "SIGKILL");
      }
      // After Chromium: it would take the X server's end for a crash.
      const x = xserver?.proc;
      if (running(x)) {
        const exited = new Promise((r) => x.once("exit", r));
        signalGroup(x, "SIGTERM");
        await Promise.race([exited, sleep(5000)]);
        signalGroup(x, "SIGKILL");
      }
      const closed = new Promise((r) => relay.close(r));
      relay.closeAllConnections();
      await closed;
    },
  };
}
