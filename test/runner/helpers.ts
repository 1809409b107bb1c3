// Test helpers for the runner: a real env on loopback, without Docker. The real gateway process
// (bin/multienv-gateway.js), the sample live site's server, the real site proxy and a real headless Chromium
// registered as the gateway's computer. Only 127.0.0.0/8 is contacted.
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdirSync, readFileSync, utimesSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
import type { OutputMap } from "@pulumi/pulumi/automation";
import { Command } from "commander";
import { expect } from "vitest";
import { computerAgentToken, computerControlToken } from "../../src/protocol/auth";
import type { CollectOptions } from "../../src/runner/evidence/collect";
import { request, startGateway, TOKEN, type GatewayProcess } from "../gateway/helpers";
import { connectCdp, type CdpClient } from "../helpers/cdp";
import { startChromium } from "../helpers/chromium";
import { startUpstream } from "../helpers/servers";
import { freePort } from "../helpers/ports";
import { onCleanup, ROOT, stopOnCleanup, tempDir, waitForLine } from "../helpers/processes";
import { startProxy, type ProxyProcess } from "../site-proxy/helpers";

export const CLI = join(ROOT, "bin", "multienv.js");

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

/** The real gateway on loopback; stopped on cleanup. */
export async function startTestGateway(config: Record<string, unknown>): Promise<GatewayProcess> {
  const gateway = await startGateway(config);
  onCleanup(() => gateway.stop());
  return gateway;
}

/**
 * A real Chromium as computer "agent" of the real gateway (its proxy log an empty stand-in), and its agent connected
 * to the first page through the gateway with its agent token, as a harness connects; all stopped on cleanup.
 */
export async function startBrowserWithAgent(): Promise<{ gateway: GatewayProcess; agent: CdpClient }> {
  const browser = await startChromium();
  const proxyLog = await startUpstream((_req, res) => res.end(""));
  onCleanup(() => proxyLog.close());
  const gateway = await startTestGateway({
    sites: {},
    computers: { agent: { cdp: browser.cdp, proxyLog: `${proxyLog.url}/log` } },
  });
  const list = JSON.parse(
    (await request(`${gateway.url}/computers/agent/cdp/json/list`, { headers: { Authorization: `Bearer ${TOKEN}` } }))
      .body,
  ) as Array<{ type: string; webSocketDebuggerUrl: string }>;
  const agent = await connectCdp(list.find((t) => t.type === "page")!.webSocketDebuggerUrl, {
    Authorization: `Bearer ${computerAgentToken(TOKEN, "agent")}`,
  });
  onCleanup(() => agent.close());
  return { gateway, agent };
}

/**
 * A computer "agent" on loopback: the real site proxy (routing shop.test to `site`, keeping a request log unless
 * told not to, DevTools at `cdp`) registered with the real gateway; both stopped on cleanup.
 */
export async function startComputerBehindGateway(options: {
  site: string;
  cdp?: string;
  /** Whether the proxy keeps a request log (default true), or where and its rotation's limits. */
  requestLog?: boolean | { fileBytes?: number; files?: number; dir?: string };
  /** The proxy's log (default: a new file). */
  proxyLog?: string;
}): Promise<{ proxy: ProxyProcess; gateway: GatewayProcess; requestLogDir: string }> {
  const requestLog = options.requestLog ?? true;
  const { dir = join(tempDir(), "requests"), ...rotation } = typeof requestLog === "object" ? requestLog : {};
  const proxy = await startProxy(
    {
      gateway: options.site,
      sites: { shop: ["shop.test"] },
      control: { host: "127.0.0.1", port: 0, cdp: options.cdp ?? "127.0.0.1:9" },
      ...(options.proxyLog !== undefined ? { log: options.proxyLog } : {}),
      ...(requestLog !== false ? { requestLog: { dir, computer: "agent", ...rotation } } : {}),
    },
    { token: computerControlToken(TOKEN, "agent") },
  );
  const control = `http://127.0.0.1:${proxy.startup.control!.port}`;
  const gateway = await startTestGateway({
    sites: {},
    computers: {
      agent: {
        cdp: `${control}/cdp`,
        proxyLog: `${control}/log`,
        endConnections: `${control}/connections/end`,
        ...(requestLog !== false ? { requests: `${control}/requests`, person: `${control}/person` } : {}),
      },
    },
  });
  return { proxy, gateway, requestLogDir: dir };
}

/**
 * What the runner is told to collect of the env startComputerBehindGateway starts (stack task-1, its one computer
 * agent, shop.test synthetic, no packet captures), into `artifactsDir`.
 */
export function agentCollectOptions(gatewayUrl: string, artifactsDir: string): CollectOptions {
  return {
    stack: "task-1",
    access: { gatewayUrl, controlToken: TOKEN },
    artifactsDir,
    captureTraffic: false,
    computers: ["agent"],
    syntheticDomains: ["shop.test"],
  };
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

/**
 * A project directory (for the runner's reads of the state) whose file backend holds `stacks` (name -> checkpoint
 * body), each with a stack file.
 */
export function projectWith(
  stacks: Record<string, { resources?: unknown[]; time?: string; gzip?: boolean; target?: string } | null>,
): { projectDir: string; env: NodeJS.ProcessEnv } {
  const projectDir = tempDir("operator-project-");
  writeFileSync(join(projectDir, "Pulumi.yaml"), "name: multienv\nruntime: nodejs\nstackConfigDir: stacks\n");
  mkdirSync(join(projectDir, "stacks"));
  const state = join(projectDir, "state");
  mkdirSync(join(state, ".pulumi", "stacks", "multienv"), { recursive: true });
  writeFileSync(join(state, ".pulumi", "meta.yaml"), "version: 1\n");
  for (const [name, body] of Object.entries(stacks)) {
    if (body?.target !== undefined)
      writeFileSync(join(projectDir, "stacks", `Pulumi.${name}.yaml`), `config:\n  multienv:target: ${body.target}\n`);
    const checkpoint = {
      version: 3,
      checkpoint: {
        stack: `organization/multienv/${name}`,
        latest:
          body === null
            ? null
            : { manifest: { time: body.time ?? "2026-01-02T03:04:05Z" }, resources: body.resources ?? [] },
      },
    };
    const text = Buffer.from(JSON.stringify(checkpoint));
    const file = join(state, ".pulumi", "stacks", "multienv", `${name}.json${body?.gzip ? ".gz" : ""}`);
    writeFileSync(file, body?.gzip ? gzipSync(text) : text);
  }
  return { projectDir, env: { PULUMI_BACKEND_URL: `file://${state}` } };
}

export const ROOT_STACK = (outputs: Record<string, unknown>) => ({
  urn: "urn:pulumi:s::multienv::pulumi:pulumi:Stack::multienv-s",
  type: "pulumi:pulumi:Stack",
  outputs,
});
