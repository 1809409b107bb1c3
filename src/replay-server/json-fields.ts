// A JSON body's leaves as fields, read in one pass over its bytes: no parse tree, no label string. JSON.parse of a
// 16 MiB body took 1.7-9 s of the server's one loop and 5-29x its size in heap, by shape (a million empty objects,
// a deep nest), in one call nothing else can run during. Here each leaf's label (`a.b[0].c`) is hashed a segment at a
// time as the scan descends, its value is hashed as JSON.stringify would write it, and the scan gives the loop back
// every 64 KiB: time and memory linear in the body, 8 bytes a field.
//
// What a leaf is: a string, number, true, false or null, or an empty array (`[]`) or object (`{}`), named by its
// path (member names joined by `.`, array items as `[i]`); the root alone is named "". A member whose name, or whose
// dotted path from the top (member names alone), is ignored is left out with all it holds. A member repeated in one
// object counts each time (JSON.parse keeps the last; no browser writes one twice). A document nested deeper than
// MAX_JSON_DEPTH, or that is not JSON as RFC 8259 says, is not read as fields (the caller digests its bytes).
import { FieldHash, FieldSetBuilder, type FieldSet } from "./field-set";

/** Deeper than this, a JSON body is compared as bytes: its scan holds a few words per level open. */
export const MAX_JSON_DEPTH = 1000;

/** The scan gives the event loop back after this many bytes. */
const YIELD_BYTES = 64 * 1024;

const yieldToLoop = () => new Promise<void>((resolve) => setImmediate(resolve));

interface IgnoreNode {
  children: Map<string, IgnoreNode>;
  /** A dotted path ends here. */
  ignored: boolean;
}

/** The dotted paths of `ignore` as a tree of member names, so a member's path is never joined to be looked up. */
export function ignoreTree(ignore: ReadonlySet<string>): IgnoreNode {
  const root: IgnoreNode = { children: new Map(), ignored: false };
  for (const path of ignore) {
    let node = root;
    for (const name of path.split(".")) {
      let child = node.children.get(name);
      if (!child) node.children.set(name, (child = { children: new Map(), ignored: false }));
      node = child;
    }
    node.ignored = true;
  }
  return root;
}

/** The tree below `node` along member `name` (whose own dots step as a dotted path's do). */
function stepTree(node: IgnoreNode | undefined, name: string): IgnoreNode | undefined {
  if (node === undefined) return undefined;
  if (!name.includes(".")) return node.children.get(name);
  for (const part of name.split(".")) {
    node = node?.children.get(part);
    if (node === undefined) return undefined;
  }
  return node;
}

class NotJson extends Error {}

const SPACE = 0x20;
const TAB = 0x09;
const LF = 0x0a;
const CR = 0x0d;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const COLON = 0x3a;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;
const NUMBER = /^-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?$/;
/** The bytes a number token is made of: `-+.eE` and the digits. */
const NUMBER_BYTES = new Set([..."-+.eE0123456789"].map((c) => c.charCodeAt(0)));

/** One open array or object, and what its members' labels start from. */
interface Frame {
  isArray: boolean;
  /** Items seen so far (arrays). */
  count: number;
  /** The container's own label, hashed (both lanes). */
  a: number;
  b: number;
  labelEmpty: boolean;
  tree: IgnoreNode | undefined;
  skipped: boolean;
}

/**
 * The leaves of the JSON document in `bytes` as a FieldSet (each name in `namespace`), members in `ignore` (names,
 * or dotted paths as `tree` holds them) left out; undefined when `bytes` is not JSON or nests too deep.
 */
export async function jsonFieldSet(
  bytes: Buffer,
  namespace: string,
  ignore: ReadonlySet<string>,
  tree: IgnoreNode,
): Promise<FieldSet | undefined> {
  try {
    return await scan(bytes, namespace, ignore, tree);
  } catch (error) {
    if (error instanceof NotJson || error instanceof SyntaxError) return undefined;
    throw error;
  }
}

async function scan(
  bytes: Buffer,
  namespace: string,
  ignore: ReadonlySet<string>,
  tree: IgnoreNode,
): Promise<FieldSet> {
  const builder = new FieldSetBuilder();
  const hash = new FieldHash().text(namespace);
  const stack: Frame[] = [];
  let pos = 0;
  let nextYield = YIELD_BYTES;
  // The label of the value about to be read.
  let a = hash.a;
  let b = hash.b;
  let labelEmpty = true;
  let node: IgnoreNode | undefined = tree;
  let skipped = false;

  const spaces = () => {
    while (pos < bytes.length) {
      const c = bytes[pos];
      if (c !== SPACE && c !== TAB && c !== LF && c !== CR) break;
      pos += 1;
    }
  };
  /** The string token at `pos` (its quotes included), decoded; pos after it. */
  const string = (): string => {
    const start = pos;
    pos += 1;
    let escaped = false;
    while (true) {
      if (pos >= bytes.length) throw new NotJson();
      const c = bytes[pos];
      if (c === QUOTE) break;
      if (c < 0x20) throw new NotJson();
      if (c === BACKSLASH) {
        escaped = true;
        pos += 1;
      }
      pos += 1;
    }
    pos += 1;
    return escaped
      ? (JSON.parse(bytes.toString("utf8", start, pos)) as string)
      : bytes.toString("utf8", start + 1, pos - 1);
  };
  const leaf = (value: string) => {
    if (!skipped) builder.push(hash.set(a, b).value(value).done());
  };
  const labelItem = (frame: Frame) => {
    hash.set(frame.a, frame.b).text("[").text(String(frame.count)).text("]");
    a = hash.a;
    b = hash.b;
    labelEmpty = false;
    node = frame.tree;
    skipped = frame.skipped;
  };
  const open = (isArray: boolean) => {
    if (stack.length >= MAX_JSON_DEPTH) throw new NotJson();
    stack.push({ isArray, count: 0, a, b, labelEmpty, tree: node, skipped });
    pos += 1;
  };
  /** Reads a member's name and colon; the label and ignore state are then the member's. */
  const member = (frame: Frame) => {
    if (bytes[pos] !== QUOTE) throw new NotJson();
    const name = string();
    spaces();
    if (bytes[pos] !== COLON) throw new NotJson();
    pos += 1;
    node = stepTree(frame.tree, name);
    skipped = frame.skipped || ignore.has(name) || node?.ignored === true;
    hash.set(frame.a, frame.b);
    if (!frame.labelEmpty) hash.text(".");
    hash.text(name);
    a = hash.a;
    b = hash.b;
    labelEmpty = frame.labelEmpty && name === "";
  };

  spaces();
  // A value is read at `pos`; then what follows it, until the document ends.
  for (;;) {
    if (pos >= nextYield) {
      await yieldToLoop();
      nextYield = pos + YIELD_BYTES;
    }
    const c = bytes[pos];
    if (c === OPEN_ARRAY || c === OPEN_OBJECT) {
      open(c === OPEN_ARRAY);
      spaces();
      const frame = stack[stack.length - 1];
      if (bytes[pos] === (c === OPEN_ARRAY ? CLOSE_ARRAY : CLOSE_OBJECT)) {
        pos += 1;
        leaf(c === OPEN_ARRAY ? "[]" : "{}");
        stack.pop();
      } else {
        if (frame.isArray) labelItem(frame);
        else member(frame);
        spaces();
        continue;
      }
    } else if (c === QUOTE) leaf(JSON.stringify(string()));
    else if (c === 0x74 && bytes.toString("latin1", pos, pos + 4) === "true") {
      pos += 4;
      leaf("true");
    } else if (c === 0x66 && bytes.toString("latin1", pos, pos + 5) === "false") {
      pos += 5;
      leaf("false");
    } else if (c === 0x6e && bytes.toString("latin1", pos, pos + 4) === "null") {
      pos += 4;
      leaf("null");
    } else {
      const start = pos;
      while (pos < bytes.length && NUMBER_BYTES.has(bytes[pos])) pos += 1;
      const text = bytes.toString("latin1", start, pos);
      if (!NUMBER.test(text)) throw new NotJson();
      const number = Number(text);
      leaf(Number.isFinite(number) ? String(number) : "null");
    }
    // After a value: the next member or item, or the end of its container(s), or of the document.
    for (;;) {
      spaces();
      const frame = stack[stack.length - 1];
      if (frame === undefined) {
        if (pos !== bytes.length) throw new NotJson();
        return builder.done();
      }
      const closing = bytes[pos];
      if (closing === COMMA) {
        pos += 1;
        spaces();
        if (frame.isArray) {
          frame.count += 1;
          labelItem(frame);
        } else member(frame);
        spaces();
        break;
      }
      if (closing !== (frame.isArray ? CLOSE_ARRAY : CLOSE_OBJECT)) throw new NotJson();
      pos += 1;
      stack.pop();
    }
  }
}
