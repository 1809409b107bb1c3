// What a request is compared by, besides its method and host: its query parameters and its body as fields
// (a form's fields, a multipart form's parts, a JSON document's members), each volatile one on the site's ignore
// lists left out. A body of any other type is one field, its digest.
import { createHash } from "node:crypto";

/** Field name -> its values in order (a name may repeat, as in `?a=1&a=2`). */
export type Fields = Map<string, string[]>;

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

/** Whether a JSON member at `path` (its names from the top) is ignored: by its own name or its dotted path. */
function ignoredMember(path: readonly string[], ignore: ReadonlySet<string>): boolean {
  return ignore.has(path[path.length - 1]) || ignore.has(path.join("."));
}

/** A JSON value's leaves as fields named by their path (`a.b[0].c`), ignored members left out at any depth. */
function jsonFields(value: unknown, ignore: ReadonlySet<string>): Fields {
  const fields: Fields = new Map();
  const walk = (node: unknown, names: string[], label: string) => {
    if (Array.isArray(node)) {
      if (node.length === 0) add(fields, label, "[]");
      node.forEach((item, i) => walk(item, names, `${label}[${i}]`));
    } else if (typeof node === "object" && node !== null) {
      const keys = Object.keys(node);
      if (keys.length === 0) add(fields, label, "{}");
      for (const key of keys) {
        const path = [...names, key];
        if (ignoredMember(path, ignore)) continue;
        walk((node as Record<string, unknown>)[key], path, label === "" ? key : `${label}.${key}`);
      }
    } else add(fields, label, JSON.stringify(node));
  };
  walk(value, [], "");
  return fields;
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

/** A request body's fields; an empty body has none. */
export async function bodyFields(mimeType: string, bytes: Buffer, ignore: ReadonlySet<string>): Promise<Fields> {
  if (bytes.length === 0) return new Map();
  const type = mediaType(mimeType);
  if (type === "application/x-www-form-urlencoded") {
    const fields: Fields = new Map();
    for (const [name, value] of new URLSearchParams(bytes.toString("utf8")))
      if (!ignore.has(name)) add(fields, name, value);
    return fields;
  }
  if (type === "multipart/form-data") {
    try {
      return await multipartFields(mimeType, bytes, ignore);
    } catch {
      // not parseable as the form it claims to be: compared as bytes below
    }
  }
  // JSON, also when sent as text/plain (sendBeacon, many fetch calls).
  const first = bytes.subarray(0, 64).toString("utf8").trimStart()[0];
  if (type.endsWith("json") || first === "{" || first === "[") {
    try {
      return jsonFields(JSON.parse(bytes.toString("utf8")), ignore);
    } catch {
      // not JSON after all
    }
  }
  return new Map([["", [digest(bytes)]]]);
}

/** One string that is equal for two field sets exactly when they hold the same fields (their order aside). */
export function fieldsDigest(fields: Fields): string {
  if (fields.size === 0) return "";
  return digest(JSON.stringify([...fields].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))));
}
