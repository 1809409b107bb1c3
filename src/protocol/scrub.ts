// What of an exchange may go in the request log: every text the log keeps (a header's value, a cookie's, a query
// value, the URL, a body) is put through `withoutTokens`, the rule that keeps tokens from sites, so no token reaches
// the log in any form that rule recognises; and the values of the headers and cookies the config names are never kept.
import { type SecretTokens, withoutTokens } from "./auth";

/** A run of the characters of a token's encodings: base64 of either alphabet with its padding, hex, percent-escapes. */
const ENCODED_PIECE = /[A-Za-z0-9+/=_%.~\\-]+/g;
/** The same without `/`: the segments of a path. */
const PATH_PIECE = /[A-Za-z0-9+=_%.~\\-]+/g;

/** What stands for a value the log does not keep. */
export const REDACTED = "[redacted]";

/** Texts up to this long are remembered with what the log keeps of them, at most CACHED_TEXTS of them at a time. */
const CACHED_TEXT_CHARS = 1024;
const CACHED_TEXTS = 2048;

export class Scrubber {
  private readonly redacted: ReadonlySet<string>;
  private readonly cache = new Map<string, string>();
  /** ENCODED_PIECE and PATH_PIECE for the runs long enough to carry a token: a shorter one is kept as it is. */
  private readonly longPieces: readonly RegExp[];

  constructor(
    private readonly secrets: SecretTokens | undefined,
    redact: readonly string[],
  ) {
    this.redacted = new Set(redact.map((name) => name.toLowerCase()));
    const atLeast = `{${secrets?.shortest ?? 1},}`;
    this.longPieces = [ENCODED_PIECE, PATH_PIECE].map((piece) => new RegExp(piece.source.slice(0, -1) + atLeast, "g"));
  }

  /**
   * `text` as the log may keep it: each piece of it that carries a token in any form replaced by REDACTED, and the
   * whole replaced when it still does. A piece is a run of the characters an encoding of a token is made of: a
   * token nested in encodings (hex in base64, say) is found in its piece, where the text around it would hide it
   * from a reading of the whole (which decodes a form further only when all of it decodes to text).
   */
  text(text: string): string {
    const secrets = this.secrets;
    if (secrets === undefined || text.length < secrets.shortest) return text;
    if (text.length > CACHED_TEXT_CHARS) return this.scrubbed(text, secrets);
    // A browser sends the same header values (User-Agent, Accept, client hints, cookies) on every request.
    let kept = this.cache.get(text);
    if (kept === undefined) {
      if (this.cache.size >= CACHED_TEXTS) this.cache.clear();
      this.cache.set(text, (kept = this.scrubbed(text, secrets)));
    }
    return kept;
  }

  private scrubbed(text: string, secrets: SecretTokens): string {
    let kept = text;
    // A token as it is, wherever it stands (withoutTokens reads a token only as a whole word, and `/` is a word's).
    for (const tokens of secrets.byLength.values())
      for (const token of tokens) if (kept.includes(token)) kept = kept.split(token).join(REDACTED);
    const scrubPiece = (piece: string) => (withoutTokens(piece, secrets) !== piece ? REDACTED : piece);
    // Pieces with `/` (base64), then without it (paths).
    for (const pieces of this.longPieces) kept = kept.replace(pieces, scrubPiece);
    return withoutTokens(kept, secrets) === kept ? kept : REDACTED;
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
   * query value leaves the rest of the URL readable), and the whole path replaced when only the whole carries a token.
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
    return this.text(origin) + (this.text(rest) === rest ? rest : `/${REDACTED}`);
  }
}
