// Runs Chromium for a browser computer: waits for the env CA, trusts it, launches Chromium (headless, or for a headful
// computer on a display of its own Xvfb) behind the computer's site proxy with its start tabs, and launches it again
// whenever it dies (a computer's browser must come back without the runner's help), on the same profile
// (active.ts). Beside it runs a standby (standby.ts): a second Chromium already started on a new, empty profile, which
// no one reaches. On request (its relay's fresh-profile operation, which a reset calls) it ends the Chromium in use
// and promotes the standby, or, when there is none that answers, starts one as it did at first: a profile is a
// directory that is Chromium's HOME and user data both (profiles.ts), so everything an episode could leave on the
// browser's disk (cookies, every origin's storage, service workers, HSTS, permissions, history, downloads, caches,
// the NSS store) is in it, and is deleted with it; a promoted standby's was never used by anyone.
import dns from "node:dns";
import fs from "node:fs";
import type http from "node:http";
import { BROWSER_OPERATION_PATHS, type FreshProfileAnswer, type StartTabsAnswer } from "../protocol/browser-config";
import { ActiveChromium } from "./active";
import { killChromium, launchChromium, showWindow, sleep, type RunningChromium } from "./chromium";
import type { BrowserConfig } from "./config";
import { startDevtoolsRelay } from "./devtools-relay";
import { Profiles } from "./profiles";
import { Standby, type PreparedChromium, type StartChromium } from "./standby";
import { replaceTabs } from "./tabs";
import { XServer } from "./xvfb";

export { CHROMIUM_BASE_FLAGS, CHROMIUM_FLAGS, HEADFUL_CHROMIUM_FLAGS, HEADFUL_SCREEN } from "./chromium";

/** How long the relay's host name may take to resolve at start (Docker's DNS learns a container's aliases late). */
const RESOLVE_MS = 5_000;
/** How long Chromium may take to start on a fresh profile. */
const FRESH_PROFILE_MS = 60_000;
/**
 * How long after a fresh profile the next standby starts if no start tabs were asked for: it waits for them otherwise,
 * so that its start does not take the CPU from the start tabs' first load.
 */
const STANDBY_AFTER_FRESH_MS = 3_000;

export interface LauncherOptions {
  chromium?: string;
  certutil?: string;
  /** Debian's Xvfb, for a headful computer. */
  xvfb?: string;
  /**
   * The launcher's directory. Each profile is `profiles/<n>` under it (profiles.ts). A profile is kept across
   * restarts, so a signed-in session survives a crash; a fresh profile replaces it.
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
  /** The standby once it answers on DevTools (its pid, own DevTools port and profile), if there is one. */
  standby(): RunningChromium | undefined;
  /** The address the DevTools relay listens on. */
  relayAddress(): string;
  /** Resolves after the next (re)start of Chromium has opened its start tabs. */
  ready(): Promise<void>;
  /** The directory of the profile in use (Chromium's HOME). */
  profileDir(): string;
  /**
   * Ends Chromium (every process of it), puts one on a new, empty profile at a blank tab in its place (the standby,
   * else one started now), and deletes every earlier profile; resolves once it answers on DevTools. DevTools clients
   * of the old Chromium are disconnected. Its start tabs wait for openStartTabs(): a reset opens them once the sites
   * are emptied, not before.
   */
  freshProfile(): Promise<FreshProfileAnswer>;
  /** Opens the start tabs in the running Chromium and closes every other tab. */
  openStartTabs(): Promise<StartTabsAnswer>;
  /** Closes every tab of the running Chromium but one new blank one: an episode's pages stop. */
  blankTab(): Promise<Record<string, never>>;
  stop(): Promise<void>;
}

export function jsonLog(record: Record<string, unknown>): void {
  process.stdout.write(JSON.stringify({ ...record, time: new Date().toISOString() }) + "\n");
}

/** Waits until `file` is written (the env CA, which the site proxy writes); false if `abandoned` first. */
async function waitForFile(file: string, abandoned: () => boolean, log: (r: Record<string, unknown>) => void) {
  let logged = false;
  while (!abandoned()) {
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

/** How the launcher starts a Chromium: once the env CA is there, on a profile prepared for it, on the display. */
function chromiumStarter(
  config: BrowserConfig,
  options: LauncherOptions,
  profiles: Profiles,
  xserver: XServer | undefined,
  log: (r: Record<string, unknown>) => void,
): StartChromium {
  return async (profile, use) => {
    await waitForFile(config.caFile, use.abandoned, log);
    const ca = use.abandoned() ? undefined : await profiles.prepare(profile, use.standby);
    const display = await xserver?.display();
    if (ca === undefined || use.abandoned()) throw new Error(`Chromium's start on profile ${profile} was abandoned`);
    const chromium = await launchChromium({
      executable: options.chromium ?? "chromium",
      proxy: config.proxy,
      root: profiles.root(profile),
      profile,
      urls: use.urls,
      display,
      offScreen: use.standby,
      spawned: use.spawned,
    });
    return { ...chromium, ca };
  };
}

/** `work` within `ms`, else an error saying `what`. */
async function within<T>(work: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    work,
    new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(what)), ms))),
  ]).finally(() => clearTimeout(timer));
}

/** What the launcher's parts share: the profile in use, and whether it is stopping. */
interface LauncherState {
  profile: number;
  stopped: boolean;
  /**
   * The deletion of the profiles a fresh profile left behind, which goes on after its answer: the start tabs, the
   * next fresh profile, the next standby and stop wait for it.
   */
  deletion: Promise<void>;
}

/** The parts of a launcher a fresh profile works with. */
interface FreshProfileParts {
  state: LauncherState;
  profiles: Profiles;
  active: ActiveChromium;
  standby: Standby;
  startChromium: StartChromium;
  xserver: XServer | undefined;
  caFile: string;
  log: (r: Record<string, unknown>) => void;
  /** Called once a fresh profile's Chromium is in use: the next standby is the launcher's to start. */
  promoted: () => void;
}

/**
 * A standby that answers and trusts the env CA as it is now, its window on the screen (`started`: it was still
 * starting when asked); else undefined.
 */
async function promotable(
  parts: FreshProfileParts,
): Promise<{ chromium: PreparedChromium; started: boolean } | undefined> {
  const { standby, xserver, profiles, caFile, log } = parts;
  const taken = await standby.take(FRESH_PROFILE_MS, (c) => c.ca.equals(fs.readFileSync(caFile)));
  if (taken === undefined || xserver === undefined) return taken;
  try {
    await showWindow(taken.chromium);
    return taken;
  } catch (error) {
    log({ event: "standby-refused", profile: taken.chromium.profile, error: (error as Error).message });
    await killChromium(taken.chromium.proc);
    await profiles.remove(taken.chromium.profile);
    return undefined;
  }
}

/** Chromium started now on a new profile, as before there was a standby. */
async function startedNow(parts: FreshProfileParts): Promise<PreparedChromium> {
  let late = false;
  const started = parts.startChromium(parts.profiles.next(parts.state.profile), {
    urls: [],
    standby: false,
    spawned: () => undefined,
    abandoned: () => late,
  });
  try {
    return await within(
      started,
      FRESH_PROFILE_MS,
      `Chromium did not start on a fresh profile in ${FRESH_PROFILE_MS} ms`,
    );
  } catch (error) {
    late = true;
    await started.then((c) => killChromium(c.proc)).catch(() => undefined);
    throw error;
  }
}

/**
 * Ends the Chromium in use and puts one on a new, empty profile in its place: the standby, else one started now. The
 * old profile is deleted; a failure leaves Chromium starting again as after a crash, on a new profile too.
 */
async function freshProfile(parts: FreshProfileParts): Promise<FreshProfileAnswer> {
  const { state, profiles, active, standby } = parts;
  if (state.stopped) throw new Error("the launcher is stopping");
  // (One that failed is tried again by this one's.)
  await state.deletion.catch(() => undefined);
  const started = Date.now();
  const since = () => (Date.now() - started) / 1000;
  await active.end();
  const ended = since();
  const deleted = profiles.remove(state.profile);
  deleted.catch(() => undefined); // awaited below
  let fresh: PreparedChromium | undefined;
  let promoted: boolean;
  try {
    const taken = await promotable(parts);
    fresh = taken?.chromium;
    promoted = taken !== undefined && !taken.started;
    fresh ??= await startedNow(parts);
    if (state.stopped) throw new Error("the launcher is stopping");
  } catch (error) {
    await killChromium(fresh?.proc);
    // Never the old profile again: Chromium starts as after a crash, on a new, empty one.
    state.profile = profiles.next(state.profile);
    if (!state.stopped) void active.start(true);
    throw error;
  }
  profiles.markInUse(fresh.profile);
  state.profile = fresh.profile;
  parts.promoted();
  active.adopt(fresh, []);
  const inUse = since();
  // The old profile goes while a reset empties its sites (0.1 to 0.3 s of a fresh profile on the demo): the start tabs
  // wait for it, so the next episode still begins with nothing of the last one on disk.
  state.deletion = (async () => {
    await deleted;
    // Once the new profile's Chromium runs, no process of an older one is left to write to it.
    const next = standby.profile();
    await profiles.removeAllBut(next === undefined ? [state.profile] : [state.profile, next]);
    parts.log({ event: "old-profiles-deleted", seconds: since() });
  })();
  state.deletion.catch((error: unknown) =>
    parts.log({ event: "error", error: `the old profiles' deletion: ${(error as Error).message}` }),
  );
  const answer = { profile: state.profile, seconds: inUse, standby: promoted };
  // Where its time went: the old Chromium ended, the new one in use (cumulative seconds).
  parts.log({ event: "fresh-profile", ...answer, ended, inUse });
  return answer;
}

export async function start(config: BrowserConfig, options: LauncherOptions = {}): Promise<Launcher> {
  const log = options.log ?? jsonLog;
  const home = options.home ?? process.env.HOME ?? "/root";
  const restartDelayMs = options.restartDelayMs ?? 500;
  const profiles = new Profiles(home, config.caFile, options.certutil);
  const state: LauncherState = { profile: profiles.resume(), stopped: false, deletion: Promise.resolve() };
  const xserver = config.headful ? new XServer(options.xvfb ?? "Xvfb", log) : undefined;
  const startChromium = chromiumStarter(config, options, profiles, xserver, log);
  const standby = new Standby(profiles, startChromium, () => state.profile, log, restartDelayMs);
  /** Set after a fresh profile until the next standby starts (at the start tabs, or after STANDBY_AFTER_FRESH_MS). */
  let standbyTimer: NodeJS.Timeout | undefined;
  const startStandby = () => {
    clearTimeout(standbyTimer);
    standbyTimer = undefined;
    // Not while the old profiles go: their listing must not meet a standby's profile being made.
    void state.deletion.catch(() => undefined).then(() => standby.keep());
  };
  const active = new ActiveChromium({
    startChromium,
    profile: () => state.profile,
    startTabs: config.startTabs,
    restartDelayMs,
    log,
    // At start and after a crash; after a fresh profile the next standby waits (startStandby).
    adopted: () => {
      if (standbyTimer === undefined) standby.keep();
    },
  });
  const listenAddress = await relayAddress(config.cdpHost);
  const { proxy, startTabs, cdpHost, cdpPort, headful } = config;
  log({
    event: "startup",
    proxy,
    startTabs,
    cdpHost,
    cdpAddress: listenAddress,
    cdpPort,
    headful,
    profile: state.profile,
  });

  const parts: FreshProfileParts = {
    state,
    profiles,
    active,
    standby,
    startChromium,
    xserver,
    caFile: config.caFile,
    log,
    promoted: () => {
      clearTimeout(standbyTimer);
      standbyTimer = setTimeout(startStandby, STANDBY_AFTER_FRESH_MS);
    },
  };
  const runningPort = () => {
    const port = active.port();
    if (port === undefined) throw new Error("Chromium is not running");
    return port;
  };
  const openStartTabs = async (): Promise<StartTabsAnswer> => {
    await state.deletion;
    await replaceTabs(runningPort(), config.startTabs);
    log({ event: "start-tabs", startTabs: config.startTabs });
    if (standbyTimer !== undefined) startStandby();
    return { startTabs: config.startTabs.length };
  };
  const blankTab = async (): Promise<Record<string, never>> => {
    await replaceTabs(runningPort(), ["about:blank"]);
    log({ event: "blank-tab" });
    return {};
  };

  // The operations run one at a time, in the order asked: two resets of the computer at once (two runners, a reset
  // retried while the first runs) would otherwise open the start tabs twice side by side, each keeping the tabs it
  // opened, or open them in a Chromium a fresh profile is ending. A second fresh profile asked while one is under way
  // (or waits its turn) gets that one.
  let queue: Promise<unknown> = Promise.resolve();
  const oneAtATime =
    <T>(operation: () => Promise<T>) =>
    (): Promise<T> => {
      const run = queue.then(operation, operation);
      queue = run.catch(() => undefined);
      return run;
    };
  let renewal: Promise<FreshProfileAnswer> | undefined;
  const renewInTurn = oneAtATime(() => freshProfile(parts));
  const renew = () => (renewal ??= renewInTurn().finally(() => (renewal = undefined)));
  const openStartTabsInTurn = oneAtATime(openStartTabs);
  const blankTabInTurn = oneAtATime(blankTab);
  const relay: http.Server = await startDevtoolsRelay(
    { host: listenAddress, port: config.cdpPort },
    () => active.port(),
    {
      [BROWSER_OPERATION_PATHS.freshProfile]: renew,
      [BROWSER_OPERATION_PATHS.startTabs]: openStartTabsInTurn,
      [BROWSER_OPERATION_PATHS.blankTab]: blankTabInTurn,
    },
  );
  void active.start();

  return {
    pid: () => active.pid(),
    display: () => xserver?.current()?.display,
    xvfbPid: () => xserver?.current()?.pid,
    devtoolsPort: () => active.port(),
    standby: () => standby.current(),
    relayAddress: () => listenAddress,
    ready: () => active.ready(),
    profileDir: () => profiles.root(state.profile),
    freshProfile: renew,
    openStartTabs: openStartTabsInTurn,
    blankTab: blankTabInTurn,
    stop: async () => {
      state.stopped = true;
      clearTimeout(standbyTimer);
      await Promise.all([active.stop(), standby.stop(), state.deletion.catch(() => undefined)]);
      // After Chromium: it would take the X server's end for a crash.
      await xserver?.stop();
      const closed = new Promise((r) => relay.close(r));
      relay.closeAllConnections();
      await closed;
    },
  };
}
