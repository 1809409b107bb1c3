// What a site controls reaches the operator's terminal: a page's title, a URL, a self-test's finding, an error a
// site's answer shaped. A terminal obeys what such text may hold: C0 and C1 controls (ESC, CSI U+009B, OSC U+009D
// can move the cursor, rewrite lines, set the window title or a hyperlink) and bidi controls (U+202A-U+202E,
// U+2066-U+2069, and the marks and separators beside them) that make a line read in another order than it is stored.
// Every line the CLI prints goes through `printable`, which writes each such character as `\uXXXX`: readable, and in
// a JSON string the same character again, so `--json` output stays the same JSON.

/** C0 controls, DEL, C1 controls, the bidi marks, embeddings, overrides and isolates, the line separators. */
// eslint-disable-next-line no-control-regex -- the control characters are what it finds
const UNPRINTABLE = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

/** `text` with every character a terminal would obey instead of showing written as `\uXXXX`. */
export function printable(text: string): string {
  return text.replace(UNPRINTABLE, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
}

/** Each line of `text` made printable; the line breaks between them kept. */
export function printableLines(text: string): string {
  return text.split("\n").map(printable).join("\n");
}
