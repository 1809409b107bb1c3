// How problems and warnings are named and printed: `multienv:<path>: <message>`, one line each.
import { configPath } from "../protocol/config-issues";
import type { Problem } from "./types";

export { configPath };

export const CONFIG_NAMESPACE = "multienv";

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
