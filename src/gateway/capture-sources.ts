// traffic/v1 from capture servers (`captureSources`; kubernetes, where each website container's captures stay in
// its own pod): each website container's capture server serves its pod's captures folder, and the gateway answers
// from them. It sends each `Authorization: Bearer <captureServerToken(control token, container)>`, in place of the
// client's.
//
// The listing is every server's listing merged, or a 502 naming each server that did not answer as it should: never
// a partial listing, which a collector would take for everything. One capture is streamed from the server of the
// container its name names (through the Forwarder, so it is framed, bounded and never buffered as any upstream's
// answer is).
import type http from "node:http";
import type { IncomingMessage, ServerResponse } from "node:http";
import { bearer, captureServerToken } from "../protocol/auth";
import {
  CAPTURE_SERVER_HEALTH_PATH,
  CAPTURE_SERVER_LIST_PATH,
  captureServerFilePath,
  parseCaptureName,
  trafficCaptureListingSchema,
  type CaptureServerHealth,
  type TrafficCapture,
} from "../protocol/traffic";
import { getSmall } from "./fetch";
import type { Forwarder, Upstream } from "./proxy";
import { replyJson } from "../service-kit/reply";
import type { Refuse } from "../service-kit/reply";

const LIST_TIMEOUT_MS = 10_000;
const HEALTH_TIMEOUT_MS = 3_000;

interface Source {
  url: URL;
  authorization: string;
}

/** Why one capture server's listing was not taken. */
export interface SourceFailure {
  container: string;
  detail: string;
}

/** `path` under a capture server's base URL (its path, if any, prefixes it). */
function under(base: URL, path: string): URL {
  return new URL(base.pathname.replace(/\/+$/, "") + path, base);
}

/** What is wrong with a capture server's listing of `container`, or its captures. */
function checkListing(container: string, body: Buffer): TrafficCapture[] | string {
  let json: unknown;
  try {
    json = JSON.parse(body.toString("utf8"));
  } catch {
    return "answered something other than JSON";
  }
  const parsed = trafficCaptureListingSchema.safeParse(json);
  if (!parsed.success) return "answered something other than a traffic/v1 listing";
  for (const capture of parsed.data.captures) {
    const named = parseCaptureName(capture.name)!;
    const own = `${named.site}-${named.role}`;
    if (own !== container || capture.container !== own || capture.site !== named.site || capture.role !== named.role)
      return `listed ${capture.name}, which is not ${container}'s`;
  }
  return parsed.data.captures;
}

export class CaptureSources {
  private readonly sources = new Map<string, Source>();

  constructor(
    sources: Record<string, URL>,
    controlToken: string,
    private readonly forwarder: Forwarder,
    private readonly agent: http.Agent,
  ) {
    for (const [container, url] of Object.entries(sources))
      this.sources.set(container, { url, authorization: bearer(captureServerToken(controlToken, container)) });
  }

  /** The tokens the gateway sends to capture servers (no site may see them either). */
  static tokens(sources: Record<string, URL> | undefined, controlToken: string): string[] {
    return Object.keys(sources ?? {}).map((container) => captureServerToken(controlToken, container));
  }

  private async sourceListing(container: string, source: Source): Promise<TrafficCapture[] | SourceFailure> {
    const url = under(source.url, CAPTURE_SERVER_LIST_PATH);
    const failure = (detail: string) => ({ container, detail: `${url.href}: ${detail}` });
    try {
      const fetched = await getSmall(url, {
        timeoutMs: LIST_TIMEOUT_MS,
        agent: this.agent,
        headers: { accept: "application/json", authorization: source.authorization },
      });
      if (fetched.status !== 200) return failure(`answered ${fetched.status}`);
      const captures = checkListing(container, fetched.body);
      return typeof captures === "string" ? failure(captures) : captures;
    } catch (error) {
      return failure(`no answer (${(error as Error).message})`);
    }
  }

  /** Every capture server's captures, oldest first (by modification time, then name), or every server that failed. */
  async listing(): Promise<{ captures: TrafficCapture[] } | { failed: SourceFailure[] }> {
    const answers = await Promise.all(
      [...this.sources].map(([container, source]) => this.sourceListing(container, source)),
    );
    const failed = answers.filter((answer): answer is SourceFailure => !Array.isArray(answer));
    if (failed.length > 0) return { failed };
    const captures = answers.flat() as TrafficCapture[];
    const at = new Map(captures.map((capture) => [capture, Date.parse(capture.modified)]));
    captures.sort((a, b) => at.get(a)! - at.get(b)! || a.name.localeCompare(b.name));
    return { captures };
  }

  /** The traffic/v1 listing: 200 with the merged listing, or 502 naming each container whose server failed. */
  async serveListing(res: ServerResponse, refuse: Refuse): Promise<void> {
    const listing = await this.listing();
    if ("failed" in listing)
      return refuse(
        502,
        {
          error: "capture server failed",
          containers: listing.failed.map((f) => f.container),
          detail: listing.failed.map((f) => `${f.container}: ${f.detail}`).join("; "),
        },
        `capture server failed: ${listing.failed.map((f) => f.container).join(", ")}`,
      );
    replyJson(res, 200, listing);
  }

  /** One capture, streamed from its container's capture server as that server answers it. */
  serveCapture(req: IncomingMessage, res: ServerResponse, name: string, refuse: Refuse): void {
    const parsed = parseCaptureName(name);
    if (!parsed) return refuse(400, { error: "not a capture file name", name });
    const container = `${parsed.site}-${parsed.role}`;
    const source = this.sources.get(container);
    if (!source) return refuse(404, { error: "unknown container", container, name });
    const upstream: Upstream = {
      url: source.url,
      label: { container },
      host: source.url.host,
      authorization: source.authorization,
    };
    this.forwarder.forward(req, res, upstream, captureServerFilePath(name));
  }

  /**
   * Why `container`'s capture is not writing, as its capture server's /healthz says (which compares with that
   * server's previous look), or undefined when it is.
   */
  async captureProblem(container: string): Promise<string | undefined> {
    const source = this.sources.get(container);
    if (!source) return `no capture server configured for ${container}`;
    const url = under(source.url, CAPTURE_SERVER_HEALTH_PATH);
    try {
      const fetched = await getSmall(url, {
        timeoutMs: HEALTH_TIMEOUT_MS,
        agent: this.agent,
        headers: { accept: "application/json", authorization: source.authorization },
      });
      if (fetched.status === 200) return undefined;
      let health: Partial<CaptureServerHealth> | undefined;
      try {
        health = JSON.parse(fetched.body.toString("utf8")) as Partial<CaptureServerHealth>;
      } catch {
        health = undefined;
      }
      const problem = typeof health?.problem === "string" ? health.problem.split("\n")[0].slice(0, 500) : undefined;
      return problem ?? `capture server ${url.href} answered ${fetched.status}`;
    } catch (error) {
      return `capture server ${url.href} did not answer (${(error as Error).message})`;
    }
  }
}
