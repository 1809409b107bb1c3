// The control token on the wire: `Authorization: Bearer <token>`, compared in constant time.
// Shared by the gateway (which checks and strips it), the runner (which sends it) and the
// deploy (which derives each computer's site-proxy token and each capture server's token from it).
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

/**
 * The gateway's own header for the control token: what a runner sends instead of `Authorization: Bearer <token>` when
 * Authorization must carry a site's own credential to the site (`/svc/<site>/...`). The gateway reads it as it reads
 * Authorization and never forwards it.
 */
export const CONTROL_TOKEN_HEADER = "X-Multienv-Token";

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

/** Tokens no site may ever see (the control token, the computers' tokens), prepared once for `withoutTokens`. */
export interface SecretTokens {
  readonly tokens: readonly Buffer[];
  /** The shortest token's length: a form shorter than this carries none. */
  readonly shortest: number;
}

export function secretTokens(tokens: readonly string[]): SecretTokens {
  return {
    tokens: tokens.map((token) => Buffer.from(token, "latin1")),
    shortest: Math.min(...tokens.map((token) => token.length)),
  };
}

/** How many decodings deep a credential is read: `%2520` is two, base64 of a percent-encoded value two as well. */
const DECODING_DEPTH = 3;
const PERCENT_ESCAPE = /%([0-9A-Fa-f]{2})/g;
/** A run of either base64 alphabet (node's decoder reads both, as a site's may). */
const BASE64_RUN = /[A-Za-z0-9+/_-]+/g;

/**
 * Every form a site could decode a credential back into, the credential itself first: quoted-pair escapes undone,
 * percent-decoded, `+` read as a space (form encoding), each base64 run decoded, and those again, DECODING_DEPTH
 * deep. Forms shorter than `shortest` are left out, as they carry no token.
 */
function decodedForms(credential: string, shortest: number): string[] {
  const forms = new Set([credential]);
  const base64Shortest = Math.ceil((shortest * 4) / 3);
  let layer = [credential];
  for (let depth = 0; depth < DECODING_DEPTH && layer.length > 0; depth++) {
    const next: string[] = [];
    const add = (form: string) => {
      if (form.length < shortest || forms.has(form)) return;
      forms.add(form);
      next.push(form);
    };
    for (const form of layer) {
      if (form.includes("\\")) add(form.replace(/\\(.)/g, "$1"));
      if (form.includes("%"))
        add(form.replace(PERCENT_ESCAPE, (_, hex: string) => String.fromCharCode(parseInt(hex, 16))));
      if (form.includes("+")) add(form.replace(/\+/g, " "));
      for (const run of form.match(BASE64_RUN) ?? [])
        if (run.length >= base64Shortest) add(Buffer.from(run, "base64").toString("latin1"));
    }
    layer = next;
  }
  return [...forms];
}

const PLUS = "+".charCodeAt(0);

/**
 * True when a word of one of the credential's forms is a token: the whole word, or its start or end where a `+`
 * stands for the space after or before it (`Bearer+<token>` for a token that itself holds a `+`, which reading `+`
 * as a space would split). Only a word or window of a token's length can be it; each is compared in constant time.
 */
function credentialCarries(credential: string, secrets: SecretTokens): boolean {
  let found = false;
  for (const form of decodedForms(credential, secrets.shortest)) {
    for (const text of form.split(NOT_TOKEN_CHARS)) {
      if (text.length < secrets.shortest) continue;
      const word = Buffer.from(text, "latin1");
      for (const token of secrets.tokens) {
        const n = token.length;
        if (word.length === n) found = timingSafeEqual(word, token) || found;
        else if (word.length > n) {
          if (word[n] === PLUS && timingSafeEqual(word.subarray(0, n), token)) found = true;
          if (word[word.length - n - 1] === PLUS && timingSafeEqual(word.subarray(word.length - n), token))
            found = true;
        }
      }
    }
  }
  return found;
}

/**
 * An Authorization value with every credential that carries one of `secrets` removed, however it is written: any
 * scheme or case, any whitespace, quoted or escaped, inside a comma-separated list, as a Basic user-pass, or
 * encoded in any way a site could decode back (percent-encoded, `+` for a space, base64, and those nested).
 * Undefined when nothing is left (drop the header); the value unchanged when it never carried one (a site's own
 * credentials).
 */
export function withoutTokens(value: string, secrets: SecretTokens): string | undefined {
  const credentials = splitOutsideQuotes(value);
  const kept = credentials.filter((credential) => !credentialCarries(credential, secrets));
  if (kept.length === credentials.length) return value;
  const rest = kept.map((credential) => credential.trim()).filter(Boolean);
  return rest.length === 0 ? undefined : rest.join(", ");
}

/** `withoutTokens` for the control token alone. */
export function withoutControlToken(value: string, controlToken: string): string | undefined {
  return withoutTokens(value, secretTokens([controlToken]));
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

/**
 * A computer's agent token: what an agent's harness is given to open that one computer's DevTools through the gateway
 * (`/computers/<computer>/cdp`), and nothing else there. HMAC-SHA256 keyed with the control token over
 * `"multienv computer agent\n" + computer`, hex: as random as the control token (new with each deploy's), its own
 * prefix keeping it apart from the computer's site-proxy token and every capture server's. The deploy exports it (a
 * secret); the gateway derives it at start, so no process of the env holds it but the gateway.
 */
export function computerAgentToken(controlToken: string, computer: string): string {
  return createHmac("sha256", controlToken).update(`multienv computer agent\n${computer}`, "utf8").digest("hex");
}

/**
 * The token a website container's capture server requires (kubernetes: one beside each website container's
 * tcpdump, serving its captures to the gateway): HMAC-SHA256 keyed with the control token over
 * `"multienv capture server\n" + container` (`<site>-<role>`), hex. Its own prefix keeps it apart from every
 * computer's token, whatever the names. The deploy gives it to that capture server; the gateway derives it to read
 * there. A leaked one opens that container's captures alone.
 */
export function captureServerToken(controlToken: string, container: string): string {
  return createHmac("sha256", controlToken).update(`multienv capture server\n${container}`, "utf8").digest("hex");
}
