// GET /healthz: ready when every site server answers /ready with 200 and, when captures are
// configured, every website container's capture is writing.
//
// "Writing" means: the newest `<site>-<role>.pcap<N>` file holds at least a pcap header
// (tcpdump -U writes it as soon as it opens the file, so this proves the sidecar started)
// and it was modified within `captureFreshMs` (default 30 s) or it grows during the check.
// An idle website sends no packets, so the check itself makes traffic in every captured
// container (the /ready request for a server, a TCP connection for a frontend) and then
// waits up to CAPTURE_SETTLE_MS for those packets to reach the file. A running sidecar
// therefore always passes, and a dead one fails once its file is older than the window.
import type http from "node:http";
import net from "node:net";
import type { CaptureRole } from "../protocol/traffic";
import { listCaptures, openCapture } from "./captures";
import type { GatewayConfig } from "./config";
import { getSmall } from "./fetch";

const READY_TIMEOUT_MS = 3_000;
const PCAP_HEADER_BYTES = 24;
/** How long a capture may take to show the probes' packets. */
const CAPTURE_SETTLE_MS = 1_500;
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

async function readMagic(dir: string, name: string): Promise<number | undefined> {
  const opened = await openCapture(dir, name);
  if (!opened) return undefined;
  const { handle } = opened;
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

interface CaptureState {
  name: string;
  bytes: number;
  mtimeMs: number;
}

/** The newest file of each expected capture (undefined when there is none). */
async function snapshot(
  dir: string,
  expected: Array<{ site: string; role: CaptureRole }>,
): Promise<Array<CaptureState | undefined>> {
  const all = await listCaptures(dir).catch(() => []); // oldest first
  return expected.map(({ site, role }) => {
    const newest = all.filter((capture) => capture.site === site && capture.role === role).at(-1);
    return newest && { name: newest.name, bytes: newest.bytes, mtimeMs: Date.parse(newest.modified) };
  });
}

export class HealthCheck {
  constructor(
    private readonly config: GatewayConfig,
    private readonly agent: http.Agent,
  ) {}

  private async captureProblem(
    dir: string,
    state: CaptureState | undefined,
    before: CaptureState | undefined,
    site: string,
    role: CaptureRole,
  ): Promise<string | undefined> {
    if (!state) return `no ${site}-${role}.pcap<N> file in the captures folder`;
    if (state.bytes < PCAP_HEADER_BYTES) return `${state.name} has no pcap header yet`;
    const magic = await readMagic(dir, state.name).catch(() => undefined);
    if (magic === undefined || !PCAP_MAGICS.has(magic)) return `${state.name} is not a pcap file`;
    const grew = before !== undefined && (before.name !== state.name || before.bytes !== state.bytes);
    if (grew || Date.now() - state.mtimeMs <= this.config.captureFreshMs) return undefined;
    return `${state.name} unchanged since ${new Date(state.mtimeMs).toISOString()}, even after traffic to its container`;
  }

  async check(): Promise<Health> {
    const missing: Missing[] = [];
    const sites = Object.entries(this.config.sites);
    const dir = this.config.capturesDir;
    const expected =
      dir === undefined
        ? []
        : sites.flatMap(([site, upstreams]) =>
            (upstreams.frontend ? ["server", "frontend"] : ["server"]).map((role) => ({
              site,
              role: role as CaptureRole,
            })),
          );
    const before = dir === undefined ? [] : await snapshot(dir, expected);
    await Promise.all(
      sites.map(async ([name, site]) => {
        const problem = await serverReady(site, this.agent);
        if (problem) missing.push({ what: "ready", site: name, detail: problem });
        if (site.frontend && dir !== undefined) await touch(site.frontend);
      }),
    );
    if (dir !== undefined) {
      // tcpdump hands packets over in blocks (up to a second late), so give the probes' packets time to land.
      const deadline = Date.now() + CAPTURE_SETTLE_MS;
      let problems: Array<string | undefined>;
      for (;;) {
        const now = await snapshot(dir, expected);
        problems = await Promise.all(
          expected.map(({ site, role }, i) => this.captureProblem(dir, now[i], before[i], site, role)),
        );
        if (problems.every((p) => p === undefined) || Date.now() >= deadline) break;
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      problems.forEach((detail, i) => {
        if (detail) missing.push({ what: "capture", ...expected[i], detail });
      });
    }
    return { ok: missing.length === 0, missing };
  }
}
