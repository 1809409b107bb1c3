// Zod issues as messages a user can act on, for every config this project reads: the stack config and each
// service's JSON config. `websites.shop.domians: unknown key; did you mean domains?`
import type { z } from "zod";

type Issue = z.core.$ZodIssue;
type RawIssue = z.core.$ZodRawIssue;

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

function describeExpected(expected: string): string {
  switch (expected) {
    case "array":
      return "a list";
    case "object":
    case "record":
      return "a mapping of keys to values";
    case "string":
      return "a string";
    case "number":
      return "a number";
    case "boolean":
      return "true or false";
    default:
      return expected;
  }
}

function describeInput(input: unknown): string {
  if (input === null) return "null";
  if (Array.isArray(input)) return "a list";
  switch (typeof input) {
    case "string":
      // `key:` with nothing after it in YAML reaches Pulumi's config as "".
      return input === "" ? "an empty value" : `the string ${JSON.stringify(input)}`;
    case "number":
    case "boolean":
      return `${typeof input} ${String(input)}`;
    case "object":
      return "a mapping";
    default:
      return typeof input;
  }
}

/** Per-parse error map: friendly defaults; a message the schema sets itself still wins. */
export function friendlyMessage(issue: RawIssue): string | undefined {
  switch (issue.code) {
    case "invalid_type":
      if (issue.input === undefined) return `is required (${describeExpected(issue.expected)})`;
      if (issue.expected === "int") return `must be a whole number, got ${describeInput(issue.input)}`;
      return `expected ${describeExpected(issue.expected)}, got ${describeInput(issue.input)}`;
    case "invalid_value":
      return `expected one of ${issue.values.map((v) => JSON.stringify(v)).join(", ")}; got ${JSON.stringify(issue.input)}`;
    case "too_small":
      if (issue.origin === "array") return `needs at least ${String(issue.minimum)} item(s)`;
      if (issue.origin === "string") return "must not be empty";
      return `must be at least ${String(issue.minimum)}`;
    case "too_big":
      if (issue.origin === "array") return `holds at most ${String(issue.maximum)} item(s)`;
      return `must be at most ${String(issue.maximum)}`;
    case "invalid_union":
      return `has an unexpected value: ${describeInput(issue.input)}`;
    default:
      return undefined;
  }
}

export function editDistance(a: string, b: string): number {
  const row = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    let previous = row[0];
    row[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const current = row[j];
      row[j] = Math.min(row[j] + 1, row[j - 1] + 1, previous + (a[i - 1] === b[j - 1] ? 0 : 1));
      previous = current;
    }
  }
  return row[b.length];
}

/** Keys the config had once, and what took each one's place: an unknown key's message names it. */
const RENAMED_KEYS: Readonly<Record<string, string>> = {
  keepCookies:
    "keepCredentials, which keeps a recorded site's cookies and its other credentials (Authorization and the like)",
};

/** "did you mean domains?" when a known key is close to the typo. */
export function suggestion(key: string, known: readonly string[]): string {
  // Not Object.hasOwn: the policy pack compiles these modules under its own, older library settings.
  const renamed = Object.prototype.hasOwnProperty.call(RENAMED_KEYS, key) ? RENAMED_KEYS[key] : undefined;
  if (renamed !== undefined && known.includes(renamed.split(",")[0])) return `; it is now ${renamed}`;
  const close = known
    .map((k) => ({ k, d: editDistance(key.toLowerCase(), k.toLowerCase()) }))
    .filter(({ d }) => d <= Math.max(2, Math.floor(key.length / 3)))
    .sort((a, b) => a.d - b.d)[0];
  return close ? `; did you mean ${close.k}?` : `; the keys here are ${known.join(", ")}`;
}

/** One message per issue, and per unknown key (its path then ends with the key). */
export function issueMessages(
  issues: readonly Issue[],
  knownKeysAt: (path: readonly PropertyKey[]) => readonly string[],
): { path: (string | number)[]; message: string }[] {
  const messages: { path: (string | number)[]; message: string }[] = [];
  for (const issue of issues) {
    const path = issue.path.map((p) => (typeof p === "number" ? p : String(p)));
    if (issue.code === "unrecognized_keys") {
      const known = knownKeysAt(issue.path);
      for (const key of issue.keys)
        messages.push({ path: [...path, key], message: `unknown key${suggestion(key, known)}` });
    } else if (issue.code === "invalid_key") {
      // A record's bad key: zod nests the key schema's own message (what a key must be) inside.
      messages.push({ path, message: issue.issues.map((i) => i.message).join("; ") });
    } else {
      messages.push({ path, message: issue.message });
    }
  }
  return messages;
}
