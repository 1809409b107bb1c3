// The request log's view of exchanges: each one's recording begins as it does (the tap that follows its bytes), a
// live host's credentials left out unless the config keeps that host's, and the proxy's own answer to one recorded
// as its answer.
import * as http from "node:http";
import { covers } from "../protocol/host-names";
import { SITE_PROXY_HEADER } from "../protocol/site-proxy";
import { normalizeHost } from "./connect";
import type { Asked, Ending, Exchange, ExchangeObserver } from "./exchange";
import type { ExchangeTap } from "./forward";
import type { RequestRecorder } from "./recorder";

export class RequestLogObserver implements ExchangeObserver {
  private readonly keepCredentials: string[];

  /** `keepCredentials`: the recorded live hosts' patterns whose credentials the log keeps. */
  constructor(
    private readonly recorder: RequestRecorder,
    keepCredentials: readonly string[],
  ) {
    this.keepCredentials = keepCredentials.map(normalizeHost);
  }

  begun(x: Exchange, asked: Asked, connectionId: string): ExchangeTap {
    // A live host's credentials (its session) stay out of the log unless the config keeps that host's.
    const live = x.site === undefined;
    return this.recorder.begin({
      logId: x.id!,
      method: x.method,
      url: asked.url,
      httpVersion: asked.httpVersion,
      rawHeaders: asked.rawHeaders,
      connection: connectionId,
      ...(live && !this.keepCredentials.some((pattern) => covers(pattern, x.host)) ? { redactCredentials: true } : {}),
    });
  }

  /** The proxy's own answer to an exchange, in its recording. */
  ended(x: Exchange, ending: Ending): void {
    if (ending.how !== "failed" || x.tap === undefined) return;
    const f = ending.failure;
    x.tap.response({
      status: f.status,
      statusText: http.STATUS_CODES[f.status] ?? "",
      httpVersion: "HTTP/1.1",
      rawHeaders: ["Content-Type", "text/plain; charset=utf-8", SITE_PROXY_HEADER, f.verdict],
    });
    x.tap.responseChunk(Buffer.from(f.message + "\n"));
    x.tap.finish("proxy answer");
  }
}
