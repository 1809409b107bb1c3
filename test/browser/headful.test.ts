// A headful computer's launcher with the real Chromium and Debian's Xvfb on loopback, behind the real site proxy:
// Chromium runs on a display of the launcher's own Xvfb, without --headless, so its user agent is a desktop
// browser's; screenshots are drawn; an X server that dies is started again with Chromium; stopping ends both.
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseBrowserConfig } from "../../src/browser/config";
import { start, type Launcher } from "../../src/browser/launcher";
import { connectCdp } from "../helpers/cdp";
import { freePort } from "../helpers/ports";
import { cleanup, tempDir } from "../helpers/processes";
import { startHttpServer } from "../helpers/servers";
import { until } from "../helpers/until";
import { type ProxyProcess, startProxy } from "../site-proxy/helpers";

const FORM_PAGE = `<!doctype html><title>shop</title><form><input name="q"></form>`;
const home = tempDir("multienv-headful-");
let proxy: ProxyProcess;
let launcher: Launcher;
let relayPort: number;
const log: Record<string, unknown>[] = [];

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** What `pid`'s process was started with: its arguments and its environment. */
function processOf(pid: number): { args: string[]; env: string[] } {
  const read = (file: string) => fs.readFileSync(`/proc/${pid}/${file}`, "utf8").split("\0").filter(Boolean);
  return { args: read("cmdline"), env: read("environ") };
}

/** The top-level X windows of a process (by their _NET_WM_PID): where each is, its size, and whether it is shown. */
function windowsOf(
  pid: number,
): { id: string; x: number; y: number; width: number; height: number; viewable: boolean }[] {
  const display = launcher.display()!;
  const x = (args: string[]) =>
    execFileSync(args[0], args.slice(1), { env: { ...process.env, DISPLAY: display }, stdio: "pipe" }).toString();
  // A window Chromium destroys between the listing and the reads of it (a popup, a window it replaces) is no longer
  // one of its windows: X answers BadWindow for it, and it is left out rather than failing the listing.
  const ofWindow = (args: string[]): string | undefined => {
    try {
      return x(args);
    } catch (error) {
      if (String((error as { stderr?: unknown }).stderr).includes("BadWindow")) return undefined;
      throw error;
    }
  };
  const windows = [];
  for (const line of x(["xwininfo", "-root", "-children"]).split("\n")) {
    const match = /^\s+(0x[0-9a-f]+) .*?(\d+)x(\d+)\+(-?\d+)\+(-?\d+)/.exec(line);
    if (match === null) continue;
    const [, id, width, height, left, top] = match;
    if (!ofWindow(["xprop", "-id", id, "_NET_WM_PID"])?.includes(`= ${pid}`)) continue;
    const state = ofWindow(["xwininfo", "-id", id]);
    if (state === undefined) continue;
    const viewable = state.includes("Map State: IsViewable");
    windows.push({ id, x: Number(left), y: Number(top), width: Number(width), height: Number(height), viewable });
  }
  return windows;
}

/**
 * The start tab's navigator.userAgent, its viewport's width, the height its window's own bars take (none headless),
 * and a screenshot, read over DevTools through the relay.
 */
async function pageFacts(): Promise<{
  userAgent: string;
  innerWidth: number;
  chromeHeight: number;
  screenshot: Buffer;
}> {
  const page = await until(
    "the start tab loaded",
    async () => {
      const tabs = (await (await fetch(`http://127.0.0.1:${relayPort}/json/list`)).json()) as {
        type: string;
        title: string;
        webSocketDebuggerUrl: string;
      }[];
      return tabs.find((t) => t.type === "page" && t.title === "shop");
    },
    30_000,
    100,
  );
  const cdp = await connectCdp(page.webSocketDebuggerUrl, {});
  try {
    const evaluate = async (expression: string) =>
      ((await cdp.call("Runtime.evaluate", { expression, returnByValue: true })).result as { value: unknown }).value;
    const shot = await cdp.call("Page.captureScreenshot", { format: "png" });
    return {
      userAgent: String(await evaluate("navigator.userAgent")),
      innerWidth: Number(await evaluate("window.innerWidth")),
      chromeHeight: Number(await evaluate("window.outerHeight - window.innerHeight")),
      screenshot: Buffer.from(String(shot.data), "base64"),
    };
  } finally {
    cdp.close();
  }
}

beforeAll(async () => {
  const gateway = await startHttpServer(() => FORM_PAGE);
  relayPort = await freePort();
  proxy = await startProxy({
    gateway: gateway.url,
    sites: { shop: ["shop.test"] },
    reach: "none",
    control: { host: "127.0.0.1", port: 0, cdp: `127.0.0.1:${relayPort}` },
  });
  // The relay listens on loopback here, where the test is (a configuration refuses loopback: launcher.test.ts).
  launcher = await start(
    {
      ...parseBrowserConfig(
        JSON.stringify({
          proxy: proxy.url,
          startTabs: ["https://shop.test/"],
          cdpHost: "browser.test",
          cdpPort: relayPort,
          caFile: proxy.caCertPath,
          headful: true,
        }),
      ),
      cdpHost: "127.0.0.1",
    },
    { home: path.join(home, "home"), log: (r) => log.push(r), restartDelayMs: 100 },
  );
  await launcher.ready();
}, 60_000);

afterAll(async () => {
  await launcher?.stop();
  await proxy?.stop();
  await cleanup();
});

describe("a headful computer's launcher", () => {
  it("runs Chromium without --headless on a display of its own Xvfb, through the proxy, as a desktop browser", async () => {
    const display = launcher.display();
    expect(display).toMatch(/^:\d+$/);
    const xvfb = processOf(launcher.xvfbPid()!);
    expect(path.basename(xvfb.args[0])).toBe("Xvfb");
    // Local clients only: no TCP listener on the X server.
    expect(xvfb.args.join(" ")).toContain("-nolisten tcp");
    const chromium = processOf(launcher.pid()!);
    expect(chromium.args.some((a) => a.startsWith("--headless"))).toBe(false);
    expect(chromium.env).toContain(`DISPLAY=${display}`);
    expect(chromium.args).toContain(`--proxy-server=${proxy.url}`);
    const facts = await pageFacts();
    expect(facts.userAgent).toMatch(/Chrome\/\d+/);
    expect(facts.userAgent).not.toContain("HeadlessChrome");
    // A real window: its tab strip and toolbar take part of its height; the page is drawn, and a screenshot is of it.
    expect(facts.chromeHeight).toBeGreaterThan(0);
    expect(facts.screenshot.subarray(1, 4).toString()).toBe("PNG");
    expect(facts.screenshot.readUInt32BE(16)).toBe(facts.innerWidth);
  }, 60_000);

  it("keeps its standby's window beside the screen, where no one sees it, and fills the screen with it once promoted", async () => {
    const standby = await until("the standby", () => launcher.standby(), 60_000, 100);
    const inUse = launcher.pid()!;
    const onScreen = (pid: number) => windowsOf(pid).filter((w) => w.viewable && w.x < 1280 && w.y < 800);
    // At the screen's corner, as large as it (within the pixel X reports for the window's own edge).
    const fillingTheScreen = [expect.objectContaining({ x: 0, y: 0, width: expect.toBeOneOf([1279, 1280]) })];
    expect(windowsOf(standby.proc.pid!).filter((w) => w.viewable).length).toBeGreaterThan(0);
    expect(onScreen(standby.proc.pid!)).toEqual([]);
    expect(onScreen(inUse)).toEqual(fillingTheScreen);
    const answer = await launcher.freshProfile();
    expect(answer.standby).toBe(true);
    expect(launcher.pid()).toBe(standby.proc.pid);
    expect(onScreen(standby.proc.pid!)).toEqual(fillingTheScreen);
    await launcher.openStartTabs();
    const facts = await pageFacts();
    expect(facts.userAgent).not.toContain("HeadlessChrome");
    // As wide as the screen, as the first window was (within its edge's pixel).
    expect(facts.innerWidth).toBeGreaterThanOrEqual(1279);
  }, 120_000);

  it("starts its X server and Chromium again when the X server dies, on a display again", async () => {
    const xvfbPid = launcher.xvfbPid()!;
    const chromiumPid = launcher.pid()!;
    const ready = launcher.ready();
    process.kill(xvfbPid, "SIGKILL");
    await ready;
    expect(launcher.xvfbPid()).toBeDefined();
    expect(launcher.xvfbPid()).not.toBe(xvfbPid);
    expect(launcher.pid()).not.toBe(chromiumPid);
    expect(log.map((r) => r.event)).toEqual(expect.arrayContaining(["xvfb-exited", "chromium-exited", "restarted"]));
    expect(processOf(launcher.pid()!).env).toContain(`DISPLAY=${launcher.display()}`);
    expect((await pageFacts()).userAgent).not.toContain("HeadlessChrome");
  }, 60_000);

  it("ends its X server with Chromium when stopped", async () => {
    const xvfbPid = launcher.xvfbPid()!;
    const chromiumPid = launcher.pid()!;
    await launcher.stop();
    await until("Xvfb gone", () => !alive(xvfbPid) || undefined, 10_000, 50);
    expect(alive(chromiumPid)).toBe(false);
    expect(launcher.display()).toBeUndefined();
  }, 30_000);

  it("refuses a headful that is not true or false, naming the field", () => {
    expect(() =>
      parseBrowserConfig(JSON.stringify({ proxy: "http://p:3128", caFile: "/x", cdpHost: "b", headful: "yes" })),
    ).toThrow(/headful: must be true or false/);
  });
});
