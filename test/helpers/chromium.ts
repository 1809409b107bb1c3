// Real Chromium for tests, with the computers' flags: one trusting an env CA through a proxy, one with no proxy, and
// one with DevTools on a loopback port as a computer's browser.
import { execFileSync, spawn } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { chromium, type Browser } from "playwright-core";
import { CHROMIUM_FLAGS } from "../../src/browser/launcher";
import { stopOnCleanup, tempDir } from "./processes";

/** Headless Chromium that trusts `caCertPath` alone (an NSS database of its own) and uses the proxy at `proxyUrl`. */
export async function chromiumTrusting(
  caCertPath: string,
  proxyUrl: string,
  extraArgs: string[] = [],
): Promise<Browser> {
  const home = tempDir();
  const nssdb = path.join(home, ".pki/nssdb");
  fs.mkdirSync(nssdb, { recursive: true });
  execFileSync("certutil", ["-d", `sql:${nssdb}`, "-N", "--empty-password"]);
  execFileSync("certutil", ["-d", `sql:${nssdb}`, "-A", "-t", "C,,", "-n", "multienv env CA", "-i", caCertPath]);
  return chromium.launch({
    executablePath: "/usr/bin/chromium",
    env: { ...process.env, HOME: home },
    args: [...CHROMIUM_FLAGS, `--proxy-server=${proxyUrl}`, ...extraArgs],
  });
}

/** A Chromium with the computer's flags and no proxy: a client of a page served here, not a computer. */
export function chromiumDirect(): Promise<Browser> {
  return chromium.launch({ executablePath: "/usr/bin/chromium", args: CHROMIUM_FLAGS });
}

export interface Chromium {
  /** The DevTools HTTP endpoint, as the gateway's computers.<name>.cdp takes it. */
  cdp: string;
  port: number;
  /** True once the browser process has ended. */
  exited(): boolean;
}

/** A real headless Chromium with DevTools on a loopback port, as a computer's browser. */
export async function startChromium(extraArgs: string[] = []): Promise<Chromium> {
  const userDataDir = tempDir("runner-chromium-");
  const child = spawn(
    "/usr/bin/chromium",
    [...CHROMIUM_FLAGS, "--remote-debugging-port=0", `--user-data-dir=${userDataDir}`, ...extraArgs, "about:blank"],
    // Its own process group, so cleanup ends the helper processes too before the profile is removed.
    { stdio: ["ignore", "ignore", "pipe"], detached: true },
  );
  stopOnCleanup(child, { group: true });
  const port = await new Promise<number>((resolvePromise, reject) => {
    let stderr = "";
    const timer = setTimeout(() => reject(new Error(`Chromium did not start: ${stderr}`)), 20_000);
    child.stderr!.on("data", (d: Buffer) => {
      stderr += d.toString();
      const match = /DevTools listening on ws:\/\/[^:]+:(\d+)\//.exec(stderr);
      if (match) {
        clearTimeout(timer);
        resolvePromise(Number(match[1]));
      }
    });
    child.once("exit", (code) => reject(new Error(`Chromium exited ${code}: ${stderr}`)));
  });
  return { cdp: `http://127.0.0.1:${port}`, port, exited: () => child.exitCode !== null || child.signalCode !== null };
}
