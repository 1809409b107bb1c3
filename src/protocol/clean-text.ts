// Telling at about the speed of one decode that a long text carries no token in any form the reading for tokens
// (auth.ts, decodedFormsVerdict) would read through: a megabyte of an image's base64, or of a page's text, that the
// gateway's scrub would otherwise spend hundreds of milliseconds on.
import type { SecretTokens } from "./auth";
import { countTokenReadingWork, IS_TOKEN_CHAR, NOT_BASE64, PLUS, TOKEN_CHARS } from "./token-reading";

/**
 * True when `text`, and each of `pieces` (the ranges of it [start, end) a caller reads on their own), provably has no
 * token in any form `decodedFormsVerdict` reads, told at about the speed of decoding the text once rather than of that
 * reading (a megabyte of an image's base64, or of a page's text, took the gateway's scrub some 350 ms read through).
 * No answer but true skips a reading: false says only that this cannot tell, and the caller reads the text through.
 *
 * It holds for texts without `\` or `%` (whose escapes decodedFormsVerdict decodes to texts of their own, not read
 * here), and reads what decodedFormsVerdict would of the text and of each piece: the text and its `+`-as-space form (no
 * token in the text, and a token holds no space), and the base64 decodings from each starting character of its base64
 * characters, with and without its `+`s, and its hex decodings. A piece's decodings are ranges of the text's (its
 * base64 characters are a range of the text's, and a decoder that starts where the piece does makes the same bytes as
 * one that started in step before it), so each is told from the text's decodings by its place in them. True only when
 * no decoding holds a run of token characters a token could be, and the decodings of the text and of each piece that
 * are `shortest` long are not text (isText, which decodedFormsVerdict would decode further): then every form of each
 * is read through with nothing found.
 */
export function provablyCleanText(
  text: string,
  secrets: SecretTokens,
  pieces: readonly (readonly [number, number])[],
): boolean {
  if (text.includes("\\") || text.includes("%") || !ofTokenCharacters(secrets)) return false;
  for (const tokens of secrets.byLength.values()) for (const token of tokens) if (text.includes(token)) return false;
  const { shortest } = secrets;
  // Counted as decodedFormsVerdict counts: the text passed over three times (looked at for a token, mapped, filtered),
  // and each decoding twice (made, and read).
  countTokenReadingWork(3 * text.length);
  // Where each character of the text stands among its base64 characters, those without `+`, and its hex digits; and
  // the hex digits' values.
  const n = text.length;
  const inBase64 = scratchInts(0, n + 1);
  const inWithoutPlus = scratchInts(1, n + 1);
  const inHex = scratchInts(2, n + 1);
  const nibbles = scratchBytes(0, n);
  inBase64[0] = inWithoutPlus[0] = inHex[0] = 0;
  let hexDigits = 0;
  for (let i = 0; i < n; i++) {
    const code = text.charCodeAt(i);
    const base64 = code < 128 ? IS_BASE64_CHAR[code] : 0;
    inBase64[i + 1] = inBase64[i] + base64;
    inWithoutPlus[i + 1] = inWithoutPlus[i] + (code === PLUS ? 0 : base64);
    const nibble = code < 128 ? HEX_VALUE[code] : NOT_A_NIBBLE;
    if (nibble !== NOT_A_NIBBLE) nibbles[hexDigits++] = nibble;
    inHex[i + 1] = hexDigits;
  }
  const base64 = text.replace(NOT_BASE64, "");
  const withoutPlus = base64.includes("+") ? base64.replace(/\+/g, "") : undefined;
  const others = scratchInts(3, n + 1);
  const decoded = scratchBytes(1, n + 3);
  /** Whether the decodings in step with `decoded`'s first `length` bytes, the text's and each piece's, are clean. */
  const clean = (length: number, at: Int32Array, group: 4 | 2, start: number): boolean => {
    countTokenReadingWork(2 * length);
    if (holdsTokenRun(decoded, length, shortest)) return false;
    let other = 0;
    others[0] = 0;
    for (let i = 0; i < length; i++) others[i + 1] = other += OTHER_BYTE[decoded[i]];
    const step = group === 4 ? 3 : 1;
    /** Whether the decoding of the characters [from, to) that starts in step with this one is text. */
    const isTextAt = (from: number, to: number): boolean => {
      const begin = at[from] + ((start - (at[from] % group) + group) % group);
      const chars = at[to] - begin;
      const bytes = group === 4 ? base64Bytes(chars) : chars >> 1;
      const first = ((begin - start) / group) * step;
      return bytes >= shortest && 4 * (others[first + bytes] - others[first]) <= bytes;
    };
    if (isTextAt(0, n)) return false;
    for (let i = 0; i < pieces.length; i++) if (isTextAt(pieces[i][0], pieces[i][1])) return false;
    return true;
  };
  for (const [form, at] of withoutPlus === undefined
    ? [[base64, inBase64] as const]
    : [[base64, inBase64] as const, [withoutPlus, inWithoutPlus] as const])
    for (let start = 0; start < 4; start++)
      if (!clean(decoded.write(form.slice(start), 0, "base64"), at, 4, start)) return false;
  for (let start = 0; start < 2; start++) {
    const length = (hexDigits - start) >> 1;
    for (let i = 0; i < length; i++) decoded[i] = (nibbles[start + 2 * i] << 4) | nibbles[start + 2 * i + 1];
    if (!clean(length, inHex, 2, start)) return false;
  }
  return true;
}

/**
 * Whether every token is of token characters alone, so a decoding that holds one holds a run of them (what
 * provablyCleanText looks for); told once for each SecretTokens.
 */
function ofTokenCharacters(secrets: SecretTokens): boolean {
  let known = tokenCharactersOnly.get(secrets);
  if (known === undefined) {
    known = [...secrets.byLength.values()].every((tokens) => [...tokens].every((token) => TOKEN_CHARS.test(token)));
    tokenCharactersOnly.set(secrets, known);
  }
  return known;
}
const tokenCharactersOnly = new WeakMap<SecretTokens, boolean>();

/** The bytes a base64 decoder makes of `chars` characters (a last group of 2 or 3 makes 1 or 2). */
function base64Bytes(chars: number): number {
  const rest = chars & 3;
  return (chars >> 2) * 3 + (rest >= 2 ? rest - 1 : 0);
}

const IS_BASE64_CHAR = Uint8Array.from({ length: 128 }, (_, code) =>
  /[A-Za-z0-9+/_-]/.test(String.fromCharCode(code)) ? 1 : 0,
);
const NOT_A_NIBBLE = 16;
const HEX_VALUE = Uint8Array.from({ length: 128 }, (_, code) => {
  const value = parseInt(String.fromCharCode(code), 16);
  return Number.isNaN(value) ? NOT_A_NIBBLE : value;
});
/** 1 for the bytes isText counts as other than text. */
const OTHER_BYTE = Uint8Array.from({ length: 256 }, (_, byte) =>
  (byte < 0x20 && byte !== 0x09) || byte > 0x7e ? 1 : 0,
);

/**
 * Whether the first `length` of `bytes` hold a run of `shortest` token characters: one would hold a byte at a multiple
 * of `shortest` (less one), so only the runs through those are measured.
 */
function holdsTokenRun(bytes: Uint8Array, length: number, shortest: number): boolean {
  for (let probe = shortest - 1; probe < length; probe += shortest) {
    if (IS_TOKEN_CHAR[bytes[probe]] === 0) continue;
    let from = probe;
    while (from > 0 && IS_TOKEN_CHAR[bytes[from - 1]] === 1) from--;
    let to = probe + 1;
    while (to < length && IS_TOKEN_CHAR[bytes[to]] === 1) to++;
    if (to - from >= shortest) return true;
  }
  return false;
}

/**
 * Arrays provablyCleanText reuses from call to call (it runs through without yielding, so one call at a time holds
 * them), up to SCRATCH_KEPT entries each: a log's texts are mostly alike in size, and a fresh array of megabytes costs
 * more to map than to fill.
 */
const SCRATCH_KEPT = 1 << 24;
const heldInts: Int32Array[] = [];
const heldBytes: Buffer[] = [];
function scratchInts(slot: number, length: number): Int32Array {
  const held = heldInts[slot];
  if (held !== undefined && held.length >= length) return held;
  const made = new Int32Array(length);
  if (length <= SCRATCH_KEPT) heldInts[slot] = made;
  return made;
}
function scratchBytes(slot: number, length: number): Buffer {
  const held = heldBytes[slot];
  if (held !== undefined && held.length >= length) return held;
  const made = Buffer.allocUnsafeSlow(length);
  if (length <= SCRATCH_KEPT) heldBytes[slot] = made;
  return made;
}
