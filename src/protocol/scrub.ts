// What of an exchange may go in the request log: every text the log keeps (a header's value, a cookie's, a query
// value, the URL, a body) is read through the forms the rule that keeps tokens from sites recognises
// (`decodedFormsVerdict`: escapes, percent-encoding, base64 and hex read leniently, nested), so no token reaches the
// log in any of them; and the values of the headers and cookies the config names are never kept. The scrub removes
// what carries a token and nothing more: a part that cannot be read through within the budget (the work bounded by
// the text's length) is kept as its size and SHA-256 (`undecidedMark`), never taken for a token's REDACTED, and the
// rest of the text is kept. A binary body's bytes are searched for the tokens' own bytes and common encodings before
// it is written in base64 (`binary`).
import { createHash } from "node:crypto";
import { decodedFormsVerdict, decodingBudget, type FormsVerdict, type SecretTokens } from "./auth";
import { provablyCleanText } from "./clean-text";

/** A run of the characters of a token's encodings: base64 of either alphabet with its padding, hex, percent-escapes. */
const ENCODED_PIECE = /[A-Za-z0-9+/=_%.~\\-]+/g;
/** The same without `/`: the segments of a path. */
const PATH_PIECE = /[A-Za-z0-9+=_%.~\\-]+/g;
/** A text that is base64 as a whole, as the log writes a binary body: its bytes are scrubbed as bytes. */
const WHOLE_BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;

/** What stands for a value the log does not keep. */
export const REDACTED = "[redacted]";
const REDACTED_BYTES = Buffer.from(REDACTED);

/**
 * What stands for a text, or a part of one, the scrub could not read through within its budget: its size and SHA-256
 * (of its UTF-8), so it can still be matched with the same bytes elsewhere, and never read as a token's REDACTED.
 */
export function undecidedMark(text: string): string {
  const bytes = Buffer.from(text, "utf8");
  return `[undecided: ${bytes.length} bytes, sha256 ${createHash("sha256").update(bytes).digest("hex")}]`;
}

/** An `undecidedMark`. */
const UNDECIDED_MARK = /\[undecided: \d+ bytes, sha256 [0-9a-f]{64}\]/g;

/**
 * Texts at least this long are first looked at for whether they provably carry no token (provablyCleanText): the
 * scrub of most of a log's bytes. Shorter ones are read through (and remembered), which costs them little.
 */
const PROVEN_CLEAN_MIN_CHARS = 256;

/** Texts up to this long are remembered with what the log keeps of them, at most CACHED_TEXTS of them at a time. */
const CACHED_TEXT_CHARS = 1024;
const CACHED_TEXTS = 2048;

/**
 * How far a text that carries a token as a whole (or cannot be read through) is cut in two to find the parts that do:
 * at most 2^NARROW_DEPTH parts, none shorter than NARROW_MIN_CHARS. Each level costs about one reading of the whole.
 */
const NARROW_DEPTH = 4;
const NARROW_MIN_CHARS = 256;

/** A text as the log keeps it, and whether a part of it is an `undecidedMark`. */
interface Scrubbed {
  text: string;
  undecided: boolean;
}

/**
 * The forms of a token the log's bytes are searched for (a binary body's, before base64): the token, its hex (either
 * case), its base64 of either alphabet at each of the three alignments it can start at in a longer base64 text (the
 * characters that hold its bits alone), its percent-encoding (as encodeURIComponent writes it, and every byte
 * escaped in either case), and UTF-16 of either byte order.
 */
function tokenNeedles(token: string): Buffer[] {
  const bytes = Buffer.from(token, "utf8");
  const forms = new Set<string>([token, bytes.toString("hex"), bytes.toString("hex").toUpperCase()]);
  for (let shift = 0; shift < 3; shift++) {
    const base64 = Buffer.concat([Buffer.alloc(shift), bytes]).toString("base64");
    const own = base64.slice(Math.ceil((8 * shift) / 6), Math.floor((8 * (shift + bytes.length)) / 6));
    forms.add(own);
    forms.add(own.replace(/\+/g, "-").replace(/\//g, "_"));
  }
  forms.add(encodeURIComponent(token));
  const escaped = [...bytes].map((b) => `%${b.toString(16).padStart(2, "0")}`).join("");
  forms.add(escaped);
  forms.add(escaped.toUpperCase());
  const needles = [...forms].map((form) => Buffer.from(form, "latin1"));
  const utf16 = Buffer.from(token, "utf16le");
  needles.push(utf16, Buffer.from(utf16).swap16());
  return needles;
}

export class Scrubber {
  private readonly redacted: ReadonlySet<string>;
  private readonly cache = new Map<string, Scrubbed>();
  /** ENCODED_PIECE and PATH_PIECE for the runs long enough to carry a token: a shorter one is kept as it is. */
  private readonly longPieces: readonly RegExp[];
  private readonly tokens: readonly string[];
  private readonly needles: readonly Buffer[];
  /**
   * How many texts so far the scrub kept (in part) as an `undecidedMark`: a caller that compares it before and after
   * its texts knows whether any of them was.
   */
  undecidedTexts = 0;

  constructor(
    private readonly secrets: SecretTokens | undefined,
    redact: readonly string[],
  ) {
    this.redacted = new Set(redact.map((name) => name.toLowerCase()));
    const atLeast = `{${secrets?.shortest ?? 1},}`;
    this.longPieces = [ENCODED_PIECE, PATH_PIECE].map((piece) => new RegExp(piece.source.slice(0, -1) + atLeast, "g"));
    this.tokens = secrets ? [...secrets.byLength.values()].flatMap((same) => [...same]) : [];
    this.needles = this.tokens.flatMap(tokenNeedles);
  }

  /**
   * `text` as the log may keep it: each piece of it that carries a token in any form replaced by REDACTED; when the
   * rest still does as a whole (a token split across pieces), the parts of it that do; and a part that cannot be read
   * through within the budget as its `undecidedMark`. A piece is a run of the characters an encoding of a token is
   * made of: a token nested in encodings (hex in base64, say) is found in its piece, where the text around it would
   * hide it from a reading of the whole (which decodes a form further only when all of it decodes to text).
   */
  text(text: string): string {
    const secrets = this.secrets;
    if (secrets === undefined || text.length < secrets.shortest) return text;
    let kept: Scrubbed | undefined;
    if (text.length > CACHED_TEXT_CHARS) kept = this.scrubbed(text, false);
    else {
      // A browser sends the same header values (User-Agent, Accept, client hints, cookies) on every request.
      kept = this.cache.get(text);
      if (kept === undefined) {
        if (this.cache.size >= CACHED_TEXTS) this.cache.clear();
        this.cache.set(text, (kept = this.scrubbed(text, false)));
      }
    }
    if (kept.undecided) this.undecidedTexts++;
    return kept.text;
  }

  /** Binary bytes as the log keeps them, in base64: the tokens' forms cut out of the bytes, then scrubbed as text. */
  binary(bytes: Buffer): string {
    const base64 = this.bytes(bytes).toString("base64");
    if (this.secrets === undefined || base64.length < this.secrets.shortest) return base64;
    const kept = this.scrubbed(base64, true);
    if (kept.undecided) this.undecidedTexts++;
    return kept.text;
  }

  /** `bytes` with each of the tokens' forms (tokenNeedles) replaced by REDACTED; the same buffer when none is in it. */
  bytes(bytes: Buffer): Buffer {
    let out = bytes;
    for (const needle of this.needles) {
      let at = out.indexOf(needle);
      if (at === -1) continue;
      const parts: Buffer[] = [];
      let from = 0;
      for (; at !== -1; at = out.indexOf(needle, from)) {
        parts.push(out.subarray(from, at), REDACTED_BYTES);
        from = at + needle.length;
      }
      parts.push(out.subarray(from));
      out = Buffer.concat(parts);
    }
    return out;
  }

  /** Whether a token stands anywhere in a form, whatever is around it. */
  private holdsToken = (form: string): boolean => {
    for (const token of this.tokens) if (form.includes(token)) return true;
    return false;
  };

  private verdict(text: string): FormsVerdict {
    return decodedFormsVerdict(text, this.secrets!.shortest, decodingBudget(text.length), this.holdsToken);
  }

  /**
   * The verdict on a text as a whole, its undecided marks (this scrub's or an earlier one's) read as blanks: a mark's
   * characters are a hash and fixed words no sender chooses, and read with the text around them they would only make
   * what was clean cost more to read through. Each mark's runs of characters are read on their own as pieces, so one
   * a sender wrote to hide a token in is found there.
   */
  private wholeVerdict(text: string): FormsVerdict {
    return this.verdict(text.includes("[undecided: ") ? text.replace(UNDECIDED_MARK, " ") : text);
  }

  /**
   * Whether `text` is kept whole without reading it through: a long text that provablyCleanText shows carries no
   * token in any form, in any of its pieces or as a whole, and (base64 as a whole, as a binary body is written) whose
   * bytes hold none of the tokens' forms. What most of a log's bytes are (images' bodies, pages' text), read at about
   * the speed of decoding them once; a text it cannot vouch for is read through as before.
   */
  private provablyClean(text: string, bytesScrubbed: boolean): boolean {
    if (text.length < PROVEN_CLEAN_MIN_CHARS || text.includes("[undecided: ")) return false;
    if (!provablyCleanText(text, this.secrets!, longPieces(text, this.secrets!.shortest))) return false;
    if (bytesScrubbed || text.length % 4 !== 0 || !WHOLE_BASE64.test(text)) return true;
    const bytes = Buffer.from(text, "base64");
    return this.bytes(bytes) === bytes;
  }

  /** `text` scrubbed (`bytesScrubbed`: a base64 text whose bytes were already cut of the tokens' forms). */
  private scrubbed(text: string, bytesScrubbed: boolean): Scrubbed {
    if (this.provablyClean(text, bytesScrubbed)) return { text, undecided: false };
    let kept = text;
    // A binary body as the log writes it: the tokens' forms in its bytes, where a token glued to the bytes around it
    // is found, and cut out of them rather than taking the whole body with it.
    if (!bytesScrubbed && text.length % 4 === 0 && WHOLE_BASE64.test(text)) {
      const bytes = Buffer.from(text, "base64");
      const clean = this.bytes(bytes);
      if (clean !== bytes) kept = clean.toString("base64");
    }
    // A token as it is, wherever it stands.
    for (const token of this.tokens) if (kept.includes(token)) kept = kept.split(token).join(REDACTED);
    let undecided = false;
    const scrubPiece = (piece: string) => {
      const verdict = this.verdict(piece);
      if (verdict === "clean") return piece;
      if (verdict === "carries") return REDACTED;
      undecided = true;
      return undecidedMark(piece);
    };
    // Pieces with `/` (base64), then without it (paths).
    for (const pieces of this.longPieces) kept = kept.replace(pieces, scrubPiece);
    const whole = this.wholeVerdict(kept);
    if (whole === "clean") return { text: kept, undecided };
    // Only the whole carries a token (split across pieces), or it cannot be read through: the parts that do not are
    // kept, as many of them from the start as are clean together, and the rest stands as one part.
    const parts = this.narrowed(kept, whole, 0);
    const joined = (n: number) => parts.slice(0, n).map((part) => part.text);
    const rest = (n: number) => {
      const text = parts
        .slice(n)
        .map((part) => part.source)
        .join("");
      return text === "" ? "" : whole === "carries" ? REDACTED : undecidedMark(text);
    };
    const keptWith = (n: number) => joined(n).join("") + rest(n);
    let n = parts.length;
    if (this.wholeVerdict(keptWith(n)) !== "clean") {
      // The most leading parts kept with the rest standing as one (a binary search: each reading costs the whole's).
      let [clean, unclean] = [0, n];
      while (unclean - clean > 1) {
        const mid = (clean + unclean) >> 1;
        if (this.wholeVerdict(keptWith(mid)) === "clean") clean = mid;
        else unclean = mid;
      }
      n = clean;
    }
    if (n === 0)
      return whole === "carries"
        ? { text: REDACTED, undecided: false }
        : { text: undecidedMark(text), undecided: true };
    const marked = parts.slice(0, n).some((part) => part.undecided) || (n < parts.length && whole === "undecided");
    return { text: keptWith(n), undecided: undecided || marked };
  }

  /**
   * `text` (whose verdict is `verdict`) cut into parts, each kept, or (when it carries a token or cannot be read
   * through) replaced; `source` is each part as it was.
   */
  private narrowed(text: string, verdict: FormsVerdict, depth: number): (Scrubbed & { source: string })[] {
    if (verdict === "clean") return [{ text, undecided: false, source: text }];
    if (depth === NARROW_DEPTH || text.length < 2 * NARROW_MIN_CHARS)
      return [
        verdict === "carries"
          ? { text: REDACTED, undecided: false, source: text }
          : { text: undecidedMark(text), undecided: true, source: text },
      ];
    const at = cutPoint(text);
    return [text.slice(0, at), text.slice(at)].flatMap((part) =>
      this.narrowed(part, this.wholeVerdict(part), depth + 1),
    );
  }

  /** Whether the config names `name` (a header or a cookie) as one whose value is never kept. */
  redacts(name: string): boolean {
    return this.redacted.has(name.toLowerCase());
  }

  /** A header's or a cookie's value as the log keeps it. */
  value(name: string, value: string): string {
    return this.redacts(name) ? REDACTED : this.text(value);
  }

  /**
   * A URL as the log keeps it: each path segment and each query name and value scrubbed on its own (so a token in one
   * query value leaves the rest of the URL readable), then the path and query scrubbed as a whole (a token split
   * across segments).
   */
  url(url: string): string {
    if (this.secrets === undefined) return url;
    const match = /^([a-z][a-z0-9+.-]*:\/\/[^/?#]*)([^?#]*)(\?[^#]*)?/i.exec(url);
    if (match === null) return this.text(url);
    const [, origin, path, query] = match;
    const scrubbedPath = path
      .split("/")
      .map((segment) => this.text(segment))
      .join("/");
    const scrubbedQuery =
      query === undefined
        ? ""
        : "?" +
          query
            .slice(1)
            .split("&")
            .map((pair) =>
              pair
                .split("=")
                .map((part) => this.text(part))
                .join("="),
            )
            .join("&");
    const rest = scrubbedPath + scrubbedQuery;
    const kept = this.text(rest);
    return this.text(origin) + (kept === rest || /^[/?]/.test(kept) ? kept : `/${kept}`);
  }
}

/** 1 for the characters of ENCODED_PIECE's class (bit 0) and PATH_PIECE's (bit 1), by code. */
const PIECE_CLASSES = Uint8Array.from({ length: 128 }, (_, code) => {
  const char = String.fromCharCode(code);
  const within = (piece: RegExp) => new RegExp(`^${piece.source}$`).test(char);
  return (within(ENCODED_PIECE) ? 1 : 0) | (within(PATH_PIECE) ? 2 : 0);
});

/**
 * The ranges [start, end) of `text` the scrub reads as pieces (the matches of ENCODED_PIECE and PATH_PIECE at least
 * `shortest` long), found in one pass over its characters rather than by the expressions (which start again at each
 * character of a run too short to be one: most of a base64 text's runs between its `/`s).
 */
export function longPieces(text: string, shortest: number): [number, number][] {
  const pieces: [number, number][] = [];
  let encoded = -1;
  let path = -1;
  for (let i = 0; i <= text.length; i++) {
    const code = i < text.length ? text.charCodeAt(i) : 0x20;
    const classes = code < 128 ? PIECE_CLASSES[code] : 0;
    if ((classes & 1) === 1) {
      if (encoded === -1) encoded = i;
    } else if (encoded !== -1) {
      if (i - encoded >= shortest) pieces.push([encoded, i]);
      encoded = -1;
    }
    if ((classes & 2) === 2) {
      if (path === -1) path = i;
    } else if (path !== -1) {
      if (i - path >= shortest) pieces.push([path, i]);
      path = -1;
    }
  }
  return pieces;
}

/** Whether the character at `i` is outside every encoded piece (ENCODED_PIECE's class). */
function outsidePieces(text: string, i: number): boolean {
  const c = text.charCodeAt(i);
  const letterOrDigit = (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a);
  return !letterOrDigit && !"+/=_%.~\\-".includes(text[i]);
}

/** Where to cut a text in two: after the character outside every encoded piece nearest its middle, else the middle. */
function cutPoint(text: string): number {
  const middle = text.length >> 1;
  let at = middle;
  for (let d = 0; d < middle; d++) {
    if (outsidePieces(text, middle + d)) {
      at = middle + d + 1;
      break;
    }
    if (outsidePieces(text, middle - d - 1)) {
      at = middle - d;
      break;
    }
  }
  // Not inside a surrogate pair.
  const code = text.charCodeAt(at);
  return code >= 0xdc00 && code <= 0xdfff ? at + 1 : at;
}
