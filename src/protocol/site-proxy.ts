// Wire constants of the site proxy: the header it marks its own answers with, and the JSON lines it logs.
// The proxy writes these records and the runner, the gateway and tests read them, so they live here once.

/**
 * The site proxy's control listener: its log (GET), its CA certificate (GET), DevTools (under it), ending every
 * connection (POST), its request log (GET).
 */
export const SITE_PROXY_CONTROL_PATHS = {
  log: "/log",
  caCert: "/ca.pem",
  cdp: "/cdp",
  endConnections: "/connections/end",
  /** The request log (GET): its entries, one JSON line each, oldest first. */
  requests: "/requests",
  /**
   * Who holds the computer, for the request log: PUT when a person takes it over (every exchange that begins from
   * then on is the person's), DELETE when the person hands it back. The gateway says so at each takeover.
   */
  person: "/person",
} as const;

/**
 * Set on every answer the proxy gives itself (not a site's), so a client can tell "the proxy said no" from "the site
 * said no".
 */
export const SITE_PROXY_HEADER = "X-Agentenv-Site-Proxy";

/** Values of SITE_PROXY_HEADER. */
export const SiteProxyVerdict = {
  /** The computer's reaching does not include the host: 403. */
  refused: "refused",
  /** The host could not be reached (its name does not resolve, or it does not answer in time): 502. */
  failed: "failed",
  /** The request itself is broken (malformed request line, oversized headers, CONNECT without a port): 400. */
  badRequest: "bad-request",
} as const;
export type SiteProxyVerdict = (typeof SiteProxyVerdict)[keyof typeof SiteProxyVerdict];

/** Why a connection could not be opened. */
export type FailedReason = "doesn't resolve" | "no answer";

interface LogRecordBase {
  /** ISO 8601 time the record was written. */
  time: string;
}

/** The proxy is listening; the bound addresses and ports are real (a name resolved, port 0 picked). */
export interface StartupRecord extends LogRecordBase {
  event: "startup";
  pid: number;
  proxy: { host: string; port: number };
  /** The control listener, and the DevTools relay (`host:port`) it serves under /cdp/. */
  control: { host: string; port: number; cdp: string } | null;
  /** Path of the env CA certificate that browsers trust. */
  caCert: string;
  reach: "allow-all" | "none" | string[];
  sites: string[];
}

/** One connection, written when it ends. */
export interface ConnectionRecord extends LogRecordBase {
  event: "connection";
  /** `CONNECT` for a tunnel, `HTTP` for a connection that carried forwarded absolute-form requests. */
  method: "CONNECT" | "HTTP";
  host: string;
  port: number;
  /** The address actually connected to (for a synthetic site, the gateway's). */
  address: string;
  /** Synthetic site the host belongs to, when it is one. */
  site?: string;
  /** A tunnel to a live host the proxy opened to record (its requests went on over connections of their own). */
  recorded?: true;
  /** What a tunnel whose TLS the proxy terminated carried, as ALPN chose it. */
  protocol?: "h2" | "http/1.1";
  /** Bytes from the computer to the host. */
  bytesToHost: number;
  /** Bytes from the host to the computer. */
  bytesFromHost: number;
  /** ISO 8601 time the connection opened. */
  start: string;
  durationMs: number;
  /** Why it ended, when that was not a normal close (idle timeout, stalled write, reset). */
  endedBy?: string;
}

/** A connection that could not be opened: the client got a 502. */
export interface FailedRecord extends LogRecordBase {
  event: "failed";
  method: string;
  host: string;
  port: number;
  reason: FailedReason;
  error: string;
}

/**
 * A host the computer may not reach: its reaching does not include the host, or the host stands for an address
 * the proxy never dials (then `address` names it). The client got a 403.
 */
export interface RefusedRecord extends LogRecordBase {
  event: "refused";
  method: string;
  /** The host as the computer named it (lower case, without a trailing dot). */
  host: string;
  port: number;
  /** The address refused, when the refusal was of an address the host resolved to (or is). */
  address?: string;
  why: string;
}

/**
 * One request the proxy forwarded (to a host or, for a synthetic name, to the gateway), written when the
 * computer got its answer's status, or when the computer went away before that (`endedBy`): every request the
 * proxy took on leaves exactly one such line, whatever the Host header said and whatever ended it.
 */
export interface RequestRecord extends LogRecordBase {
  event: "request";
  /** The exchange's id, unique in the log: its request log entry names it (`_multienv.logId`). */
  id?: string;
  method: string;
  /** The host the request was routed by (its absolute-form target, or the synthetic tunnel's name). */
  host: string;
  port: number;
  /** Synthetic site the host belongs to, when it is one. */
  site?: string;
  /** The Host header the computer sent, when it sent one (a host is always sent `host` itself). */
  hostHeader?: string;
  /**
   * The status the computer got: the host's own, or the proxy's (403 refused, 502 failed); absent when the computer
   * went away before an answer.
   */
  status?: number;
  /**
   * How the computer went away before it was answered: `stream reset (<RFC 9113 error code>)` (CANCEL from a
   * browser dropping a request; PROTOCOL_ERROR for a body cut short of its Content-Length) or `connection closed`.
   * The request was then never sent, or aborted at once on its way.
   */
  endedBy?: string;
}

/**
 * A request to a site served from a recording that the recording lacks: its replay server answered 404, marked a
 * miss. Written after the exchange's `request` line (same `id`); `nearest` is the recorded URL the server found
 * closest, as it said it (the gateway passes that word from replay servers alone). Tokens are scrubbed from both URLs.
 */
export interface ReplayMissRecord extends LogRecordBase {
  event: "replay-miss";
  id?: string;
  site: string;
  method: string;
  url: string;
  nearest?: string;
}

/** Anything unexpected, including a bad request answered with 400. Never a crash. */
export interface ErrorRecord extends LogRecordBase {
  event: "error";
  error: string;
  /** The client's address, when the error belongs to a client connection. */
  client?: string;
  method?: string;
  host?: string;
  port?: number;
  /** The status the client got, when it got one. */
  status?: number;
}

/** The supervisor started the proxy again after it died. */
export interface RestartedRecord extends LogRecordBase {
  event: "restarted";
  pid: number;
  previousPid: number;
  exitCode: number | null;
  signal: string | null;
}

/**
 * An episode begins: every connection the proxy held was ended first (their lines stand before this one), so the
 * lines after it are the episode's alone. Written on `POST /connections/end?episode=<n>`.
 */
export interface EpisodeMarkRecord extends LogRecordBase {
  event: "episode";
  episode: number;
  /** How many sockets were ended. */
  ended: number;
}

/**
 * A deploy's self-test begins or ends: every connection the proxy held was ended first, so the lines between a
 * start and its end are the self-test's own, and no episode's evidence. Written on
 * `POST /connections/end?selfTest=start|end`.
 */
export interface SelfTestMarkRecord extends LogRecordBase {
  event: "self-test";
  phase: "start" | "end";
  ended: number;
}

/**
 * A person took the computer over (`person-holds`) or handed it back (`person-handed-back`): the request log's entries
 * of exchanges begun between the two are the person's (`_multienv.human`). Written on `PUT`/`DELETE` of the control
 * listener's `person` path.
 */
export interface PersonRecord extends LogRecordBase {
  event: "person-holds" | "person-handed-back";
}

export type SiteProxyLogRecord =
  | StartupRecord
  | PersonRecord
  | ConnectionRecord
  | FailedRecord
  | RefusedRecord
  | RequestRecord
  | ReplayMissRecord
  | ErrorRecord
  | RestartedRecord
  | EpisodeMarkRecord
  | SelfTestMarkRecord
  | RequestLogEvictedRecord;

/**
 * The request log's oldest file was removed to make room (its rotation keeps `files` of `fileBytes`): the exchanges
 * whose entries it held, by the `id` of their `request` lines, are no longer in the request log. Written before the
 * file is removed, so a reader that finds an exchange's entry missing finds it here. A collection tells from these
 * lines how many of an episode's entries are lost.
 */
export interface RequestLogEvictedRecord extends LogRecordBase {
  event: "request-log-evicted";
  file: string;
  /** Entries the file held (whole lines). */
  entries: number;
  /** The `logId` of each entry the file held. */
  logIds: string[];
}

/** How `POST /connections/end` may mark the log after ending every connection. */
export type LogMark = { episode: number } | { selfTest: "start" | "end" };

/** The query of `POST /connections/end` that asks for `mark`. */
export function logMarkQuery(mark: LogMark | undefined): string {
  if (mark === undefined) return "";
  return "episode" in mark ? `?episode=${mark.episode}` : `?selfTest=${mark.selfTest}`;
}

const EPISODE_LINE = '{"event":"episode",';
const SELF_TEST_START = '{"event":"self-test","time":';

/**
 * Where each `episode` line starts in the log, with its episode. The proxy writes `event` first, so the prefix is
 * exact.
 */
function episodeMarks(logText: string): { at: number; episode: number }[] {
  const marks: { at: number; episode: number }[] = [];
  for (let at = 0; at < logText.length;) {
    const end = logText.indexOf("\n", at);
    const next = end === -1 ? logText.length : end + 1;
    if (logText.startsWith(EPISODE_LINE, at)) {
      try {
        marks.push({ at, episode: (JSON.parse(logText.slice(at, next)) as EpisodeMarkRecord).episode });
      } catch {
        // a torn last line
      }
    }
    at = next;
  }
  return marks;
}

/**
 * The log without its self-tests: from each self-test's start line to its end line, both included. A start with no
 * end (a self-test that died) removes nothing, so no line of an episode is ever dropped on a guess.
 */
function withoutSelfTests(logText: string): string {
  let kept = "";
  let from = 0;
  let start: number | undefined;
  for (let at = 0; at < logText.length;) {
    const end = logText.indexOf("\n", at);
    const next = end === -1 ? logText.length : end + 1;
    if (logText.startsWith(SELF_TEST_START, at)) {
      let phase: unknown;
      try {
        phase = (JSON.parse(logText.slice(at, next)) as SelfTestMarkRecord).phase;
      } catch {
        // a torn last line
      }
      if (phase === "start") start = at;
      else if (phase === "end" && start !== undefined) {
        kept += logText.slice(from, start);
        from = next;
        start = undefined;
      }
    }
    at = next;
  }
  return kept + logText.slice(from);
}

/**
 * The lines of one episode: from its `episode` line (included) to the next one, or to the end of the log; without
 * `episode`, the episode under way. An episode the log has no mark for is read from the last mark before it, or,
 * when every mark is later, the log before the first mark (the deploy's own episode, in a log a self-test did not
 * mark).
 */
export function episodeOf(logText: string, episode?: number): string {
  logText = withoutSelfTests(logText);
  const marks = episodeMarks(logText);
  if (marks.length === 0) return logText;
  let index = marks.length - 1;
  if (episode !== undefined) while (index >= 0 && marks[index].episode > episode) index--;
  const from = index === -1 ? 0 : marks[index].at;
  const until = marks[index + 1]?.at;
  return logText.slice(from, until);
}

/** Parses the log file's text into records, one per line (blank lines skipped). */
function parseSiteProxyLog(text: string): SiteProxyLogRecord[] {
  return text
    .split("\n")
    .filter((line) => line.trim() !== "")
    .map((line) => JSON.parse(line) as SiteProxyLogRecord);
}

/**
 * A log that is being written while it is read: every complete line parsed, and the last line skipped when it is
 * not yet complete (no newline after it, or not yet valid JSON).
 */
export function parseLiveSiteProxyLog(text: string): SiteProxyLogRecord[] {
  const lines = text.split("\n");
  const last = lines.pop() ?? "";
  const records = parseSiteProxyLog(lines.join("\n"));
  try {
    records.push(...parseSiteProxyLog(last));
  } catch {
    // a torn last line: the rest of it is still being written
  }
  return records;
}

/** Where a site proxy serves the env CA's certificate on its forward port (kubernetes: the browser pod fetches it). */
export const SITE_PROXY_CA_PATH = "/multienv/ca.pem";
