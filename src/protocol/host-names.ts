// Host name syntax, wildcards and the `covers` relation (docs/design.md "Rules").
// Pure string logic, shared by the plan's rules and the services that apply them (the site proxy, the browser).
import { isIP } from "node:net";

const LABEL = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;
/** The longest DNS name (RFC 1035), without the trailing dot. */
const MAX_NAME_LENGTH = 253;

/** True for `*.suffix` patterns. */
export function isWildcard(name: string): boolean {
  return name.startsWith("*.");
}

/**
 * True when `host` is an IP address as a browser or resolver would read it:
 * IPv4, IPv6 (bare or bracketed), and the shorthand IPv4 forms the URL parser
 * accepts (`127.1`, `0x7f.0.0.1`), since a browser would connect to them as addresses.
 */
export function isAddress(host: string): boolean {
  const bare = host.startsWith("[") && host.endsWith("]") ? host.slice(1, -1) : host;
  if (isIP(bare) !== 0) return true;
  if (!/^[0-9a-fA-Fx.]+$/.test(host)) return false;
  try {
    return /^\d+\.\d+\.\d+\.\d+$/.test(new URL(`http://${host}/`).hostname);
  } catch {
    return false;
  }
}

/** `localhost` and every `*.localhost` name: browsers resolve these to loopback themselves, without a proxy. */
export function isLocalhostName(host: string): boolean {
  const name = host.toLowerCase().replace(/\.$/, "");
  return name === "localhost" || name.endsWith(".localhost") || name === "*.localhost";
}

/**
 * Why `name` is not a valid lowercase DNS host name, or undefined when it is.
 * The message says what is wrong in words a user can act on.
 */
export function hostNameProblem(name: string): string | undefined {
  if (name.length === 0) return "is empty; write a host name such as shop.test";
  if (name !== name.toLowerCase()) return `has upper case letters; write "${name.toLowerCase()}"`;
  if (name.endsWith(".")) return `ends with a dot; write "${name.replace(/\.+$/, "")}"`;
  if (name.length > MAX_NAME_LENGTH) return `is longer than ${MAX_NAME_LENGTH} characters`;
  if (name.includes("*")) return "has a * that is not a leading `*.`; a wildcard is written *.suffix";
  if (/[:/?#@\s]/.test(name)) return "is not a host name (write only the name, without scheme, port or path)";
  const labels = name.split(".");
  for (const label of labels) {
    if (label.length === 0) return "has an empty label (two dots in a row, or a leading dot)";
    if (label.length > 63) return `has a label longer than 63 characters ("${label.slice(0, 20)}...")`;
    if (!LABEL.test(label)) return `has the label "${label}"; labels are letters, digits and inner hyphens`;
  }
  if (/^\d+$/.test(labels[labels.length - 1]))
    return "ends in a numeric label; a host name's last label is not a number";
  return undefined;
}

/** Why `pattern` is neither a host name nor a `*.suffix` wildcard, or undefined when it is one of them. */
export function domainPatternProblem(pattern: string): string | undefined {
  if (pattern === "*") return 'is a bare "*"; a wildcard is written *.suffix and covers the names under suffix';
  if (isWildcard(pattern)) {
    const suffixProblem = hostNameProblem(pattern.slice(2));
    return suffixProblem === undefined ? undefined : `is a wildcard whose suffix ${suffixProblem}`;
  }
  return hostNameProblem(pattern);
}

export function isHostName(name: string): boolean {
  return hostNameProblem(name) === undefined;
}

export function isDomainPattern(pattern: string): boolean {
  return domainPatternProblem(pattern) === undefined;
}

/**
 * True when every name `name` stands for is also matched by `pattern`.
 * `*.s` covers every name ending in `.s` at any depth (and any wildcard `*.x.s`), but not `s` itself;
 * an exact name covers only itself. `name` may itself be a wildcard.
 */
export function covers(pattern: string, name: string): boolean {
  if (pattern === name) return true;
  if (!isWildcard(pattern)) return false;
  const suffix = pattern.slice(1); // ".s"
  if (isWildcard(name)) return name.slice(1).endsWith(suffix);
  return name.endsWith(suffix) && name.length > suffix.length;
}

/** True when some name matches both patterns: one of them covers the other. */
export function overlaps(a: string, b: string): boolean {
  return covers(a, b) || covers(b, a);
}

/** Why `name` cannot be a site or computer name (a lowercase DNS label), or undefined. */
export function resourceNameProblem(name: string): string | undefined {
  if (name.length === 0) return "is empty";
  if (name.length > 63 || !LABEL.test(name)) {
    return "must be a lowercase DNS label (a-z, 0-9 and inner hyphens, at most 63 characters), since it becomes container names and URL path segments";
  }
  return undefined;
}
