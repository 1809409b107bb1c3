// The proxy log's view of exchanges: one `request` line each (the status the computer got, or how it went away
// before an answer), the line saying why the proxy answered one itself, and a `replay-miss` line when a replayed
// site's replay server answered one as a miss.
import type * as http from "node:http";
import type { SecretTokens } from "../protocol/auth";
import { REPLAY_HEADER, REPLAY_NEAREST_HEADER } from "../protocol/replay-server-config";
import { Scrubber } from "../protocol/scrub";
import type { Ending, Exchange, ExchangeObserver, Failure } from "./exchange";
import type { EventLog } from "./log";

export class ProxyLogObserver implements ExchangeObserver {
  private readonly replayed: ReadonlySet<string>;
  private readonly scrubber: Scrubber;

  /**
   * `replayed`: the sites served from a recording, whose answers marked a miss get a `replay-miss` line (any other
   * site's marker is its own words, not evidence); `secrets` never reach that line's URLs.
   */
  constructor(
    private readonly log: EventLog,
    replayed: readonly string[],
    secrets: SecretTokens | undefined,
  ) {
    this.replayed = new Set(replayed);
    this.scrubber = new Scrubber(secrets, []);
  }

  ended(x: Exchange, ending: Ending): void {
    if (ending.how === "answered") {
      this.request(x, ending.status);
      this.replayMiss(x, ending.status, ending.headers);
    } else if (ending.how === "abandoned") this.request(x, undefined, ending.endedBy);
    else {
      this.log.write(ending.failure.line);
      this.request(x, ending.failure.status);
    }
  }

  declined(failure: Failure): void {
    this.log.write(failure.line);
  }

  /** The exchange's one `request` line: the status the computer got, or how it went away before an answer. */
  private request(x: Exchange, status: number | undefined, endedBy?: string): void {
    this.log.write({
      event: "request",
      ...(x.id !== undefined ? { id: x.id } : {}),
      method: x.method,
      host: x.host,
      port: x.port,
      ...(x.site ? { site: x.site } : {}),
      ...(x.hostHeader !== undefined ? { hostHeader: x.hostHeader } : {}),
      ...(status !== undefined ? { status } : {}),
      ...(endedBy !== undefined ? { endedBy } : {}),
    });
  }

  /**
   * The exchange's `replay-miss` line, when a replayed site's replay server answered it as a miss: the method, the
   * URL, and the nearest recorded URL the server named (the gateway passes that header from replay servers alone).
   */
  private replayMiss(x: Exchange, status: number, headers: http.IncomingHttpHeaders | undefined): void {
    if (x.site === undefined || !this.replayed.has(x.site) || status !== 404 || headers === undefined) return;
    if (headers[REPLAY_HEADER.toLowerCase()] !== "miss") return;
    const nearest = headers[REPLAY_NEAREST_HEADER.toLowerCase()];
    this.log.write({
      event: "replay-miss",
      ...(x.id !== undefined ? { id: x.id } : {}),
      site: x.site,
      method: x.method,
      url: this.scrubber.url((x.url ?? "").slice(0, 2048)),
      ...(typeof nearest === "string" ? { nearest: this.scrubber.url(nearest.slice(0, 2048)) } : {}),
    });
  }
}
