// How problems and warnings are named and printed: `multienv:<path>: <message>`, one line each.
import type { Problem } from "./types";

export const CONFIG_NAMESPACE = "multienv";

const PLAIN_KEY = /^[A-Za-z0-9_-]+$/;

/** Joins config path segments the way a user reads them: `websites.github.domains[1]`. */
export function configPath(segments: ReadonlyArray<string | number>): string {
  let out = "";
  for (const segment of segments) {
    if (typeof segment === "number") out += `[${segment}]`;
    else if (PLAIN_KEY.test(segment)) out += out === "" ? segment : `.${segment}`;
    else out += `[${JSON.stringify(segment)}]`;
  }
  return out;
}

export function problem(segments: ReadonlyArray<string | number> | string, message: string): Problem {
  return { path: typeof segments === "string" ? segments : configPath(segments), message };
}

/** One line: `multienv:websites.github.domains[1]: "140.82.112.3" is an address; ...`. */
export function formatProblem(p: Problem): string {
  return p.path === "" ? `${CONFIG_NAMESPACE}: ${p.message}` : `${CONFIG_NAMESPACE}:${p.path}: ${p.message}`;
}

/** Quotes a value for a message. */
export function quote(value: string): string {
  return JSON.stringify(value);
}
