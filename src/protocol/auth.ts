// The control token on the wire: `Authorization: Bearer <token>`, compared in constant time.
// Shared by the gateway (which checks and strips it), the runner (which sends it) and the
// deploy (which derives each computer's site-proxy token from it).
import { createHash, createHmac, timingSafeEqual } from "node:crypto";

/** The realm named in the gateway's `WWW-Authenticate` challenge. */
export const CONTROL_REALM = "multienv";
export const WWW_AUTHENTICATE_CHALLENGE = `Bearer realm="${CONTROL_REALM}"`;

/** The fewest characters a control (or derived) token may have. */
export const MIN_TOKEN_LENGTH = 32;
/**
 * The characters a token may hold: RFC 6750's b64token alphabet without `=`. No whitespace,
 * quote, comma or `=`, so a token is always one word wherever a client puts it (see
 * `withoutControlToken`), and always fits in `Bearer <token>` as it is.
 */
const TOKEN_CHARS = /^[A-Za-z0-9\-._~+/]+$/;
/** What separates the words of an Authorization value: every character a token never holds. */
const NOT_TOKEN_CHARS = /[^A-Za-z0-9\-._~+/]+/;
const BASE64_WORD = /^[A-Za-z0-9+/]+$/;

/** The header value a client sends to carry the control token. */
export function bearer(token: string): string {
  return `Bearer ${token}`;
}

/**
 * Why `token` cannot serve as a token (the gateway's control token, a computer's site-proxy token), or undefined
 * when it can: set, at least MIN_TOKEN_LENGTH characters, all of them from the token alphabet (so no blank,
 * whitespace-padded or mostly-whitespace value passes). Worded to follow the variable's name: `X: is not set`.
 */
export function tokenProblem(token: string | undefined): string | undefined {
  if (token === undefined || token === "") return "is not set";
  if (token.trim() === "") return "is blank";
  if (!TOKEN_CHARS.test(token))
    return "holds characters other than letters, digits and - . _ ~ + / (whitespace, quotes, commas or = included)";
  if (token.length < MIN_TOKEN_LENGTH) return `is shorter than ${MIN_TOKEN_LENGTH} characters`;
  return undefined;
}

/**
 * The token of a `Bearer <token>` Authorization value, or undefined when the value is
 * of another scheme. The scheme is case-insensitive (RFC 9110 section 11.1).
 */
export function parseBearer(value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  const match = /^[ \t]*bearer[ \t]+(\S+)[ \t]*$/i.exec(value);
  return match ? match[1] : undefined;
}

function digest(value: string): Buffer {
  return createHash("sha256").update(value, "utf8").digest();
}

/**
 * True when `presented` equals `expected`, in time that does not depend on where they
 * differ: both are hashed first, so the compared buffers always have the same length and
 * even the token's length does not leak.
 */
export function tokensEqual(presented: string, expected: string): boolean {
  return timingSafeEqual(digest(presented), digest(expected));
}

/**
 * True when an Authorization header value is exactly `Bearer <control token>`: what opens the gateway's own operations.
 */
export function carriesControlToken(authorization: string | undefined, controlToken: string): boolean {
  const presented = parseBearer(authorization);
  // Compare even when absent, so a missing header costs what a wrong one does.
  return tokensEqual(presented ?? "", controlToken) && presented !== undefined;
}

/** The comma-separated parts of a header value, commas inside quoted strings kept. */
function splitOutsideQuotes(value: string): string[] {
  const parts: string[] = [];
  let quoted = false;
  let start = 0;
  for (let i = 0; i < value.length; i++) {
    const c = value[i];
    if (quoted && c === "\\") i++;
    else if (c === '"') quoted = !quoted;
    else if (c === "," && !quoted) {
      parts.push(value.slice(start, i));
      start = i + 1;
    }
  }
  parts.push(value.slice(start));
  return parts;
}

/** The words of a credential: quoted-pair escapes undone, then split on every character a token never holds. */
function words(credential: string): string[] {
  return credential.replace(/\\(.)/g, "$1").split(NOT_TOKEN_CHARS).filter(Boolean);
}

/** True when one of the credential's words, or of its Basic user-pass once decoded, is the token. */
function credentialCarries(credential: string, expected: Buffer, length: number): boolean {
  let found = false;
  const check = (word: string) => {
    // Only a word of the token's length can be it; each such word is compared in constant time.
    if (word.length === length && timingSafeEqual(digest(word), expected)) found = true;
  };
  for (const word of words(credential)) {
    check(word);
    // `Basic base64(user:token)` carries it too: any long enough word may be such a pair.
    if (word.length > length && BASE64_WORD.test(word)) {
      for (const inner of Buffer.from(word, "base64").toString("latin1").split(NOT_TOKEN_CHARS)) check(inner);
    }
  }
  return found;
}

/**
 * An Authorization value with every credential that carries `controlToken` removed, however
 * it is written: any scheme or case, any whitespace, quoted or escaped, inside a
 * comma-separated list, or as a Basic user-pass. Undefined when nothing is left (drop the
 * header); the value unchanged when it never carried the token (a site's own credentials).
 */
export function withoutControlToken(value: string, controlToken: string): string | undefined {
  const expected = digest(controlToken);
  const credentials = splitOutsideQuotes(value);
  const kept = credentials.filter((credential) => !credentialCarries(credential, expected, controlToken.length));
  if (kept.length === credentials.length) return value;
  const rest = kept.map((credential) => credential.trim()).filter(Boolean);
  return rest.length === 0 ? undefined : rest.join(", ");
}

/**
 * The token a computer's site proxy requires on its control listener: HMAC-SHA256 keyed with
 * the control token over `"multienv computer control\n" + computer`, hex. The deploy gives
 * it to that proxy; the gateway sends it there. A leaked proxy token opens that one
 * computer, never the gateway or another computer.
 */
export function computerControlToken(controlToken: string, computer: string): string {
  return createHmac("sha256", controlToken).update(`multienv computer control\n${computer}`, "utf8").digest("hex");
}
