// Where a request goes, decided from its request-target exactly as received (never a
// decoded or normalised form), so the rest of the path reaches the upstream byte for byte. The prefixes and
// operations are the ones the gateway client builds its paths from (src/protocol/gateway-paths.ts and each route's
// contract): one rule for both sides.
import { CARD_PATH } from "../protocol/card";
import {
  COMPUTER_OPERATIONS,
  COMPUTERS_PREFIX,
  GATEWAY_HEALTH_PATH,
  REPLAY_OPERATIONS,
  REPLAY_PREFIX,
  SITE_ROUTES,
  type ComputerOp,
  type ReplayOp,
  type SiteRoute,
} from "../protocol/gateway-paths";
import { REQUESTS_LIST_PATH } from "../protocol/request-log";
import { TAKEOVERS_PATH } from "../protocol/takeover";
import { TRAFFIC_CAPTURES_PATH } from "../protocol/traffic";
import { decodeName } from "../service-kit/path-segment";

export type { ComputerOp, ReplayOp } from "../protocol/gateway-paths";

export type Route =
  | {
      kind: "site";
      via: SiteRoute;
      site: string;
      /** path and query for the upstream, starting with `/` */ rest: string;
    }
  | { kind: "computer"; computer: string; op: ComputerOp; rest: string }
  | { kind: "replay"; site: string; op: ReplayOp }
  | { kind: "card" }
  | { kind: "healthz" }
  | { kind: "captures" }
  | { kind: "capture"; name: string }
  | { kind: "request-logs" }
  | { kind: "request-log"; computer: string }
  | { kind: "takeovers" }
  | { kind: "takeover"; computer: string }
  | { kind: "bad"; error: string }
  | { kind: "not-found" };

const SITE_PREFIX = new RegExp(`^\\/(${SITE_ROUTES.join("|")})(?=\\/|%2f|%5c|$|\\?)`, "i");

/**
 * How each computer operation reads the path after its own: DevTools takes the paths under it too and passes the
 * rest on; the site-proxy log takes no rest; ending the connections passes its query (the log's mark) on.
 */
const COMPUTER_ROUTES: Record<ComputerOp, { under: boolean; rest(after: string): string }> = {
  cdp: { under: true, rest: (after) => (after.startsWith("/") ? after : `/${after}`) },
  "proxy-log": { under: false, rest: () => "/" },
  "end-connections": { under: false, rest: (after) => after },
};

/** The computer operation `rest` (the target after `/computers/<computer>`) asks, with the rest it passes on. */
function computerOperation(rest: string): { op: ComputerOp; rest: string } | undefined {
  for (const op of Object.keys(COMPUTER_ROUTES) as ComputerOp[]) {
    const path = COMPUTER_OPERATIONS[op];
    const { under, rest: restOf } = COMPUTER_ROUTES[op];
    if (rest === path || rest.startsWith(`${path}?`) || (under && rest.startsWith(`${path}/`)))
      return { op, rest: restOf(rest.slice(path.length)) };
  }
  return undefined;
}

/** A listing's path (`list`), with or without its trailing slash. */
function isListing(path: string, list: string): boolean {
  return path === list || path === `${list}/`;
}

/** The one name segment after `list/`, decoded; undefined when it holds a slash or a bad escape. */
function nameUnder(path: string, list: string): string | undefined {
  const segment = path.slice(list.length + 1);
  return segment.includes("/") ? undefined : decodeName(segment);
}

/** The segment after `prefix` up to the next `/` or `?`, and what follows it (made to start with `/`). */
function splitSegment(target: string, start: number): { segment: string; rest: string } {
  let end = start;
  while (end < target.length && target[end] !== "/" && target[end] !== "?") end++;
  const after = target.slice(end);
  return { segment: target.slice(start, end), rest: after.startsWith("/") ? after : `/${after}` };
}

export function route(target: string): Route {
  if (!target.startsWith("/")) return { kind: "bad", error: "request-target must be a path (origin form)" };
  const site = SITE_PREFIX.exec(target);
  if (site) {
    const via = site[1] as SiteRoute;
    if (!SITE_ROUTES.includes(via)) return { kind: "not-found" };
    const after = target.slice(site[0].length);
    if (after === "" || after.startsWith("?")) return { kind: "site", via, site: "", rest: "/" };
    if (!after.startsWith("/")) return { kind: "bad", error: "escaped slash in the route prefix" };
    const { segment, rest } = splitSegment(target, site[0].length + 1);
    const name = decodeName(segment);
    if (name === undefined)
      return { kind: "bad", error: "escaped slash or bad escape in the site name of the route prefix" };
    return { kind: "site", via, site: name, rest };
  }
  const query = target.indexOf("?");
  const path = query === -1 ? target : target.slice(0, query);
  if (path === CARD_PATH) return { kind: "card" };
  if (path === GATEWAY_HEALTH_PATH) return { kind: "healthz" };
  if (isListing(path, TRAFFIC_CAPTURES_PATH)) return { kind: "captures" };
  if (path.startsWith(`${TRAFFIC_CAPTURES_PATH}/`)) {
    const name = nameUnder(path, TRAFFIC_CAPTURES_PATH);
    return name === undefined ? { kind: "bad", error: "not a capture file name" } : { kind: "capture", name };
  }
  if (isListing(path, REQUESTS_LIST_PATH)) return { kind: "request-logs" };
  if (path.startsWith(`${REQUESTS_LIST_PATH}/`)) {
    const computer = nameUnder(path, REQUESTS_LIST_PATH);
    return computer === undefined ? { kind: "bad", error: "not a computer name" } : { kind: "request-log", computer };
  }
  if (isListing(path, TAKEOVERS_PATH)) return { kind: "takeovers" };
  if (path.startsWith(`${TAKEOVERS_PATH}/`)) {
    const computer = nameUnder(path, TAKEOVERS_PATH);
    return computer === undefined ? { kind: "bad", error: "not a computer name" } : { kind: "takeover", computer };
  }
  if (path.startsWith(REPLAY_PREFIX)) {
    const { segment, rest } = splitSegment(path, REPLAY_PREFIX.length);
    const site = decodeName(segment);
    if (site === undefined) return { kind: "bad", error: "escaped slash or bad escape in the site name" };
    const op = REPLAY_OPERATIONS.find((operation) => rest === `/${operation}`);
    return op === undefined ? { kind: "not-found" } : { kind: "replay", site, op };
  }
  if (path.startsWith(COMPUTERS_PREFIX)) {
    const { segment, rest } = splitSegment(target, COMPUTERS_PREFIX.length);
    const computer = decodeName(segment);
    if (computer === undefined) return { kind: "bad", error: "escaped slash or bad escape in the computer name" };
    const operation = computerOperation(rest);
    if (operation !== undefined) return { kind: "computer", computer, ...operation };
  }
  return { kind: "not-found" };
}
