// Where a request goes, decided from its request-target exactly as received (never a
// decoded or normalised form), so the rest of the path reaches the upstream byte for byte.
import { REQUESTS_LIST_PATH } from "../protocol/request-log";
import { TAKEOVERS_PATH } from "../protocol/takeover";
import { decodeName } from "../service-kit/path-segment";

export type Route =
  | {
      kind: "site";
      via: "svc" | "website";
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

/** What a replayed site's route does: read this episode's counters, or start the next episode. */
export type ReplayOp = "counters" | "reset";

/** What a computer's route does: DevTools, its site proxy's log, or ending every connection its site proxy holds. */
export type ComputerOp = "cdp" | "proxy-log" | "end-connections";

const SITE_PREFIX = /^\/(svc|website)(?=\/|%2f|%5c|$|\?)/i;

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
    const via = site[1] as "svc" | "website";
    if (via !== "svc" && via !== "website") return { kind: "not-found" };
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
  if (path === "/.well-known/agent-env.json") return { kind: "card" };
  if (path === "/healthz") return { kind: "healthz" };
  if (path === "/traffic/v1/captures" || path === "/traffic/v1/captures/") return { kind: "captures" };
  if (path.startsWith("/traffic/v1/captures/")) {
    const segment = path.slice("/traffic/v1/captures/".length);
    const name = segment.includes("/") ? undefined : decodeName(segment);
    return name === undefined ? { kind: "bad", error: "not a capture file name" } : { kind: "capture", name };
  }
  if (path === REQUESTS_LIST_PATH || path === `${REQUESTS_LIST_PATH}/`) return { kind: "request-logs" };
  if (path.startsWith(`${REQUESTS_LIST_PATH}/`)) {
    const segment = path.slice(REQUESTS_LIST_PATH.length + 1);
    const computer = segment.includes("/") ? undefined : decodeName(segment);
    return computer === undefined ? { kind: "bad", error: "not a computer name" } : { kind: "request-log", computer };
  }
  if (path === TAKEOVERS_PATH || path === `${TAKEOVERS_PATH}/`) return { kind: "takeovers" };
  if (path.startsWith(`${TAKEOVERS_PATH}/`)) {
    const segment = path.slice(TAKEOVERS_PATH.length + 1);
    const computer = segment.includes("/") ? undefined : decodeName(segment);
    return computer === undefined ? { kind: "bad", error: "not a computer name" } : { kind: "takeover", computer };
  }
  if (path.startsWith("/replay/v1/")) {
    const { segment, rest } = splitSegment(path, "/replay/v1/".length);
    const site = decodeName(segment);
    if (site === undefined) return { kind: "bad", error: "escaped slash or bad escape in the site name" };
    if (rest === "/counters" || rest === "/reset") return { kind: "replay", site, op: rest.slice(1) as ReplayOp };
    return { kind: "not-found" };
  }
  if (path.startsWith("/computers/")) {
    const { segment, rest } = splitSegment(target, "/computers/".length);
    const computer = decodeName(segment);
    if (computer === undefined) return { kind: "bad", error: "escaped slash or bad escape in the computer name" };
    if (rest === "/cdp" || rest.startsWith("/cdp/") || rest.startsWith("/cdp?")) {
      const cdpRest = rest.slice("/cdp".length);
      return { kind: "computer", computer, op: "cdp", rest: cdpRest.startsWith("/") ? cdpRest : `/${cdpRest}` };
    }
    if (rest === "/proxy-log" || rest.startsWith("/proxy-log?"))
      return { kind: "computer", computer, op: "proxy-log", rest: "/" };
    if (rest === "/connections/end" || rest.startsWith("/connections/end?"))
      return { kind: "computer", computer, op: "end-connections", rest: rest.slice("/connections/end".length) };
  }
  return { kind: "not-found" };
}
