// Test helpers for the runner: a real env on loopback, without Docker. The real gateway process
// (bin/multienv-gateway.js), the sample live site's server, the real site proxy and a real headless Chromium
// registered as the gateway's computer. Only 127.0.0.0/8 is contacted.
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import https from "node:https";
import net from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import type { OutputMap } from "@pulumi/pulumi/automation";
import { Command } from "commander";
import { expect } from "vitest";
import { CHROMIUM_FLAGS } from "../../src/browser/launcher";
import { computerAgentToken } from "../../src/protocol/auth";
import { startGateway, TOKEN, type GatewayProcess } from "../gateway/helpers";
import { onCleanup } from "../site-proxy/helpers";

export { TOKEN } from "../gateway/helpers";
export { cleanup, onCleanup, startProxy, curl, startHttpServer, waitFor } from "../site-proxy/helpers";

export const ROOT = resolve(__dirname, "..", "..");
export const CLI = join(ROOT, "bin", "multienv.js");

export function tempDir(prefix = "runner-test-"): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  onCleanup(() => rmSync(dir, { recursive: true, force: true, maxRetries: 10, retryDelay: 100 }));
  return dir;
}

export function sha256(bytes: Buffer): string {
  return createHash("sha256").update(bytes).digest("hex");
}

export function sha256OfFile(path: string): string {
  return sha256(readFileSync(path));
}

/** A classic pcap global header followed by `size - 24` bytes of filler: the gateway does not read its content. */
export function pcapBytes(size: number, seed = 1): Buffer {
  const bytes = Buffer.alloc(size);
  Buffer.from("d4c3b2a1020004000000000000000000ffff000001000000", "hex").copy(bytes);
  for (let i = 24; i < size; i++) bytes[i] = (i * 31 + seed * 7) & 0xff;
  return bytes;
}

/** Writes capture files into `dir` (oldest first, with increasing mtimes). */
export function writeCaptures(dir: string, files: Record<string, Buffer>): void {
  let t = Date.now() / 1000 - 100;
  for (const [name, bytes] of Object.entries(files)) {
    writeFileSync(join(dir, name), bytes);
    // Distinct times, so the listing's order (oldest first) is the order given.
    utimesSync(join(dir, name), t, t);
    t += 1;
  }
}

export async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
  const port = (server.address() as net.AddressInfo).port;
  await new Promise((done) => server.close(done));
  return port;
}

/** Reads JSON lines from a child's stdout until `match` is seen. */
function waitForLine(
  child: ChildProcess,
  match: (line: Record<string, unknown>) => boolean,
  what: string,
  timeoutMs = 20_000,
): Promise<Record<string, unknown>> {
  return new Promise((resolvePromise, reject) => {
    let buffered = "";
    let stderr = "";
    const timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}; stderr: ${stderr}`)), timeoutMs);
    child.stderr?.on("data", (d: Buffer) => (stderr += d.toString()));
    child.stdout!.on("data", (d: Buffer) => {
      buffered += d.toString();
      for (const line of buffered.split("\n")) {
        if (!line.startsWith("{")) continue;
        try {
          const parsed = JSON.parse(line) as Record<string, unknown>;
          if (match(parsed)) {
            clearTimeout(timer);
            resolvePromise(parsed);
          }
        } catch {
          // a partial line; wait for the rest
        }
      }
    });
    child.once("exit", (code) => reject(new Error(`${what}: exited ${code} first; stderr: ${stderr}`)));
  });
}

/** Stops `child` on cleanup; with `group`, its whole process group (Chromium's helpers write its profile too). */
function stopOnCleanup(child: ChildProcess, { group = false } = {}): void {
  const signal = (name: NodeJS.Signals) => {
    try {
      if (group && child.pid !== undefined) process.kill(-child.pid, name);
      else child.kill(name);
    } catch {
      // already gone
    }
  };
  onCleanup(async () => {
    if (child.exitCode !== null || child.signalCode !== null) {
      if (group) signal("SIGKILL");
      return;
    }
    const exited = new Promise((done) => child.once("exit", done));
    signal("SIGTERM");
    const timer = setTimeout(() => signal("SIGKILL"), 3_000);
    await exited;
    clearTimeout(timer);
    if (group) signal("SIGKILL");
  });
}

/** The sample live site's server (examples/sites/live-server) on a loopback port. */
export async function startLiveSite(settings: Record<string, unknown>): Promise<{ url: string }> {
  const port = await freePort();
  const child = spawn(process.execPath, ["--require", "tsx/cjs", join(ROOT, "examples/sites/live-server/server.ts")], {
    cwd: ROOT,
    env: { ...process.env, PORT: String(port), AGENTENV_WEBSITE_SETTINGS: JSON.stringify(settings) },
    stdio: ["ignore", "pipe", "pipe"],
  });
  stopOnCleanup(child);
  await waitForLine(child, (l) => l.event === "startup", "the live site's startup line");
  return { url: `http://127.0.0.1:${port}` };
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

/** The real gateway on loopback; stopped on cleanup. */
export async function startTestGateway(config: Record<string, unknown>): Promise<GatewayProcess> {
  const gateway = await startGateway(config);
  onCleanup(() => gateway.stop());
  return gateway;
}

/** An OutputMap as the Automation API returns it for a deployed env on `gatewayUrl`. */
export function deployedOutputs(gatewayUrl: string, overrides: Record<string, unknown> = {}, token = TOKEN): OutputMap {
  const values: Record<string, unknown> = {
    gatewayUrl,
    websites: {
      shop: { live: false, domains: ["shop.test", "*.shop.test"] },
      github: { live: true, domains: ["github.com"] },
    },
    computers: { agent: { network: "allow-all" } },
    live: true,
    liveWebsites: [{ name: "github", domains: ["github.com"], allowHosts: [], reproducible: false }],
    reproducible: false,
    captureTraffic: true,
    ...overrides,
  };
  const map: OutputMap = {
    controlToken: { value: token, secret: true },
    agentTokens: { value: { agent: computerAgentToken(token, "agent") }, secret: true },
  };
  for (const [key, value] of Object.entries(values)) map[key] = { value, secret: false };
  return map;
}

/**
 * An HTTPS server on loopback with a self-signed certificate for `name`. `/` answers a page whose script opens
 * `/hold`, a request the server never finishes: the page's connection stays open for as long as the browser lives.
 */
export async function startTlsOrigin(
  name: string,
  title: string,
): Promise<{ port: number; held(): number; openConnections(): Promise<number> }> {
  const dir = tempDir("runner-tls-");
  execFileSync(
    "openssl",
    [
      "req",
      "-x509",
      "-newkey",
      "rsa:2048",
      "-nodes",
      "-keyout",
      join(dir, "key.pem"),
      "-out",
      join(dir, "cert.pem"),
      "-days",
      "1",
      "-subj",
      `/CN=${name}`,
    ],
    { stdio: "ignore" },
  );
  let held = 0;
  const server = https.createServer(
    { key: readFileSync(join(dir, "key.pem")), cert: readFileSync(join(dir, "cert.pem")), keepAliveTimeout: 600_000 },
    (req, res) => {
      if (req.url === "/hold") {
        held += 1;
        res.writeHead(200, { "content-type": "text/event-stream" });
        res.write(": held\n\n");
        return;
      }
      res.writeHead(200, { "content-type": "text/html" });
      res.end(`<title>${title}</title><script>fetch("/hold")</script>`);
    },
  );
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
  onCleanup(
    () =>
      new Promise((done) => {
        server.closeAllConnections();
        server.close(() => done(undefined));
      }),
  );
  const openConnections = () =>
    new Promise<number>((done, fail) => server.getConnections((error, count) => (error ? fail(error) : done(count))));
  return { port: (server.address() as net.AddressInfo).port, held: () => held, openConnections };
}

/** A subcommand's --help, from the same register() the CLI calls, in this process (each spawn costs seconds). */
export async function helpOf(name: string, module: { register(program: Command): void }): Promise<string> {
  let out = "";
  const program = new Command("multienv")
    .exitOverride()
    .configureOutput({ writeOut: (text) => (out += text), writeErr: (text) => (out += text) });
  module.register(program);
  await expect(program.parseAsync(["node", "multienv", name, "--help"])).rejects.toMatchObject({
    code: "commander.helpDisplayed",
  });
  return out;
}
