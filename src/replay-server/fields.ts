// What a request is compared by, besides its method and host: its query parameters and its body as fields
// (a form's fields, a multipart form's parts, a JSON document's members), each volatile one on the site's ignore
// lists left out. A body of any other type is one field, its digest.
import { createHash } from "node:crypto";
import { FieldHash, FieldSetBuilder, fieldSet, NO_FIELDS, type Fields, type FieldSet } from "./field-set";
import { ignoreTree, jsonFieldSet } from "./json-fields";

export type { Fields, FieldSet } from "./field-set";
export { fieldsDigest } from "./field-set";

function add(fields: Fields, name: string, value: string): void {
  const values = fields.get(name);
  if (values) values.push(value);
  else fields.set(name, [value]);
}

/** `?query` of a request-target, without the `?`; "" when it has none. */
export function queryOf(target: string): string {
  const mark = target.indexOf("?");
  return mark === -1 ? "" : target.slice(mark + 1);
}

/** The path of a request-target, percent-decoded where that is valid (WPR compares decoded paths). */
export function pathOf(target: string): string {
  const mark = target.indexOf("?");
  const raw = mark === -1 ? target : target.slice(0, mark);
  try {
    return decodeURIComponent(raw);
  } catch {
    return raw;
  }
}

/** A query's parameters, decoded, those named in `ignore` left out. */
export function queryFields(target: string, ignore: ReadonlySet<string>): Fields {
  const fields: Fields = new Map();
  for (const [name, value] of new URLSearchParams(queryOf(target))) if (!ignore.has(name)) add(fields, name, value);
  return fields;
}

/** The request-target with the parameters named in `ignore` cut out, the rest kept byte for byte. */
export function targetWithout(target: string, ignore: ReadonlySet<string>): string {
  const mark = target.indexOf("?");
  if (mark === -1 || ignore.size === 0) return target;
  const kept = target
    .slice(mark + 1)
    .split("&")
    .filter((pair) => {
      const name = pair.split("=", 1)[0].replace(/\+/g, " ");
      try {
        return !ignore.has(decodeURIComponent(name));
      } catch {
        return !ignore.has(name);
      }
    });
  return kept.length === 0 ? target.slice(0, mark) : `${target.slice(0, mark)}?${kept.join("&")}`;
}

const digest = (bytes: Buffer | string) => createHash("sha256").update(bytes).digest("base64url");

/** The namespaces of a query's fields and a body's: both count in one overlap ratio, never as each other. */
export const QUERY = "?";
export const BODY = ".";

/** The ignore list's dotted paths as a tree, built once per list. */
const ignoreTrees = new WeakMap<ReadonlySet<string>, ReturnType<typeof ignoreTree>>();
function treeOf(ignore: ReadonlySet<string>): ReturnType<typeof ignoreTree> {
  let tree = ignoreTrees.get(ignore);
  if (!tree) ignoreTrees.set(ignore, (tree = ignoreTree(ignore)));
  return tree;
}

/** A form component decoded as a WHATWG form parser does: `+` a space, then percent-decoding. */
function formDecoded(text: string): string {
  const spaced = text.includes("+") ? text.replace(/\+/g, " ") : text;
  if (!spaced.includes("%")) return spaced;
  try {
    return decodeURIComponent(spaced);
  } catch {
    // a stray `%` or bytes that are not UTF-8: the WHATWG parser's lenient reading, for this one component
    return new URLSearchParams(`x=${text}`).get("x") ?? spaced;
  }
}

/**
 * A urlencoded form's fields, read a pair at a time: URLSearchParams holds every pair as two strings and an array at
 * once (about 20x a body of short pairs). A name's values are hashed as they come, in order.
 */
async function formFieldSet(bytes: Buffer, ignore: ReadonlySet<string>): Promise<FieldSet> {
  const text = bytes.toString("utf8");
  const byName = new Map<string, FieldHash>();
  let nextYield = 256 * 1024;
  for (let start = 0; start <= text.length;) {
    let end = text.indexOf("&", start);
    if (end === -1) end = text.length;
    if (end > start) {
      const equals = text.indexOf("=", start);
      const split = equals === -1 || equals > end ? end : equals;
      const name = formDecoded(text.slice(start, split));
      if (!ignore.has(name)) {
        const value = split === end ? "" : formDecoded(text.slice(split + 1, end));
        let hash = byName.get(name);
        if (!hash) byName.set(name, (hash = new FieldHash().text(BODY).text(name)));
        hash.value(value);
      }
    }
    start = end + 1;
    if (start >= nextYield) {
      await new Promise<void>((resolve) => setImmediate(resolve));
      nextYield = start + 256 * 1024;
    }
  }
  const builder = new FieldSetBuilder();
  for (const hash of byName.values()) builder.push(hash.done());
  return builder.done();
}

function mediaType(mimeType: string): string {
  return mimeType.split(";", 1)[0].trim().toLowerCase();
}

async function multipartFields(mimeType: string, bytes: Buffer, ignore: ReadonlySet<string>): Promise<Fields> {
  // The boundary is random per submission, so the parts are compared, never the bytes; undici (node's fetch) parses.
  const form = await new Response(bytes, { headers: { "content-type": mimeType } }).formData();
  const fields: Fields = new Map();
  for (const [name, value] of form) {
    if (ignore.has(name)) continue;
    if (typeof value === "string") add(fields, name, value);
    else add(fields, name, `file ${value.name} ${digest(Buffer.from(await value.arrayBuffer()))}`);
  }
  return fields;
}

/**
 * A request body's fields (in the BODY namespace); an empty body has none. Time and memory are linear in the body:
 * a form and a JSON document are read in one pass that gives the event loop back as it goes, 8 bytes a field kept.
 */
export async function bodyFields(mimeType: string, bytes: Buffer, ignore: ReadonlySet<string>): Promise<FieldSet> {
  if (bytes.length === 0) return NO_FIELDS;
  const type = mediaType(mimeType);
  if (type === "application/x-www-form-urlencoded") return formFieldSet(bytes, ignore);
  if (type === "multipart/form-data") {
    try {
      return fieldSet(await multipartFields(mimeType, bytes, ignore), BODY);
    } catch {
      // not parseable as the form it claims to be: compared as bytes below
    }
  }
  // JSON, also when sent as text/plain (sendBeacon, many fetch calls).
  const first = bytes.subarray(0, 64).toString("utf8").trimStart()[0];
  if (type.endsWith("json") || first === "{" || first === "[") {
    const fields = await jsonFieldSet(bytes, BODY, ignore, treeOf(ignore));
    if (fields !== undefined) return fields;
  }
  return fieldSet(new Map([["", [digest(bytes)]]]), BODY);
}
