// Runs Chromium for a browser computer: waits for the env CA, trusts it, launches headless
// Chromium behind the computer's site proxy with its start tabs, and launches it again
// whenever it dies (a computer's browser must come back without the runner's help).
import { spawn, type ChildProcess } from "node:child_process";
import dns from "node:dns";
import fs from "node:fs";
import http from "node:http";
import type net from "node:net";
import path from "node:path";
import type { BrowserConfig } from "./config";
import { startDevtoolsRelay } from "./devtools-relay";
import { trustCa } from "./nss";

/**
 * Fixed flags: headless, no sandbox (containers), nothing that phones home past the proxy, and loopback sent to
 * the proxy too (Chromium bypasses the proxy for loopback by default): a page's request to localhost, DevTools'
 * own port included, reaches the site proxy, which refuses it. DevTools keeps its default Origin check (no
 * --remote-allow-origins): a page's WebSocket carries an Origin and is refused, while DevTools clients (the gateway,
 * Playwright) send none.
 */
export const CHROMIUM_FLAGS = [
  "--headless",
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

/** How long the relay's host name may take to resolve at start (Docker's DNS learns a container's aliases late). */
const RESOLVE_MS = 5_000;

export interface LauncherOptions {
  chromium?: string;
  certutil?: string;
  /** HOME of Chromium: its NSS trust store lives at $HOME/.pki/nssdb. */
  home?: string;
  /** Chromium's profile, kept across restarts so a signed-in session survives a crash. */
  profileDir?: string;
  restartDelayMs?: number;
  log?: (record: Record<string, unknown>) => void;
}

export interface Launcher {
  /** The running Chromium's pid, if any. */
  pid(): number | undefined;
  /** The running Chromium's own DevTools port on 127.0.0.1 (chosen by Chromium at each start), if any. */
  devtoolsPort(): number | undefined;
  /** The address the DevTools relay listens on. */
  relayAddress(): string;
  /** Resolves after the next (re)start of Chromium has opened its start tabs. */
  ready(): Promise<void>;
  stop(): Promise<void>;
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
async function waitForDevtools(profileDir: string, child: ChildProcess): Promise<number> {
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null)
      throw new Error("Chromium exited before DevTools answered");
    try {
      const port = Number(fs.readFileSync(path.join(profileDir, "DevToolsActivePort"), "utf8").split("\n")[0]);
      if (port > 0 && (await devtools(port, "GET", "/json/version")).status === 200) return port;
    } catch {
      /* not listening yet */
    }
    await sleep(100);
  }
  throw new Error("Chromium's DevTools did not answer within 30 s");
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
  const profileDir = options.profileDir ?? path.join(home, ".config", "multienv-chromium");
  let child: ChildProcess | undefined;
  let internalPort: number | undefined;
  let stopped = false;
  let readyWaiters: Array<() => void> = [];

  const listenAddress = await relayAddress(config.cdpHost);
  log({
    event: "startup",
    proxy: config.proxy,
    startTabs: config.startTabs,
    cdpHost: config.cdpHost,
    cdpAddress: listenAddress,
    cdpPort: config.cdpPort,
  });
  const relay: net.Server = await startDevtoolsRelay({ host: listenAddress, port: config.cdpPort }, () => internalPort);

  const launchOnce = async (): Promise<ChildProcess> => {
    await waitForFile(config.caFile, () => stopped, log);
    await trustCa(config.caFile, home, options.certutil);
    fs.mkdirSync(profileDir, { recursive: true });
    // A Chromium killed with -9 leaves its singleton lock behind; the profile is ours alone.
    // So is the port file of the last run, which would name a port no one listens on any more.
    for (const f of ["SingletonLock", "SingletonSocket", "SingletonCookie", "DevToolsActivePort"])
      fs.rmSync(path.join(profileDir, f), { force: true });
    const [first, ...rest] = config.startTabs;
    const args = [
      ...CHROMIUM_FLAGS,
      `--proxy-server=${config.proxy}`,
      // A port of Chromium's choosing on 127.0.0.1, read back from the profile: two browsers never collide.
      "--remote-debugging-port=0",
      `--user-data-dir=${profileDir}`,
      first ?? "about:blank",
    ];
    const proc = spawn(options.chromium ?? "chromium", args, {
      env: { ...process.env, HOME: home },
      stdio: ["ignore", "ignore", "pipe"],
    });
    proc.stderr?.resume();
    const port = await waitForDevtools(profileDir, proc);
    // Headless Chromium takes one URL on its command line; the other tabs are opened over DevTools.
    for (const url of rest) await devtools(port, "PUT", `/json/new?${encodeURI(url)}`);
    internalPort = port;
    log({ event: "chromium-started", pid: proc.pid, startTabs: config.startTabs });
    return proc;
  };

  const supervise = async (restart: boolean): Promise<void> => {
    while (!stopped) {
      try {
        if (restart) log({ event: "restarted" });
        child = await launchOnce();
        const waiters = readyWaiters;
        readyWaiters = [];
        waiters.forEach((w) => w());
        const proc = child;
        const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((r) => {
          if (proc.exitCode !== null || proc.signalCode !== null) r([proc.exitCode, proc.signalCode]);
          else proc.once("exit", (c, s) => r([c, s]));
        });
        child = undefined;
        internalPort = undefined;
        if (stopped) return;
        log({ event: "chromium-exited", code, signal });
      } catch (e) {
        if (stopped) return;
        log({ event: "error", error: (e as Error).message });
        child?.kill("SIGKILL");
        child = undefined;
        internalPort = undefined;
      }
      restart = true;
      await sleep(options.restartDelayMs ?? 500);
    }
  };
  void supervise(false);

  return {
    pid: () => child?.pid,
    devtoolsPort: () => internalPort,
    relayAddress: () => listenAddress,
    ready: () => new Promise<void>((r) => readyWaiters.push(r)),
    stop: async () => {
      stopped = true;
      const proc = child;
      if (proc && proc.exitCode === null && proc.signalCode === null) {
        const exited = new Promise((r) => proc.once("exit", r));
        proc.kill("SIGTERM");
        await Promise.race([exited, sleep(5000)]);
        if (proc.exitCode === null && proc.signalCode === null) proc.kill("SIGKILL");
      }
      await new Promise((r) => relay.close(r));
    },
  };
}
