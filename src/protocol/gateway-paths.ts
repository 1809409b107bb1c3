// The gateway's routes, one rule for both sides of the wire: the gateway client (gateway-client.ts) builds the paths
// it asks with these, and the gateway's route parser (src/gateway/routes.ts) matches a request-target against the
// same prefixes and operations. A route's other contracts keep their paths beside them (CARD_PATH in card.ts,
// TRAFFIC_CAPTURES_PATH in traffic.ts, REQUESTS_LIST_PATH in request-log.ts, TAKEOVERS_PATH in takeover.ts), and are
// used alike by both sides.
import { logMarkQuery, type LogMark } from "./site-proxy";

/** GET: 200 once every site is ready and every capture writing, else 503 with what is missing. No token needed. */
export const GATEWAY_HEALTH_PATH = "/healthz";

/**
 * The first segment of a site's routes: `/svc/<site>/...` reaches its server (the runner's, with the control token);
 * `/website/<site>/...` its pages (the computers', on the browse listener).
 */
export const SITE_ROUTES = ["svc", "website"] as const;
export type SiteRoute = (typeof SITE_ROUTES)[number];

/** The prefix of a computer's routes: `/computers/<computer>` then one of COMPUTER_OPERATIONS. */
export const COMPUTERS_PREFIX = "/computers/";

/**
 * What a computer's route does, by the path that follows `/computers/<computer>`: its DevTools (and its browser
 * launcher's operations under it), its site proxy's log, or ending every connection its site proxy holds.
 */
export const COMPUTER_OPERATIONS = {
  cdp: "/cdp",
  "proxy-log": "/proxy-log",
  "end-connections": "/connections/end",
} as const;
export type ComputerOp = keyof typeof COMPUTER_OPERATIONS;

/** The prefix of a replayed site's routes: `/replay/v1/<site>/` then one of REPLAY_OPERATIONS. */
export const REPLAY_PREFIX = "/replay/v1/";
/** What a replayed site's route does: read this episode's counters, or start the next episode. */
export const REPLAY_OPERATIONS = ["counters", "reset"] as const;
export type ReplayOp = (typeof REPLAY_OPERATIONS)[number];

/** A name as a path segment: what the gateway decodes back to the name (service-kit/path-segment.ts). */
function segment(name: string): string {
  return encodeURIComponent(name);
}

/** The gateway's routes to one site's server (`/svc/<site><path>`) or, with `route` "website", to its pages. */
export function sitePath(site: string, path: string, route: SiteRoute = "svc"): string {
  return `/${route}/${segment(site)}${path}`;
}

/** One of a computer's routes: `/computers/<computer><operation's path><after>`. */
export function computerPath(computer: string, operation: ComputerOp, after = ""): string {
  return `${COMPUTERS_PREFIX}${segment(computer)}${COMPUTER_OPERATIONS[operation]}${after}`;
}

/** A computer's DevTools through the gateway (its browser launcher's operations sit beside it). */
export function cdpPath(computer: string): string {
  return computerPath(computer, "cdp");
}

/** GET: a computer's site-proxy log (JSON lines); Range asks for a part of it. */
export function proxyLogPath(computer: string): string {
  return computerPath(computer, "proxy-log");
}

/** POST: ends every connection a computer's site proxy holds; `logMarkQuery` marks its log. */
export function endConnectionsPath(computer: string, mark?: LogMark): string {
  return computerPath(computer, "end-connections", logMarkQuery(mark));
}

/** A replayed site's replay server's operation through the gateway. */
export function replayPath(site: string, operation: ReplayOp): string {
  return `${REPLAY_PREFIX}${segment(site)}/${operation}`;
}
