// What the gateway's scrub of a request log costs and what it still finds. Most of a long episode's log is images'
// bodies in base64 and pages' text: each line passes at a few characters of decoding work per character (counted by
// the reading itself, tokenReadingWork, so a busy machine does not move it), where reading every text through all its
// decoded forms cost about a hundred for an image. And the shortcut that makes it so (provablyCleanText) vouches for
// no text that the full reading finds a token in, whatever form the token hides in: in a binary body's bytes, in a
// piece of it between two `/`s that decodes to text, in base64 of base64, in hex, split across words of a page.
import { randomBytes } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { scrubbedLine } from "../../src/gateway/requests";
import {
  computerAgentToken,
  computerControlToken,
  decodedFormsVerdict,
  decodingBudget,
  secretTokens,
} from "../../src/protocol/auth";
import { provablyCleanText } from "../../src/protocol/clean-text";
import { tokenReadingWork } from "../../src/protocol/token-reading";
import { longPieces, Scrubber } from "../../src/protocol/scrub";
import { cleanup, tempDir } from "../helpers/processes";
import { writeLargeRequestLog } from "../helpers/request-logs";
import { TOKEN } from "./helpers";

afterEach(cleanup);

/** The gateway's tokens for an env of two computers: the control token, each one's site-proxy and agent token. */
const TOKENS = [
  TOKEN,
  ...["agent", "other"].flatMap((name) => [computerControlToken(TOKEN, name), computerAgentToken(TOKEN, name)]),
];
const SECRETS = secretTokens(TOKENS);

/** The most a log's line may cost to scrub, in characters of decoding work per character of the line. */
const WORK_PER_CHAR = 20;

/** Whether the full reading finds a token in `text` as a whole or in any of the pieces the scrub reads on their own. */
function readingFinds(text: string): boolean {
  const carries = (form: string) => TOKENS.some((token) => form.includes(token));
  const verdict = (part: string) =>
    decodedFormsVerdict(part, SECRETS.shortest, decodingBudget(part.length) * 64, carries);
  return [text, ...longPieces(text, SECRETS.shortest).map(([from, to]) => text.slice(from, to))].some(
    (part) => verdict(part) !== "clean",
  );
}

const vouches = (text: string) => provablyCleanText(text, SECRETS, longPieces(text, SECRETS.shortest));
const base64 = (bytes: Buffer | string) => Buffer.from(bytes).toString("base64");
const randomBase64 = (bytes: number) => randomBytes(bytes).toString("base64").replace(/=+$/, "");
const page = (words: number) =>
  Array.from({ length: words }, (_, i) => ['<div class="item">', "price", "</div>", "cart", String(i)][i % 5]).join(
    " ",
  );

describe("the gateway's scrub of a request log", () => {
  it(`passes images' bodies and pages' text at under ${WORK_PER_CHAR} characters of decoding work per character`, () => {
    const dir = tempDir("requests-scrub-");
    writeLargeRequestLog(join(dir, "requests"), join(dir, "site-proxy.log"), 4);
    const lines = readdirSync(join(dir, "requests")).flatMap((name) =>
      readFileSync(join(dir, "requests", name), "utf8")
        .split("\n")
        .filter(Boolean),
    );
    const scrubber = new Scrubber(SECRETS, []);
    for (const kind of ["image/png", "text/html"]) {
      const ofKind = lines.filter((line) => line.includes(`"mimeType":"${kind}`));
      expect(ofKind.length).toBeGreaterThan(2);
      const before = tokenReadingWork();
      const passed = ofKind.map((line) => scrubbedLine(line, scrubber));
      const chars = ofKind.reduce((sum, line) => sum + line.length, 0);
      expect((tokenReadingWork() - before) / chars, kind).toBeLessThan(WORK_PER_CHAR);
      // Nothing in them carries a token: every line passes whole.
      expect(passed.map((line) => JSON.parse(line!))).toEqual(ofKind.map((line) => JSON.parse(line)));
    }
  });

  it("vouches for no text the full reading finds a token in, in any form", () => {
    const token = TOKENS[0];
    const derived = TOKENS[3];
    const image = () => randomBase64(3 * 4096);
    const hidden: Record<string, string> = {
      "the token among an image's base64": `${image()}${token}${image()}`,
      "the token glued into a binary body's bytes": base64(
        Buffer.concat([randomBytes(4096), Buffer.from(`Q${derived}Q`), randomBytes(4096)]),
      ),
      "base64 of the token's base64 between two slashes of an image's base64": `${image()}/${base64(base64(token))}/${image()}`,
      "base64 of the token's hex between two slashes": `${image()}/${base64(Buffer.from(token).toString("hex"))}/${image()}`,
      "the token's hex in an image's base64": `${image()}/${Buffer.from(derived).toString("hex")}/${image()}`,
      "the token's base64 as a word of a page": `${page(500)} ${base64(token)} ${page(500)}`,
      "the token's url-safe base64 of its base64 in a page": `${page(500)} ${Buffer.from(base64(token)).toString("base64url")} ${page(500)}`,
      "the token's base64 split across a page's words": `${page(500)} ${base64(token).replace(/(.{6})/g, "$1 ")} ${page(500)}`,
      "the token's hex split by pluses": `${page(500)} ${Buffer.from(derived)
        .toString("hex")
        .replace(/(.{8})/g, "$1+")} ${page(500)}`,
      "base64 of text that is the token's base64 with spaces": `${image()}/${base64(` ${base64(token).replace(/(.{4})/g, "$1 ")}`)}/${image()}`,
    };
    for (const [what, text] of Object.entries(hidden)) {
      expect(readingFinds(text), what).toBe(true);
      expect(vouches(text), what).toBe(false);
      expect(new Scrubber(SECRETS, []).text(text), what).not.toBe(text);
    }
  });

  it("vouches only for texts the full reading finds clean, over texts made of encodings' pieces", () => {
    // Random joins of what tokens and bodies are made of: pieces of base64 and hex, the tokens in each form, and
    // the characters that split pieces and forms.
    const pick = <T>(items: readonly T[]): T => items[Math.floor(Math.random() * items.length)];
    const upTo = (n: number) => 1 + Math.floor(Math.random() * n);
    const plain = [
      () => randomBase64(upTo(90)),
      () => randomBytes(upTo(40)).toString("hex"),
      () => page(upTo(8)),
      () => pick(["/", "+", " ", "=", ".", "_", "-", "\n"]),
    ];
    const tokens = [
      () => base64(pick(TOKENS)).slice(upTo(3) - 1),
      () => Buffer.from(pick(TOKENS)).toString("hex"),
      () => base64(base64(pick(TOKENS))),
    ];
    let vouched = 0;
    let found = 0;
    for (let round = 0; round < 1500; round++) {
      // A third with tokens' forms among the parts, the rest without.
      const kinds = round % 3 === 0 ? [...plain, ...plain, ...tokens] : plain;
      let text = "";
      while (text.length < 200 + Math.random() * 600) text += pick(kinds)();
      const finds = readingFinds(text);
      if (vouches(text)) {
        vouched++;
        expect(finds, text).toBe(false);
      }
      if (finds) found++;
    }
    expect(vouched).toBeGreaterThan(100);
    expect(found).toBeGreaterThan(100);
  });
});
