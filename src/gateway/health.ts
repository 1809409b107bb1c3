// GET /healthz: ready when every site server answers /ready with 200 and, when captures are
// configured, every website container's capture is writing (capture-health.ts says what that means).
//
// An idle website sends no packets, so the check itself makes traffic in every captured
// container (the /ready request for a server, a TCP connection for a frontend) and then
// waits up to CAPTURE_SETTLE_MS for those packets to reach the file. A running capture
// therefore always passes, and a dead one fails once its file is older than the window.
//
// The captures are looked at where they are: in the captures folder (`capturesDir`), compared with a look taken
// before the probes; or through each container's capture server (`captureSources`), whose /healthz applies the same
// rule to its own folder and compares with its previous look, so one look there before the probes makes the next
// ones see what the probes' packets added.
import type http from "node:http";
import net from "node:net";
import { websiteContainers } from "../protocol/gateway-config";
import { parseCaptureContainer, type CaptureRole } from "../protocol/traffic";
import { captureProblem, newestCaptures, type CaptureState, type ExpectedCapture } from "../service-kit/capture-health";
import type { CaptureSources } from "./capture-sources";
import type { GatewayConfig } from "./config";
import { getSmall } from "./fetch";

const READY_TIMEOUT_MS = 3_000;
/** How long a capture may take to show the probes' packets. */
const CAPTURE_SETTLE_MS = 1_500;

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

/** How the check looks at the expected captures. */
interface CaptureWatch {
  /** The look before the probes of the sites. */
  begin(): Promise<void>;
  /** Why each of `which` (indices into the expected captures) is not writing now; undefined for those that are. */
  problems(which: number[]): Promise<Array<string | undefined>>;
}

/** The captures folder's files, compared with what they were before the probes. */
class FolderWatch implements CaptureWatch {
  private before: Array<CaptureState | undefined> = [];

  constructor(
    private readonly dir: string,
    private readonly expected: ExpectedCapture[],
    private readonly freshMs: number,
  ) {}

  async begin(): Promise<void> {
    this.before = await newestCaptures(this.dir, this.expected);
  }

  async problems(which: number[]): Promise<Array<string | undefined>> {
    const now = await newestCaptures(
      this.dir,
      which.map((i) => this.expected[i]),
    );
    return Promise.all(
      which.map((i, k) => captureProblem(this.dir, now[k], this.before[i], this.expected[i], this.freshMs)),
    );
  }
}

/** Each container's capture server's /healthz: the first look there is the one the later ones compare with. */
class SourceWatch implements CaptureWatch {
  constructor(
    private readonly sources: CaptureSources,
    private readonly expected: ExpectedCapture[],
  ) {}

  private problem(i: number): Promise<string | undefined> {
    const { site, role } = this.expected[i];
    return this.sources.captureProblem(`${site}-${role}`);
  }

  async begin(): Promise<void> {
    await Promise.all(this.expected.map((_, i) => this.problem(i)));
  }

  problems(which: number[]): Promise<Array<string | undefined>> {
    return Promise.all(which.map((i) => this.problem(i)));
  }
}

export class HealthCheck {
  private readonly expected: ExpectedCapture[];

  constructor(
    private readonly config: GatewayConfig,
    private readonly agent: http.Agent,
    private readonly sources?: CaptureSources,
  ) {
    this.expected = websiteContainers(config.sites).map((container) => parseCaptureContainer(container)!);
  }

  private watch(): CaptureWatch | undefined {
    if (this.config.capturesDir !== undefined)
      return new FolderWatch(this.config.capturesDir, this.expected, this.config.captureFreshMs);
    if (this.sources) return new SourceWatch(this.sources, this.expected);
    return undefined;
  }

  async check(): Promise<Health> {
    const missing: Missing[] = [];
    const watch = this.watch();
    await watch?.begin();
    await Promise.all(
      Object.entries(this.config.sites).map(async ([name, site]) => {
        const problem = await serverReady(site, this.agent);
        if (problem) missing.push({ what: "ready", site: name, detail: problem });
        if (site.frontend && watch) await touch(site.frontend);
      }),
    );
    if (watch) {
      // tcpdump hands packets over in blocks (up to a second late), so give the probes' packets time to land. A
      // capture seen writing once is done: only the others are looked at again.
      const deadline = Date.now() + CAPTURE_SETTLE_MS;
      const problems: Array<string | undefined> = [];
      let pending = this.expected.map((_, i) => i);
      for (;;) {
        const found = await watch.problems(pending);
        pending.forEach((i, k) => (problems[i] = found[k]));
        pending = pending.filter((_, k) => found[k] !== undefined);
        if (pending.length === 0 || Date.now() >= deadline) break;
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      problems.forEach((detail, i) => {
        if (detail) missing.push({ what: "capture", ...this.expected[i], detail });
      });
    }
    return { ok: missing.length === 0, missing };
  }
}
