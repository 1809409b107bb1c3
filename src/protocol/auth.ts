// The control token on the wire: `Authorization: Bearer <token>`, compared in constant time.
// Shared by the gateway (which checks and strips it), the runner (which sends it) and the
// deploy (which derives each computer's site-proxy token and each capture server's token from it).
import { createHash, createHmac, timingSafeEqual } from "node:crypto";
import {
  countTokenReadingWork,
  IS_TOKEN_CHAR,
  NOT_BASE64,
  NOT_HEX,
  PLUS,
  TOKEN_CHAR,
  TOKEN_CHARS,
} from "./token-reading";

/** The realm named in the gateway's `WWW-Authenticate` challenge. */
export const CONTROL_REALM = "multienv";
export const WWW_AUTHENTICATE_CHALLENGE = `Bearer realm="${CONTROL_REALM}"`;

/** The fewest characters a control (or derived) token may have. */
export const MIN_TOKEN_LENGTH = 32;
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
export function splitOutsideQuotes(value: string): string[] {
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
  /** The tokens by length: a word is looked up among those of its length (and its `+`-bounded ends likewise). */
  readonly byLength: ReadonlyMap<number, ReadonlySet<string>>;
  /** The shortest token's length: a form shorter than this carries none. */
  readonly shortest: number;
  /** A word (run of token characters) long enough to be a token: what is looked up. */
  readonly longWord: RegExp;
}

export function secretTokens(tokens: readonly string[]): SecretTokens {
  const shortest = Math.min(...tokens.map((token) => token.length));
  const byLength = new Map<number, Set<string>>();
  for (const token of tokens) {
    const same = byLength.get(token.length) ?? new Set<string>();
    byLength.set(token.length, same.add(token));
  }
  return { byLength, shortest, longWord: new RegExp(`${TOKEN_CHAR}{${shortest},}`, "g") };
}

/**
 * The work a credential may cost, in characters read and written while decoding it, per character of the header value
 * (and a floor for short ones). A value that would take more to read through is removed as if it carried a token: so
 * a client spends the gateway's CPU no faster than its own bytes, however the value nests its encodings
 * (test/gateway/token-cost.test.ts compares a crafted value's CPU with a plain one's).
 */
export const DECODING_BUDGET_PER_CHAR = 40;
const DECODING_BUDGET_FLOOR = 64 * 1024;
/**
 * `form` with each `%XX` (and `%uXXXX`) decoded and any other `%` left as it is, as a lenient URL decoder does: the
 * engine's own `unescape`, which costs a fraction of a replace with a callback per escape.
 */
function percentDecoded(form: string): string {
  return unescape(form);
}

/** A character of text as textRuns counts it: printable ASCII or a tab. */
function isTextCode(code: number): boolean {
  return (code >= 0x20 && code <= 0x7e) || code === 0x09;
}

/**
 * Undefined when `form` is text: what a site could take for another encoding to decode again (at least 3/4 printable
 * ASCII). Else its runs of at least `min` text characters: a decoding that is not text (what a base64 or hex decoder
 * makes of characters at the wrong alignment, or of text that was never encoded) is looked at for a token, and only
 * those runs of it are decoded further (what one word of a value decodes to, among the junk its other words make).
 */
function textRuns(form: string, min: number): string[] | undefined {
  // Counted in a loop that stops at the first quarter of other characters: most decodings are binary and stop early.
  const allowed = form.length / 4;
  let other = 0;
  let i = 0;
  for (; i < form.length; i++) if (!isTextCode(form.charCodeAt(i)) && ++other > allowed) break;
  if (i === form.length) return undefined;
  // A run of `min` holds the character `min - 1` after its start: where that one is not text, no run starts before
  // it, so most of a binary form is stepped over `min` characters at a time.
  const runs: string[] = [];
  for (let start = 0; start + min <= form.length;) {
    const last = start + min - 1;
    let at = last;
    while (at >= start && isTextCode(form.charCodeAt(at))) at--;
    if (at >= start) {
      start = at + 1;
      continue;
    }
    let end = last + 1;
    while (end < form.length && isTextCode(form.charCodeAt(end))) end++;
    runs.push(form.slice(start, end));
    start = end + 1;
  }
  return runs;
}

/** What reading a text's decoded forms found: no token, a token, or neither within the budget. */
export type FormsVerdict = "clean" | "carries" | "undecided";

/** The work `decodedFormsVerdict` may spend on a text of `chars` characters. */
export function decodingBudget(chars: number): number {
  return DECODING_BUDGET_FLOOR + DECODING_BUDGET_PER_CHAR * chars;
}

/**
 * Whether `credential`, or a form a site could decode it back into, has a token in it (`carries` says which form
 * does): quoted-pair escapes undone, percent-decoded (`+` read as a space or not), base64 of either alphabet and hex
 * read as a lenient decoder reads them (every other character skipped, from any starting character), and each of
 * those that is text again, as deep as forms stay at least `shortest` long. "undecided" when the work would pass
 * `budget` characters before either is known.
 */
export function decodedFormsVerdict(
  credential: string,
  shortest: number,
  budget: number,
  carries: (form: string) => boolean,
): FormsVerdict {
  const seen = new Set([credential]);
  const queue = [credential];
  // Work is counted in characters passed over: making a form, hashing it (seen), and for a new one looking for a
  // token in it and telling whether it is text; then filtering each queued form for base64 and hex.
  let spent = 0;
  let found = carries(credential);
  /** Looks at a decoded form; true to stop (a token found, or the budget spent). */
  const add = (form: string): boolean => {
    spent += 2 * form.length;
    if (form.length >= shortest && !seen.has(form)) {
      seen.add(form);
      found = carries(form);
      spent += 2 * form.length;
      if (!found) {
        // A form that is not text may still hold text where one word of the value decoded (its base64 is read across
        // the value's spaces, the other words making junk around it): those runs are read on as forms of their own.
        const runs = textRuns(form, shortest);
        if (runs === undefined) queue.push(form);
        else for (const run of runs) if (add(run)) return true;
      }
    }
    return found || spent > budget;
  };
  const verdict = (): FormsVerdict => (found ? "carries" : spent > budget ? "undecided" : "clean");
  try {
    return readForms();
  } finally {
    countTokenReadingWork(spent);
  }
  function readForms(): FormsVerdict {
    for (let next = 0; next < queue.length && !found; next++) {
      const form = queue[next];
      spent += 3 * form.length;
      /** A text decoding of `form`, which passes over it `passes` times more (form decoding: `+`, then escapes). */
      const decoded = (passes: number, decode: () => string): boolean => {
        spent += passes * form.length;
        return add(decode());
      };
      if (form.includes("\\") && decoded(1, () => form.replace(/\\(.)/g, "$1"))) return verdict();
      if (form.includes("%") && decoded(1, () => percentDecoded(form))) return verdict();
      if (form.includes("+") && decoded(2, () => percentDecoded(form.replace(/\+/g, " ")))) return verdict();
      // A token of `shortest` characters takes ceil(shortest * 4 / 3) base64 characters, 2 * shortest hex digits. A
      // decoder may start at any character: each of the 4 (base64) or 2 (hex) alignments is a form of its own.
      const base64 = form.replace(NOT_BASE64, "");
      if (base64.length >= Math.ceil((shortest * 4) / 3))
        for (let start = 0; start < 4; start++)
          if (add(Buffer.from(base64.slice(start), "base64").toString("latin1"))) return verdict();
      const hex = base64.replace(NOT_HEX, "");
      if (hex.length >= 2 * shortest)
        for (let start = 0; start < 2; start++)
          if (add(Buffer.from(hex.slice(start), "hex").toString("latin1"))) return verdict();
    }
    // Every form was read: what was found is the answer, whatever it cost.
    return found ? "carries" : "clean";
  }
}

/** True when `decodedFormsVerdict` finds a token, or cannot tell within `budget`: then taken as carrying one. */
function anyDecodedForm(
  credential: string,
  shortest: number,
  budget: number,
  carries: (form: string) => boolean,
): boolean {
  return decodedFormsVerdict(credential, shortest, budget, carries) !== "clean";
}

/**
 * True when a word of `form` is a token: the whole word, or its start or end where a `+` stands for the space after
 * or before it (`Bearer+<token>` for a token that itself holds a `+`, which reading `+` as a space would split). A
 * word is looked up by hash among the tokens of its length, so the work per word does not grow with the number of
 * tokens; a lookup compares characters only once a whole 32-bit hash matches, so it tells a guess nothing of a
 * token's characters. (The gateway's own checks, carriesControlToken, compare digests in constant time.)
 */
export function formCarries(form: string, secrets: SecretTokens): boolean {
  // A loop over the character codes rather than a regular expression's matches: a base64 body is one word of a million
  // characters, which the engine's matchAll went through at about 130 ns a character, this at about 1.
  const { shortest } = secrets;
  let start = -1;
  for (let i = 0; i <= form.length; i++) {
    const code = i < form.length ? form.charCodeAt(i) : 0;
    if (code < 256 && IS_TOKEN_CHAR[code] === 1) {
      if (start === -1) start = i;
      continue;
    }
    if (start !== -1 && i - start >= shortest && wordCarries(form.slice(start, i), secrets)) return true;
    start = -1;
  }
  return false;
}

/** Whether `word` (a run of token characters) is a token, or starts or ends with one bounded by a `+`. */
function wordCarries(word: string, secrets: SecretTokens): boolean {
  for (const [n, tokens] of secrets.byLength) {
    if (word.length === n) {
      if (tokens.has(word)) return true;
    } else if (word.length > n) {
      if (word.charCodeAt(n) === PLUS && tokens.has(word.slice(0, n))) return true;
      if (word.charCodeAt(word.length - n - 1) === PLUS && tokens.has(word.slice(word.length - n))) return true;
    }
  }
  return false;
}

/** True when `text` decodes (anyDecodedForm) to a form with a token in it, or costs too much to read through. */
function carries(text: string, secrets: SecretTokens, budget: number): boolean {
  if (text.length >= BINARY_BASE64_MIN_CHARS && isBinaryBase64(text, secrets)) {
    countTokenReadingWork(3 * text.length);
    return false;
  }
  return anyDecodedForm(text, secrets.shortest, budget, (form) => formCarries(form, secrets));
}

/** Base64 texts at least this long are first looked at for what they are (isBinaryBase64): most are bodies. */
const BINARY_BASE64_MIN_CHARS = 1024;
const BASE64_TEXT = /^[A-Za-z0-9+/]*={0,2}$/;

/**
 * Whether bytes hold a run of text characters (as textRuns counts them) of `shortest` or more, which holds any word a
 * token could be, or are text: what decodes further.
 */
function bytesMayCarry(bytes: Uint8Array, shortest: number): boolean {
  let run = 0;
  let other = 0;
  for (let i = 0; i < bytes.length; i++) {
    const byte = bytes[i];
    if ((byte >= 0x20 && byte <= 0x7e) || byte === 0x09) run++;
    else if (run >= shortest) return true;
    else {
      run = 0;
      other++;
    }
  }
  return run >= shortest || other * 4 <= bytes.length;
}

/**
 * True when `text` is base64 of binary bytes that carries no token in any form anyDecodedForm reads, told at about
 * the speed of a decode rather than of that reading (a megabyte of an image's base64 took some 400 ms read through).
 * It reads what anyDecodedForm would: the text (and its `+`-as-space form, whose words are runs of the text), its
 * base64 decodings from each starting character with and without its `+`s, and its hex decodings; and says true only
 * when no token stands in the text and no decoding holds a run of token characters a token could be, or is text that
 * would be decoded further. Anything else is left to anyDecodedForm, whose answer is then the one given.
 */
function isBinaryBase64(text: string, secrets: SecretTokens): boolean {
  if (!BASE64_TEXT.test(text)) return false;
  for (const tokens of secrets.byLength.values()) for (const token of tokens) if (text.includes(token)) return false;
  const { shortest } = secrets;
  const unpadded = text.replace(/=+$/, "");
  const withoutPlus = unpadded.includes("+") ? unpadded.replace(/\+/g, "") : undefined;
  for (const base64 of withoutPlus === undefined ? [unpadded] : [unpadded, withoutPlus])
    for (let start = 0; start < 4; start++)
      if (bytesMayCarry(Buffer.from(base64.slice(start), "base64"), shortest)) return false;
  const hex = unpadded.replace(NOT_HEX, "");
  for (let start = 0; start < 2 && hex.length >= 2 * shortest; start++)
    if (bytesMayCarry(Buffer.from(hex.slice(start), "hex"), shortest)) return false;
  return true;
}

/**
 * An Authorization value with every credential that carries one of `secrets` removed, however it is written: any
 * scheme or case, any whitespace, quoted or escaped, inside a comma-separated list, as a Basic user-pass, or
 * encoded in any way a site could decode back (percent-encoded, `+` for a space, base64 or hex read by a lenient
 * decoder that skips what it does not know, and those nested). Undefined when nothing is left (drop the header); the
 * value unchanged when it never carried one (a site's own credentials). A token that only the whole value decodes
 * to (split across its commas) takes the whole value with it. The work is linear in the value's length: a value
 * that would cost more than DECODING_BUDGET_PER_CHAR per character to read through is removed whole.
 */
export function withoutTokens(value: string, secrets: SecretTokens): string | undefined {
  const budget = decodingBudget(value.length);
  return withoutCarryingCredentials(value, (text) => (carries(text, secrets, budget) ? "carries" : "clean"));
}

/** What reading a text for tokens found: none, one, or that the text must not be sent on at all. */
export type CredentialVerdict = "clean" | "carries" | "refused";

/**
 * The one rule for taking the credentials that carry a token out of a header value, given how a text is read: the
 * value whole when it carries none; else each of its comma-separated credentials read on its own and those that carry
 * none kept. Nothing is kept when any reading refuses, when the value is one credential, or when every credential is
 * clean on its own (the token was split across them); what is kept is read once more as a whole, so a token split
 * across the credentials kept is not sent on either.
 */
export function withoutCarryingCredentials(
  value: string,
  read: (text: string) => CredentialVerdict,
): string | undefined {
  const whole = read(value);
  if (whole !== "carries") return whole === "clean" ? value : undefined;
  const credentials = splitOutsideQuotes(value);
  if (credentials.length === 1) return undefined;
  const kept: string[] = [];
  for (const credential of credentials) {
    const verdict = read(credential);
    if (verdict === "refused") return undefined;
    if (verdict === "clean") kept.push(credential);
  }
  if (kept.length === credentials.length) return undefined;
  const rest = kept.map((credential) => credential.trim()).filter(Boolean);
  if (rest.length === 0) return undefined;
  const joined = rest.join(", ");
  return read(joined) === "clean" ? joined : undefined;
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

/**
 * The token a replayed site's replay server requires on its control listener (counters, reset): HMAC-SHA256 keyed
 * with the control token over `"multienv replay server\n" + site`, hex. Its own prefix keeps it apart from every
 * other derived token. The deploy gives it to that replay server; the gateway derives it to forward the runner's
 * `/replay/v1/<site>/...` there. A leaked one opens that site's counters and reset alone.
 */
export function replayServerToken(controlToken: string, site: string): string {
  return createHmac("sha256", controlToken).update(`multienv replay server\n${site}`, "utf8").digest("hex");
}
