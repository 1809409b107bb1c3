// The recording indexed for matching (host -> exact key -> exchanges; host -> path -> groups of one key), and the
// search that applies the rules of rules.ts in their order. Pure once built: what was served in the episode is
// passed in, never kept here.
import { fieldSet, NO_FIELDS, unionOf, type FieldSet } from "./field-set";
import { bodyFields, fieldsDigest, pathOf, QUERY, queryFields, targetWithout } from "./fields";
import type { RecordedExchange } from "./recording";
import {
  answeringMethods,
  bestFieldOverlap,
  canAnswer,
  comparedHeaders,
  exactKey,
  headerScore,
  nearestUrl,
  pickInRecordedOrder,
  preflightAnswer,
} from "./rules";

export interface IgnoreLists {
  ignoreParams: readonly string[];
  ignoreBodyFields: readonly string[];
}

/** A request as the matcher sees it. */
export interface IncomingRequest {
  method: string;
  scheme: string;
  /** Normalised as recorded hosts are (normalizeHost). */
  host: string;
  target: string;
  headers: readonly { name: string; value: string }[];
  body: { mimeType: string; bytes: Buffer };
  /** A WebSocket handshake. */
  upgrade: boolean;
}

/** A request whose body was read as fields, ready for `choose`. */
export interface PreparedRequest {
  request: IncomingRequest;
  body: FieldSet;
}

export type MatchResult =
  { kind: "exact" | "fuzzy"; exchange: RecordedExchange } | { kind: "miss"; url: string; nearest: string | undefined };

interface Prepared {
  exchange: RecordedExchange;
  headers: FieldSet;
  isWebSocket: boolean;
}

/** The recorded exchanges of one exact key: a group, for the fuzzy rule, of the same path. */
interface Group {
  method: string;
  url: string;
  /** Query fields as `?name`, body fields as `.name`: one set, so both count in one overlap ratio. */
  fields: FieldSet;
  first: number;
  members: Prepared[];
}

interface HostIndex {
  byKey: Map<string, Group>;
  byPath: Map<string, Group[]>;
  urls: string[];
}

function isConditional(headers: readonly { name: string; value: string }[]): boolean {
  return headers.some(({ name }) => /^if-(none-match|modified-since)$/i.test(name));
}

export class ReplayIndex {
  private readonly hosts = new Map<string, HostIndex>();
  private readonly ignoreParams: ReadonlySet<string>;
  private readonly ignoreBodyFields: ReadonlySet<string>;
  private readonly allUrls: string[] = [];

  private constructor(ignore: IgnoreLists) {
    this.ignoreParams = new Set(ignore.ignoreParams);
    this.ignoreBodyFields = new Set(ignore.ignoreBodyFields);
  }

  static async build(exchanges: readonly RecordedExchange[], ignore: IgnoreLists): Promise<ReplayIndex> {
    const index = new ReplayIndex(ignore);
    for (const exchange of exchanges) await index.add(exchange);
    return index;
  }

  get hostNames(): string[] {
    return [...this.hosts.keys()];
  }

  private async bodyOf(body: { mimeType: string; bytes: Buffer } | undefined): Promise<FieldSet> {
    return body ? bodyFields(body.mimeType, body.bytes, this.ignoreBodyFields) : NO_FIELDS;
  }

  private keyOf(
    method: string,
    scheme: string,
    host: string,
    target: string,
    body: FieldSet,
  ): { key: string; fields: FieldSet } {
    const key = exactKey(method, scheme, host, targetWithout(target, this.ignoreParams), fieldsDigest(body));
    return { key, fields: unionOf(fieldSet(queryFields(target, this.ignoreParams), QUERY), body) };
  }

  private async add(exchange: RecordedExchange): Promise<void> {
    const { method, scheme, host, target, requestBody } = exchange;
    const { key, fields } = this.keyOf(method, scheme, host, target, await this.bodyOf(requestBody));
    let hostIndex = this.hosts.get(host);
    if (!hostIndex) {
      hostIndex = { byKey: new Map(), byPath: new Map(), urls: [] };
      this.hosts.set(host, hostIndex);
    }
    const url = `${scheme}://${host}${target}`;
    let group = hostIndex.byKey.get(key);
    if (!group) {
      group = { method, url, fields, first: exchange.index, members: [] };
      hostIndex.byKey.set(key, group);
      const path = pathOf(target);
      const groups = hostIndex.byPath.get(path);
      if (groups) groups.push(group);
      else hostIndex.byPath.set(path, [group]);
      hostIndex.urls.push(url);
      this.allUrls.push(url);
    }
    group.members.push({
      exchange,
      headers: fieldSet(comparedHeaders(exchange.requestHeaders)),
      isWebSocket: exchange.status === 101 || exchange.webSocketMessages !== undefined,
    });
  }

  /** The exchange that answers `request`, given the exchanges already served in this episode. */
  async find(request: IncomingRequest, served: ReadonlySet<number>): Promise<MatchResult> {
    return this.choose(await this.prepare(request), served);
  }

  /** The one step of a search that waits: the request's body read as fields (undici parses a multipart form). */
  async prepare(request: IncomingRequest): Promise<PreparedRequest> {
    return { request, body: await this.bodyOf(request.body) };
  }

  /**
   * The exchange that answers a prepared request. Synchronous, so that a server records what it served before any
   * other request is matched: two identical requests at once get the first and the second recorded answers.
   */
  choose({ request, body }: PreparedRequest, served: ReadonlySet<number>): MatchResult {
    const url = `${request.scheme}://${request.host}${request.target}`;
    // Rule 1, the host: only exchanges recorded for the request's own (normalised) host can answer it.
    const hostIndex = this.hosts.get(request.host);
    if (!hostIndex) return { kind: "miss", url, nearest: nearestUrl(url, this.allUrls) };
    const incoming = { upgrade: request.upgrade, conditional: isConditional(request.headers) };
    const headers = fieldSet(comparedHeaders(request.headers));
    const pick = (group: Group): RecordedExchange | undefined => {
      const usable = group.members.filter((member) =>
        canAnswer({ status: member.exchange.status, isWebSocket: member.isWebSocket }, incoming),
      );
      const chosen = pickInRecordedOrder(
        usable.map((member) => ({ index: member.exchange.index, score: headerScore(member.headers, headers) })),
        served,
      );
      return usable.find((member) => member.exchange.index === chosen)?.exchange;
    };
    const methods = answeringMethods(request.method);
    let fields: FieldSet = NO_FIELDS;
    const exactGroups: Group[] = [];
    for (const method of methods) {
      const keyed = this.keyOf(method, request.scheme, request.host, request.target, body);
      fields = keyed.fields;
      const group = hostIndex.byKey.get(keyed.key);
      if (!group) continue;
      exactGroups.push(group);
      const exact = pick(group);
      if (exact) return { kind: "exact", exchange: exact };
    }
    // Unlike WPR, which answers nothing when the exact URL was recorded for another method only, the fuzzy rule
    // still runs, over groups of the request's own method(s) that can answer it.
    const samePath = hostIndex.byPath.get(pathOf(request.target)) ?? [];
    for (const method of methods) {
      const groups = samePath.filter(
        (group) => group.method === method && !exactGroups.includes(group) && pick(group) !== undefined,
      );
      const candidates = groups.map((group) => ({
        ...group,
        unserved: group.members.some((member) => !served.has(member.exchange.index)),
      }));
      const chosen = bestFieldOverlap(fields, candidates);
      const fuzzy = chosen === undefined ? undefined : pick(groups[chosen]);
      if (fuzzy) return { kind: "fuzzy", exchange: fuzzy };
    }
    const preflight = this.preflight(request, served);
    if (preflight) return { kind: "fuzzy", exchange: preflight };
    return { kind: "miss", url, nearest: nearestUrl(url, hostIndex.urls) };
  }

  /** An unrecorded CORS preflight answered from the request it asks about (rules.ts preflightAnswer). */
  private preflight(request: IncomingRequest, served: ReadonlySet<number>): RecordedExchange | undefined {
    const method = request.headers.find((h) => h.name.toLowerCase() === "access-control-request-method")?.value;
    if (request.method !== "OPTIONS" || method === undefined || method.toUpperCase() === "OPTIONS") return undefined;
    const actual = this.choose(
      {
        request: { ...request, method: method.toUpperCase(), body: { mimeType: "", bytes: Buffer.alloc(0) } },
        body: NO_FIELDS,
      },
      served,
    );
    return actual.kind === "miss" ? undefined : preflightAnswer(actual.exchange, request);
  }
}
