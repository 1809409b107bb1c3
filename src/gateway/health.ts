// GET /healthz: ready when every site server answers /ready with 200 and, when captures are
// configured, every website container's capture is writing.
//
// "Writing" means: the newest `<site>-<role>.pcap<N>` file holds at least a pcap header
// (tcpdump -U writes it as soon as it opens the file, so this proves the sidecar started)
// and it was modified within `captureFreshMs`, or it changed since the previous check.
// An idle website sends no packets, so before looking, the check itself makes traffic in
// every captured container: the /ready request for a server, a TCP connection for a
// frontend. A running sidecar therefore always has fresh packets to write.
import type http from "node:http";
import net from "node:net";
import { open } from "node:fs/promises";
import { join } from "node:path";
import type { CaptureRole } from "../protocol/traffic";
import { newestCapture } from "./captures";
import type { GatewayConfig } from "./config";
import { getSmall } from "./fetch";

const READY_TIMEOUT_MS = 3_000;
const PCAP_HEADER_BYTES = 24;
const PCAP_MAGICS = new Set([0xa1b2c3d4, 0xd4c3b2a1, 0xa1b23c4d, 0x4d3cb2a1]);

export interface Missing {
  what: "ready" | "capture";
  site: string;
  role?: CaptureRole;
  detail: string;
}

export interface Health {
  ok: boolean;
  missing: Missing[];
}

async function serverReady(site: GatewayConfig["sites"][string], agent: http.Agent): Promise<string | undefined> {
  const url = new URL(site.server.pathname.replace(/\/+$/, "") + "/ready", site.server);
  try {
    const fetched = await getSmall(url, { timeoutMs: READY_TIMEOUT_MS, agent });
    return fetched.status === 200 ? undefined : `/ready answered ${fetched.status}`;
  } catch (error) {
    return `/ready failed: ${(error as Error).message}`;
  }
}

async function readMagic(path: string): Promise<number | undefined> {
  const handle = await open(path);
  try {
    const { bytesRead, buffer } = await handle.read(Buffer.alloc(4), 0, 4, 0);
    return bytesRead === 4 ? buffer.readUInt32BE(0) : undefined;
  } finally {
    await handle.close();
  }
}

/** Opens and closes a TCP connection, so the frontend's capture sees packets. */
function touch(url: URL): Promise<void> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: url.hostname, port: Number(url.port || 80) });
    const done = () => {
      socket.destroy();
      resolve();
    };
    socket.setTimeout(1_000, done);
    socket.once("connect", () => socket.end());
    socket.once("close", done);
    socket.once("error", done);
  });
}

export class HealthCheck {
  /** The newest file and size seen at the previous check, per container capture. */
  private readonly lastSeen = new Map<string, string>();

  constructor(
    private readonly config: GatewayConfig,
    private readonly agent: http.Agent,
  ) {}

  private async captureProblem(dir: string, site: string, role: CaptureRole): Promise<string | undefined> {
    const newest = await newestCapture(dir, site, role);
    if (!newest) return `no ${site}-${role}.pcap<N> file in the captures folder`;
    if (newest.bytes < PCAP_HEADER_BYTES) return `${newest.name} has no pcap header yet`;
    const magic = await readMagic(join(dir, newest.name)).catch(() => undefined);
    if (magic === undefined || !PCAP_MAGICS.has(magic)) return `${newest.name} is not a pcap file`;
    const key = `${site}-${role}`;
    const seen = `${newest.name}:${newest.bytes}`;
    const changed = this.lastSeen.has(key) && this.lastSeen.get(key) !== seen;
    this.lastSeen.set(key, seen);
    if (changed || Date.now() - newest.mtimeMs <= this.config.captureFreshMs) return undefined;
    return `${newest.name} unchanged since ${new Date(newest.mtimeMs).toISOString()}`;
  }

  async check(): Promise<Health> {
    const missing: Missing[] = [];
    const sites = Object.entries(this.config.sites);
    await Promise.all(
      sites.map(async ([name, site]) => {
        const problem = await serverReady(site, this.agent);
        if (problem) missing.push({ what: "ready", site: name, detail: problem });
        if (site.frontend && this.config.capturesDir !== undefined) await touch(site.frontend);
      }),
    );
    const dir = this.config.capturesDir;
    if (dir !== undefined) {
      for (const [name, site] of sites) {
        const roles: CaptureRole[] = site.frontend ? ["server", "frontend"] : ["server"];
        for (const role of roles) {
          const problem = await this.captureProblem(dir, name, role);
          if (problem) missing.push({ what: "capture", site: name, role, detail: problem });
        }
      }
    }
    return { ok: missing.length === 0, missing };
  }
}
