// The browser computer's launcher with the real Chromium on loopback: it waits for the env CA, trusts
// it (an HTTPS start tab through the proxy loads with no certificate error), sends every tab through
// its --proxy-server, serves DevTools on its port, brings Chromium back with its tabs (and its profile) after
// kill -9, and puts one on a fresh profile in its place when its relay is asked to: its standby (started ahead on a
// new, empty profile, which the relay never reaches until then), or, when the standby is dead, one started then.
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import https from "node:https";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { parseBrowserConfig } from "../../src/browser/config";
import { start, type Launcher } from "../../src/browser/launcher";
import { until } from "../helpers/until";

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "multienv-browser-"));
const caFile = path.join(dir, "ca", "ca.pem");
const seen: string[] = [];
const log: Record<string, any>[] = [];
let origin: https.Server;
let proxy: http.Server;
let launcher: Launcher;
let cdpPort: number;

function openssl(args: string[]): void {
  execFileSync("openssl", args, { cwd: dir, stdio: "pipe" });
}

function listen(server: net.Server): Promise<number> {
  return new Promise((r) => server.listen(0, "127.0.0.1", () => r((server.address() as net.AddressInfo).port)));
}

/** What `pid`'s process was started with: its arguments and its environment. */
function processOf(pid: number): { args: string[]; env: string[] } {
  const read = (file: string) => fs.readFileSync(`/proc/${pid}/${file}`, "utf8").split("\0").filter(Boolean);
  return { args: read("cmdline"), env: read("environ") };
}

/** True while a process of the group `pid` leads still runs (a zombie, not yet reaped by its new parent, does not). */
function groupAlive(pid: number): boolean {
  for (const name of fs.readdirSync("/proc").filter((n) => /^\d+$/.test(n))) {
    let stat: string;
    try {
      stat = fs.readFileSync(`/proc/${name}/stat`, "utf8");
    } catch {
      continue;
    }
    const [state, , pgrp] = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    if (Number(pgrp) === pid && state !== "Z" && state !== "X") return true;
  }
  return false;
}

/** The group leaders among the Chromium processes the launcher started under `home` (zombies left out). */
function chromiumsUnder(home: string): number[] {
  const leaders: number[] = [];
  for (const name of fs.readdirSync("/proc").filter((n) => /^\d+$/.test(n))) {
    let stat: string;
    let args: string[];
    try {
      stat = fs.readFileSync(`/proc/${name}/stat`, "utf8");
      args = processOf(Number(name)).args;
    } catch {
      continue;
    }
    const [state, , pgrp] = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    if (Number(pgrp) !== Number(name) || state === "Z" || state === "X") continue;
    if (args.some((a) => a.startsWith(`--user-data-dir=${home}/`))) leaders.push(Number(name));
  }
  return leaders.sort((a, b) => a - b);
}

/** A DevTools endpoint's browser id and page tabs. */
async function devtoolsOf(port: number): Promise<{ browser: string; tabs: { id: string; url: string }[] }> {
  const version = (await (await fetch(`http://127.0.0.1:${port}/json/version`)).json()) as {
    webSocketDebuggerUrl: string;
  };
  const list = (await (await fetch(`http://127.0.0.1:${port}/json/list`)).json()) as {
    id: string;
    url: string;
    type: string;
  }[];
  return {
    browser: new URL(version.webSocketDebuggerUrl).pathname.split("/").pop()!,
    tabs: list.filter((t) => t.type === "page").map(({ id, url }) => ({ id, url })),
  };
}

/** Whether a DevTools WebSocket at `url` opens. */
function webSocketOutcome(url: string): Promise<string> {
  return new Promise((resolve) => {
    const socket = new WebSocket(url);
    socket.on("open", () => (socket.close(), resolve("open")));
    socket.on("unexpected-response", (_req, res) => resolve(`refused ${res.statusCode}`));
    socket.on("error", (e) => resolve(e.message));
  });
}

async function devtoolsTabs(): Promise<{ url: string; title: string; type: string }[]> {
  const res = await fetch(`http://127.0.0.1:${cdpPort}/json/list`);
  return ((await res.json()) as { url: string; title: string; type: string }[]).filter((t) => t.type === "page");
}

beforeAll(async () => {
  openssl([
    "req",
    "-x509",
    "-newkey",
    "rsa:2048",
    "-nodes",
    "-keyout",
    "ca-key.pem",
    "-out",
    "ca-ready.pem",
    "-days",
    "1",
    "-subj",
    "/CN=test env CA",
  ]);
  openssl(["req", "-newkey", "rsa:2048", "-nodes", "-keyout", "key.pem", "-out", "leaf.csr", "-subj", "/CN=app.test"]);
  fs.writeFileSync(path.join(dir, "ext.cnf"), "subjectAltName=DNS:app.test\nextendedKeyUsage=serverAuth\n");
  openssl([
    "x509",
    "-req",
    "-in",
    "leaf.csr",
    "-CA",
    "ca-ready.pem",
    "-CAkey",
    "ca-key.pem",
    "-CAcreateserial",
    "-out",
    "cert.pem",
    "-days",
    "1",
    "-extfile",
    "ext.cnf",
  ]);
  origin = https.createServer(
    { cert: fs.readFileSync(path.join(dir, "cert.pem")), key: fs.readFileSync(path.join(dir, "key.pem")) },
    (_req, res) => {
      res.end("<!doctype html><title>trusted app</title>");
    },
  );
  const originPort = await listen(origin);
  // A forward proxy: CONNECT goes to the HTTPS origin whatever the name; absolute-form GET is answered here.
  proxy = http.createServer((req, res) => {
    seen.push(`GET ${req.url}`);
    res.end("<!doctype html><title>plain page</title>");
  });
  proxy.on("connect", (req, socket: net.Socket, head) => {
    seen.push(`CONNECT ${req.url}`);
    const upstream = net.connect(originPort, "127.0.0.1", () => {
      socket.write("HTTP/1.1 200 Connection established\r\n\r\n");
      upstream.write(head);
      upstream.pipe(socket).pipe(upstream);
    });
    upstream.on("error", () => socket.destroy());
    socket.on("error", () => upstream.destroy());
  });
  const proxyPort = await listen(proxy);
  const reserved = net.createServer();
  cdpPort = await listen(reserved);
  await new Promise((r) => reserved.close(r));
  const config = parseBrowserConfig(
    JSON.stringify({
      proxy: `http://127.0.0.1:${proxyPort}`,
      startTabs: ["https://app.test/", "http://plain.test/"],
      cdpHost: "browser.test",
      cdpPort,
      caFile,
    }),
  );
  // The relay listens on loopback here, where the test is (a configuration refuses loopback: see below).
  launcher = await start(
    { ...config, cdpHost: "127.0.0.1" },
    { home: path.join(dir, "home"), log: (r) => log.push(r), restartDelayMs: 100 },
  );
}, 30_000);

afterAll(async () => {
  await launcher?.stop();
  origin?.close();
  proxy?.close();
});

describe("browser launcher", () => {
  it("waits for the env CA before launching Chromium", async () => {
    await until("waiting-for-ca", async () => log.some((r) => r.event === "waiting-for-ca"), 20_000, 100);
    await new Promise((r) => setTimeout(r, 500));
    expect(log.some((r) => r.event === "chromium-started")).toBe(false);
    expect(launcher.pid()).toBeUndefined();
  });

  it("trusts the CA, opens every start tab through the proxy, and serves DevTools on its port", async () => {
    const ready = launcher.ready();
    fs.mkdirSync(path.dirname(caFile), { recursive: true });
    fs.copyFileSync(path.join(dir, "ca-ready.pem"), caFile);
    await ready;
    const tabs = await until(
      "both start tabs loaded",
      async () => {
        const t = await devtoolsTabs();
        const titles = t.map((x) => x.title).sort();
        return titles.includes("trusted app") && titles.includes("plain page") ? t : undefined;
      },
      20_000,
      100,
    );
    expect(tabs.map((t) => t.url).sort()).toEqual(["http://plain.test/", "https://app.test/"]);
    expect(seen).toContain("CONNECT app.test:443");
    expect(seen).toContain("GET http://plain.test/");
  });

  it("sends nothing of its own through the proxy: only the start tabs' hosts, however long it idles", async () => {
    // Chromium phones home (sign-in, push messaging, optimization hints, the search engine's preconnect, network
    // time) unless told not to: in an env those would be hosts the computer contacted, in its evidence.
    // Two remain that no switch or policy of this Chromium (156, Debian) turns off: its component updater's
    // check and its sign-in service's ListAccounts; they are named here so that any other is a failure.
    await new Promise((r) => setTimeout(r, 10_000));
    const residual =
      /^(CONNECT (update\.googleapis\.com|accounts\.google\.com):443|GET http:\/\/update\.googleapis\.com\/service\/update2\/.*)$/;
    const own = seen.filter(
      (line) => !/^(CONNECT app\.test:443|GET http:\/\/plain\.test\/.*)$/.test(line) && !residual.test(line),
    );
    expect(own).toEqual([]);
  }, 30_000);

  it("starts Chromium again after kill -9, with its start tabs, on the profile it had", async () => {
    const profile = launcher.profileDir();
    fs.writeFileSync(path.join(profile, "kept-across-a-crash"), "yes");
    const pid = launcher.pid()!;
    const ready = launcher.ready();
    process.kill(pid, "SIGKILL");
    await ready;
    expect(launcher.pid()).not.toBe(pid);
    expect(log.map((r) => r.event)).toEqual(expect.arrayContaining(["chromium-exited", "restarted"]));
    const tabs = await until(
      "start tabs again",
      async () => {
        const t = await devtoolsTabs();
        return t.filter((x) => x.title === "trusted app" || x.title === "plain page").length === 2 ? t : undefined;
      },
      20_000,
      100,
    );
    expect(tabs).toHaveLength(2);
    expect(launcher.profileDir()).toBe(profile);
    expect(fs.existsSync(path.join(profile, "kept-across-a-crash"))).toBe(true);
  });

  it("starts Chromium on a fresh profile, then its start tabs, when its relay is asked, on a connection DevTools' requests share", async () => {
    const old = launcher.profileDir();
    const pid = launcher.pid()!;
    fs.writeFileSync(path.join(old, "left-by-an-episode"), "yes");
    // One kept-alive connection, as the site proxy's pool holds to the relay: DevTools, the operation, DevTools.
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const sockets = new Set<net.Socket>();
    const ask = (method: string, pathname: string, headers: Record<string, string> = {}) =>
      new Promise<{ status: number; body: string }>((resolve, reject) => {
        const req = http.request(
          {
            host: "127.0.0.1",
            port: cdpPort,
            method,
            path: pathname,
            agent,
            headers: { host: "localhost", ...headers },
          },
          (res) => {
            let body = "";
            res.setEncoding("utf8");
            res.on("data", (c) => (body += c));
            res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
          },
        );
        req.on("socket", (socket) => sockets.add(socket));
        req.on("error", reject);
        req.end();
      });
    try {
      expect((await ask("GET", "/json/version")).status).toBe(200);
      // Only POST, and never with a page's Origin.
      expect((await ask("GET", "/multienv/fresh-profile")).status).toBe(405);
      expect((await ask("POST", "/multienv/fresh-profile", { origin: "http://app.test" })).status).toBe(403);
      expect(launcher.pid()).toBe(pid);
      // An episode's pages stop: one blank tab is left.
      expect((await ask("POST", "/multienv/blank-tab")).status).toBe(200);
      expect((await devtoolsTabs()).map((t) => t.url)).toEqual(["about:blank"]);
      const fresh = await ask("POST", "/multienv/fresh-profile");
      expect(fresh.status).toBe(200);
      expect(JSON.parse(fresh.body)).toMatchObject({ profile: 2, standby: true });
      // At a blank tab until it is told to open its start tabs (a reset does once the sites are emptied).
      expect((await devtoolsTabs()).map((t) => t.url)).toEqual(["about:blank"]);
      const tabs = await ask("POST", "/multienv/start-tabs");
      expect({ status: tabs.status, body: JSON.parse(tabs.body) }).toEqual({ status: 200, body: { startTabs: 2 } });
      expect((await devtoolsTabs()).map((t) => t.url).sort()).toEqual(["http://plain.test/", "https://app.test/"]);
      expect((await ask("GET", "/json/version")).status).toBe(200);
      expect(sockets.size).toBe(1);
    } finally {
      agent.destroy();
    }
    expect(launcher.pid()).not.toBe(pid);
    expect(launcher.profileDir()).not.toBe(old);
    // The old profile is gone, all of it; the new one is Chromium's HOME and user data, trusting the env CA.
    expect(fs.existsSync(old)).toBe(false);
    // (beside the next standby's, numbered above it, once it starts)
    const inUse = path.basename(launcher.profileDir());
    expect(fs.readdirSync(path.dirname(old)).filter((n) => Number(n) <= Number(inUse))).toEqual([inUse]);
    expect(fs.existsSync(path.join(launcher.profileDir(), ".pki", "nssdb", "cert9.db"))).toBe(true);
    expect(log.filter((r) => r.event === "fresh-profile")).toEqual([expect.objectContaining({ profile: 2 })]);
    expect(log.filter((r) => !String(r.event).startsWith("standby")).at(-1)?.event).toBe("start-tabs");
    expect(log.filter((r) => r.event === "chromium-exited")).toHaveLength(1); // the kill -9 above, not this
  });

  it("keeps a standby on a new, empty profile at a blank tab, its own HOME, which the relay never reaches", async () => {
    const standby = await until("the next standby", () => launcher.standby(), 30_000, 100);
    const inUse = Number(path.basename(launcher.profileDir()));
    expect(standby.profile).toBeGreaterThan(inUse);
    expect(standby.proc.pid).not.toBe(launcher.pid());
    const root = path.join(path.dirname(launcher.profileDir()), String(standby.profile));
    expect(processOf(standby.proc.pid!).env).toContain(`HOME=${root}`);
    expect(processOf(standby.proc.pid!).args).toContain(`--user-data-dir=${path.join(root, "chromium")}`);
    const own = await devtoolsOf(standby.port);
    expect(own.tabs.map((t) => t.url)).toEqual(["about:blank"]);
    // Through the relay: the browser in use, its tabs alone; the standby's browser and tab are not found there.
    const relayed = await devtoolsOf(cdpPort);
    expect(relayed.browser).not.toBe(own.browser);
    expect(relayed.tabs.map((t) => t.id)).not.toContain(own.tabs[0].id);
    for (const pathname of [`/devtools/browser/${own.browser}`, `/devtools/page/${own.tabs[0].id}`])
      expect(await webSocketOutcome(`ws://127.0.0.1:${cdpPort}${pathname}`), pathname).not.toBe("open");
    // It answers on its own port all along: what the relay refused was the standby, not a dead one.
    expect((await devtoolsOf(standby.port)).browser).toBe(own.browser);
  }, 60_000);

  it("promotes the standby on a fresh profile: the one in use ended, every process of it, its profile deleted", async () => {
    const standby = await until("the next standby", () => launcher.standby(), 30_000, 100);
    const old = { pid: launcher.pid()!, dir: launcher.profileDir() };
    const answer = await launcher.freshProfile();
    expect(answer).toMatchObject({ profile: standby.profile, standby: true });
    expect(launcher.pid()).toBe(standby.proc.pid);
    expect(groupAlive(old.pid)).toBe(false);
    // The relay reaches it now: the browser and the blank tab that were the standby's.
    const own = await devtoolsOf(standby.port);
    const relayed = await devtoolsOf(cdpPort);
    expect(relayed.browser).toBe(own.browser);
    expect(relayed.tabs.map((t) => t.url)).toEqual(["about:blank"]);
    // The old profile goes after the answer, and is gone once the start tabs are open: before the next episode.
    await launcher.openStartTabs();
    expect(fs.existsSync(old.dir)).toBe(false);
  }, 60_000);

  // A reset of the computer is a fresh profile, then its start tabs. Two asked at once (two runners, or a reset
  // retried while the first still runs) must both end with one browser on a new profile at its start tabs once, or
  // one of them refused with one line; never two Chromiums in use, one leaked, a profile left on disk, or the start
  // tabs twice.
  for (const [how, second] of [
    ["at once", "with the first"],
    ["one while the other opens its start tabs", "after the first's fresh profile"],
  ] as const)
    it(`two resets of the computer ${how} end on one fresh profile at its start tabs once`, async () => {
      const home = path.join(dir, "home");
      await until("the next standby", () => launcher.standby(), 30_000, 100);
      const before = Number(path.basename(launcher.profileDir()));
      const reset = async (freshDone?: () => void) => {
        await launcher.freshProfile().finally(freshDone);
        return launcher.openStartTabs();
      };
      let resets: Promise<unknown>[];
      if (second === "with the first") resets = [reset(), reset()];
      else {
        let startSecond!: () => void;
        const firstFresh = new Promise<void>((r) => (startSecond = r));
        const first = reset(startSecond);
        await firstFresh;
        resets = [first, reset()];
      }
      const outcomes = await Promise.allSettled(resets);
      for (const outcome of outcomes)
        if (outcome.status === "rejected") expect(String(outcome.reason)).toMatch(/^Error: [^\n]+$/);
      expect(outcomes.some((o) => o.status === "fulfilled")).toBe(true);
      const inUse = Number(path.basename(launcher.profileDir()));
      expect(inUse).toBeGreaterThan(before);
      expect((await devtoolsTabs()).map((t) => t.url).sort()).toEqual(["http://plain.test/", "https://app.test/"]);
      // The standby is back, and the only other Chromium: none leaked, none started twice.
      const standby = await until("the next standby", () => launcher.standby(), 30_000, 100);
      expect(chromiumsUnder(home)).toEqual([launcher.pid()!, standby.proc.pid!].sort((a, b) => a - b));
      expect(fs.readdirSync(path.join(home, "profiles")).sort()).toEqual([String(inUse), String(standby.profile)]);
    }, 90_000);

  // A loaded machine schedules Chromium's browser process so rarely that a tab takes seconds to open: held still with
  // SIGSTOP (every process of it) for longer than a health probe waits, then let go, it opens the start tabs all the
  // same.
  it("opens its start tabs on a Chromium the machine's load holds still for seconds", async () => {
    const pid = launcher.pid()!;
    process.kill(-pid, "SIGSTOP");
    const resume = () => process.kill(-pid, "SIGCONT");
    const held = setTimeout(resume, 6_000);
    try {
      expect(await launcher.openStartTabs()).toEqual({ startTabs: 2 });
    } finally {
      clearTimeout(held);
      resume();
    }
    expect(launcher.pid()).toBe(pid);
    expect((await devtoolsTabs()).map((t) => t.url).sort()).toEqual(["http://plain.test/", "https://app.test/"]);
  }, 60_000);

  it("falls back to starting Chromium on a new, empty profile when the standby was killed", async () => {
    const standby = await until("the next standby", () => launcher.standby(), 30_000, 100);
    const used = launcher.profileDir();
    process.kill(-standby.proc.pid!, "SIGKILL");
    const answer = await launcher.freshProfile();
    expect(answer.standby).toBe(false);
    expect(answer.profile).toBeGreaterThan(standby.profile);
    expect(launcher.pid()).not.toBe(standby.proc.pid);
    expect(Number(path.basename(launcher.profileDir()))).toBe(answer.profile);
    expect((await devtoolsOf(cdpPort)).tabs.map((t) => t.url)).toEqual(["about:blank"]);
    await launcher.openStartTabs();
    for (const gone of [used, path.join(path.dirname(used), String(standby.profile))])
      expect(fs.existsSync(gone), gone).toBe(false);
    expect(log.filter((r) => r.event === "fresh-profile").at(-1)).toMatchObject({ standby: false });
  }, 60_000);
});

describe("browser config", () => {
  it("names the field that is wrong", () => {
    expect(() => parseBrowserConfig(undefined)).toThrow(/MULTIENV_BROWSER_CONFIG: is not set/);
    expect(() => parseBrowserConfig("{")).toThrow(/is not JSON/);
    expect(() => parseBrowserConfig(JSON.stringify({ proxy: "nope", caFile: "/x" }))).toThrow(
      /MULTIENV_BROWSER_CONFIG.proxy: must be/,
    );
    expect(() =>
      parseBrowserConfig(JSON.stringify({ proxy: "http://p:3128", caFile: "/x", startTabs: ["not a url"] })),
    ).toThrow(/startTabs\[0\]: "not a url" is not a URL/);
    expect(() =>
      parseBrowserConfig(JSON.stringify({ proxy: "http://p:3128", caFile: "/x", cdpHost: "b", extra: 1 })),
    ).toThrow(/MULTIENV_BROWSER_CONFIG\.extra: unknown key/);
    expect(() => parseBrowserConfig(JSON.stringify({ proxy: "http://p:3128", caFile: "/x" }))).toThrow(
      /MULTIENV_BROWSER_CONFIG.cdpHost: must be the browser's address or name/,
    );
    expect(
      parseBrowserConfig(JSON.stringify({ proxy: "http://p:3128", caFile: "/ca.pem", cdpHost: "desk-browser" })),
    ).toEqual({
      proxy: "http://p:3128",
      startTabs: [],
      cdpHost: "desk-browser",
      cdpPort: 9222,
      caFile: "/ca.pem",
      headful: false,
    });
  });

  it("never lets the DevTools relay listen on every address or on loopback", () => {
    for (const host of [
      "0.0.0.0",
      "::",
      "[::]",
      "0",
      "127.0.0.1",
      "127.0.0.2",
      "::1",
      "::ffff:127.0.0.1",
      "0x7f.1",
      "localhost",
      "relay.localhost",
    ]) {
      expect(
        () => parseBrowserConfig(JSON.stringify({ proxy: "http://p:3128", caFile: "/x", cdpHost: host })),
        host,
      ).toThrow(/^MULTIENV_BROWSER_CONFIG\.cdpHost: ".*" is (an unspecified|a loopback|a localhost)/);
    }
    expect(
      parseBrowserConfig(JSON.stringify({ proxy: "http://p:3128", caFile: "/x", cdpHost: "172.20.0.3" })).cdpHost,
    ).toBe("172.20.0.3");
  });
});
