// The matching rules, each one pure function, in the order Web Page Replay (catapult's web_page_replay_go,
// archive.go FindRequest) applies them: the host (normalised by recording.ts normalizeHost, and indexed by it); the
// exact URL with the method (and, here, the body); among several recorded answers, the best header overlap, served
// in recorded order; failing an exact URL, the same path with the best query overlap (here: query and body fields).
// Where this differs from WPR it says why.
import { sharedCount, type FieldSet } from "./field-set";
import type { Fields } from "./fields";
import type { RecordedExchange } from "./recording";

/**
 * WPR's overlap ratio of two field sets: 2 * M / T, M = 1 + the names whose value lists are equal in both, T = the
 * number of names in each, added. Starting M at 1 keeps the ratio above 0 when nothing overlaps (WPR serves a
 * candidate then too); two empty sets give Infinity, as in WPR, the best ratio there is. A field's hash is its name
 * and its whole value list, so the names equal in both are the hashes both sets share: one linear merge.
 */
export function overlapRatio(incoming: FieldSet, recorded: FieldSet): number {
  return (2 * (1 + sharedCount(incoming, recorded))) / (incoming.length + recorded.length);
}

/**
 * Headers compared for the overlap score: lower-cased names, without HTTP/2 pseudo-headers (a recording over HTTP/2
 * has them, a replay over HTTP/1.1 does not), without what names the connection or the hop rather than the request
 * (Host and :authority: the host rule has decided; the X-Forwarded-* the env's proxies add; connection-specific
 * headers), so that none of them skews the score alike for every candidate.
 */
const NOT_COMPARED = new Set([
  "host",
  "connection",
  "keep-alive",
  "proxy-connection",
  "transfer-encoding",
  "te",
  "trailer",
  "upgrade",
  "http2-settings",
  "x-forwarded-for",
  "x-forwarded-host",
  "x-forwarded-proto",
  "forwarded",
  "via",
]);

export function comparedHeaders(headers: readonly { name: string; value: string }[]): Fields {
  const fields: Fields = new Map();
  for (const { name, value } of headers) {
    const lower = name.toLowerCase();
    if (lower.startsWith(":") || NOT_COMPARED.has(lower)) continue;
    const values = fields.get(lower);
    if (values) values.push(value);
    else fields.set(lower, [value]);
  }
  return fields;
}

/**
 * Rule 2, the exact key: the same method, scheme, host and request-target (ignored parameters cut out) and the same
 * body fields. WPR keys on the URL and skips other methods; the body is keyed here as well, so two POSTs to one URL
 * with different forms get their own answers.
 */
export function exactKey(
  method: string,
  scheme: string,
  host: string,
  targetWithoutIgnored: string,
  bodyDigest: string,
): string {
  return `${method} ${scheme}://${host}${targetWithoutIgnored} ${bodyDigest}`;
}

/**
 * The recorded methods that answer a request's method, best first: its own; for HEAD, GET as well (a browser's
 * HEAD, rarely recorded, asks for the GET's headers; the server sends them without the body).
 */
export function answeringMethods(method: string): readonly string[] {
  return method === "HEAD" ? ["HEAD", "GET"] : [method];
}

/**
 * Whether a recorded exchange can answer at all: a WebSocket handshake only from a recorded WebSocket, a plain
 * request never from one; and a request without a validator never from a recorded 304 (WPR leaves conditional
 * requests as a TODO: a browser whose cache is empty would get a 304 with nothing to reuse).
 */
export function canAnswer(
  recorded: { status: number; isWebSocket: boolean },
  incoming: { upgrade: boolean; conditional: boolean },
): boolean {
  if (recorded.isWebSocket !== incoming.upgrade) return false;
  if (recorded.status === 304 && !incoming.conditional) return false;
  return true;
}

/** Rule 3, among exchanges with one key: WPR's header overlap of a candidate's recorded headers and the request's. */
export function headerScore(recordedHeaders: FieldSet, incomingHeaders: FieldSet): number {
  return overlapRatio(incomingHeaders, recordedHeaders);
}

/**
 * Rule 4, repeats in recorded order: of `candidates` (in recorded order, each with its header score), those with
 * the best score are served first to last, one per request in an episode; once all were served, the last again.
 * WPR prefers any candidate not yet served over a better-scoring one served already (so a second desktop request
 * would get a mobile answer) and, once all were served, goes back to the best-scoring first one (a poll would jump
 * back in time); this keeps to the best score and stays at the end.
 */
export function pickInRecordedOrder(
  candidates: readonly { index: number; score: number }[],
  served: ReadonlySet<number>,
): number | undefined {
  if (candidates.length === 0) return undefined;
  let best = -Infinity;
  for (const candidate of candidates) if (candidate.score > best) best = candidate.score;
  const top = candidates.filter((candidate) => candidate.score === best);
  return (top.find((candidate) => !served.has(candidate.index)) ?? top[top.length - 1]).index;
}

/** A group of recorded requests with one exact key, as the fuzzy rule weighs it. */
export interface FuzzyCandidate {
  url: string;
  fields: FieldSet;
  /** The recorded index of its first exchange. */
  first: number;
  /** Whether any of its exchanges is still unserved this episode. */
  unserved: boolean;
}

/**
 * Whether `a` goes before `b` at one ratio: a group with answers not yet served first; among those, WPR's tie-break
 * (the lexically smaller URL), then the earlier recording; among groups all served, the later recording (the last
 * answer again). So a poll whose URL changes each time (a cache-buster, a timestamp) gets its recorded answers in
 * order rather than WPR's one best URL over and over.
 */
function beforeAtOneRatio(a: FuzzyCandidate, b: FuzzyCandidate): boolean {
  if (a.unserved !== b.unserved) return a.unserved;
  if (!a.unserved) return a.first > b.first;
  return a.url < b.url || (a.url === b.url && a.first < b.first);
}

/**
 * Rule 5, no exact key: among the recorded requests of the same method and path, the one whose query parameters
 * and body fields overlap the request's best (WPR's ratio over the query; the body's fields count here as well, so
 * a form with one volatile field still finds its answer); ties as `beforeAtOneRatio` says. Returns the chosen
 * group's position in `groups`.
 */
export function bestFieldOverlap(incoming: FieldSet, groups: readonly FuzzyCandidate[]): number | undefined {
  let chosen: number | undefined;
  let bestRatio = -Infinity;
  groups.forEach((group, i) => {
    const ratio = overlapRatio(incoming, group.fields);
    if (chosen === undefined || ratio > bestRatio || (ratio === bestRatio && beforeAtOneRatio(group, groups[chosen]))) {
      chosen = i;
      bestRatio = ratio;
    }
  });
  return chosen;
}

/** For a miss's log line: the recorded URL sharing the longest beginning with the requested one (the first such). */
export function nearestUrl(requested: string, recorded: readonly string[]): string | undefined {
  let nearest: string | undefined;
  let longest = -1;
  for (const url of recorded) {
    const limit = Math.min(url.length, requested.length);
    let shared = 0;
    while (shared < limit && url.charCodeAt(shared) === requested.charCodeAt(shared)) shared += 1;
    if (shared > longest) {
      longest = shared;
      nearest = url;
    }
  }
  return nearest;
}

/** The index a synthesised answer carries: no recorded exchange, so nothing is marked served by it. */
export const SYNTHESISED = -1;

/**
 * A CORS preflight the recording lacks (Playwright's HAR never holds one; Chromium's often not), answered from the
 * recorded request it asks about: when that request's recorded answer allowed the origin, a 204 allowing the
 * method and headers asked for, with the recorded origin and credentials; else nothing (a miss, as the live site
 * would have refused). The recorded request is not served by this: its own answer stays next in line.
 */
export function preflightAnswer(
  actual: RecordedExchange,
  request: { headers: readonly { name: string; value: string }[] },
): RecordedExchange | undefined {
  const recorded = (name: string) => actual.responseHeaders.find((h) => h.name.toLowerCase() === name)?.value;
  const asked = (name: string) => request.headers.find((h) => h.name.toLowerCase() === name)?.value;
  const allowOrigin = recorded("access-control-allow-origin");
  const method = asked("access-control-request-method");
  if (allowOrigin === undefined || method === undefined) return undefined;
  const headers = [
    { name: "Access-Control-Allow-Origin", value: allowOrigin },
    { name: "Access-Control-Allow-Methods", value: method },
    { name: "Vary", value: "Origin" },
  ];
  const credentials = recorded("access-control-allow-credentials");
  if (credentials !== undefined) headers.push({ name: "Access-Control-Allow-Credentials", value: credentials });
  const askedHeaders = asked("access-control-request-headers");
  if (askedHeaders !== undefined) headers.push({ name: "Access-Control-Allow-Headers", value: askedHeaders });
  return {
    ...actual,
    index: SYNTHESISED,
    status: 204,
    statusText: "No Content",
    responseHeaders: headers,
    responseBody: Buffer.alloc(0),
    responseBodyIsText: false,
    webSocketMessages: undefined,
  };
}
