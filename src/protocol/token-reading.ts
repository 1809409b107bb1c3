// What every reading of a text for tokens shares (auth.ts's decodedFormsVerdict and withoutTokens, clean-text.ts's
// provablyCleanText): the token alphabet, the characters lenient decoders skip, and the count of the work spent
// reading, which both count alike against one budget.

/**
 * The characters a token may hold: RFC 6750's b64token alphabet without `=`. No whitespace,
 * quote, comma or `=`, so a token is always one word wherever a client puts it (see
 * `withoutControlToken`), and always fits in `Bearer <token>` as it is.
 */
export const TOKEN_CHARS = /^[A-Za-z0-9\-._~+/]+$/;
/** A character a token may hold; every other one separates the words of an Authorization value. */
export const TOKEN_CHAR = "[A-Za-z0-9\\-._~+/]";
/** 1 for the codes of TOKEN_CHAR, by code (256 of them, so a byte never reads past its end). */
export const IS_TOKEN_CHAR = Uint8Array.from({ length: 256 }, (_, code) =>
  new RegExp(`^${TOKEN_CHAR}$`).test(String.fromCharCode(code)) ? 1 : 0,
);
export const PLUS = "+".charCodeAt(0);

/** Every character a lenient base64 decoder skips (node's and Python's skip whatever is not of either alphabet). */
export const NOT_BASE64 = /[^A-Za-z0-9+/_-]+/g;
/** Every character a lenient hex decoder skips. */
export const NOT_HEX = /[^0-9A-Fa-f]+/g;

/**
 * The characters decodedFormsVerdict has passed over in this process, as it counts them against its budget (and
 * provablyCleanText, counted alike).
 */
let workCounted = 0;

/** Adds `chars` characters passed over to the work counted. */
export function countTokenReadingWork(chars: number): void {
  workCounted += chars;
}

/**
 * The work spent so far reading values for tokens (withoutTokens), in characters, as counted against the budget: what a
 * test reads before and after a call to tell what the call cost, whatever else loads the machine.
 */
export function tokenReadingWork(): number {
  return workCounted;
}
