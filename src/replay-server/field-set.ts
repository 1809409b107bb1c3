// A request's fields as the matcher holds them: each field (a name and its values in order) one 53-bit hash, the set
// a sorted Float64Array. Eight bytes a field, whatever the length of its name or values, and compared by a merge: a
// body of a million fields costs a few MB and a pass, where a Map of label strings cost over 100 MB (a label repeats
// its whole path) and a sort of those strings seconds. Two fields are equal when their hashes are; at 53 bits two
// fields of one request collide by chance about once in 10^9 requests of a million fields, and a collision costs
// one overlap point, never an answer's bytes.
import { createHash } from "node:crypto";

/** Field name -> its values in order (a name may repeat, as in `?a=1&a=2`). */
export type Fields = Map<string, string[]>;

/** The hashes of a request's fields, sorted. */
export type FieldSet = Float64Array;

/** An empty field set. */
export const NO_FIELDS: FieldSet = new Float64Array(0);

/**
 * A field's hash fed piece by piece: two 32-bit FNV-style lanes over the UTF-16 code units of the field's namespace,
 * its name, then each value as `\0<length>:<value>`. Fed in that order, a name built a segment at a time (`a`, `.b`,
 * `[0]`) hashes as the whole label does, so a JSON leaf's label is never built as a string.
 */
export class FieldHash {
  constructor(
    public a = 0x811c9dc5 | 0,
    public b = 0x9747b28c | 0,
  ) {}

  set(a: number, b: number): this {
    this.a = a;
    this.b = b;
    return this;
  }

  text(text: string): this {
    let a = this.a;
    let b = this.b;
    for (let i = 0; i < text.length; i++) {
      const code = text.charCodeAt(i);
      a = Math.imul(a ^ code, 0x01000193);
      b = Math.imul(b ^ code, 0x5bd1e995);
      b ^= b >>> 13;
    }
    this.a = a;
    this.b = b;
    return this;
  }

  value(value: string): this {
    return this.text("\0").text(String(value.length)).text(":").text(value);
  }

  /** The field's hash: both lanes finished (murmur3's fmix32), 21 bits of one and 32 of the other. */
  done(): number {
    return (fmix(this.b) >>> 11) * 0x1_0000_0000 + fmix(this.a);
  }
}

function fmix(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/** The hash of field `name` (in `namespace`) holding `values`. */
export function fieldHash(namespace: string, name: string, values: readonly string[]): number {
  const hash = new FieldHash().text(namespace).text(name);
  for (const value of values) hash.value(value);
  return hash.done();
}

/** Collects field hashes in a buffer that doubles as it fills; `done` sorts them into a FieldSet. */
export class FieldSetBuilder {
  private hashes = new Float64Array(64);
  private length = 0;

  push(hash: number): void {
    if (this.length === this.hashes.length) {
      const grown = new Float64Array(this.hashes.length * 2);
      grown.set(this.hashes);
      this.hashes = grown;
    }
    this.hashes[this.length++] = hash;
  }

  done(): FieldSet {
    return this.hashes.slice(0, this.length).sort();
  }
}

/** `fields` as a FieldSet, each name in `namespace` (`?` a query's, `.` a body's: one set can hold both). */
export function fieldSet(fields: Fields, namespace = ""): FieldSet {
  const builder = new FieldSetBuilder();
  for (const [name, values] of fields) builder.push(fieldHash(namespace, name, values));
  return builder.done();
}

/** Both sets as one, sorted (a linear merge). */
export function unionOf(a: FieldSet, b: FieldSet): FieldSet {
  if (a.length === 0) return b;
  if (b.length === 0) return a;
  const out = new Float64Array(a.length + b.length);
  let i = 0;
  let j = 0;
  let k = 0;
  while (i < a.length && j < b.length) out[k++] = a[i] <= b[j] ? a[i++] : b[j++];
  while (i < a.length) out[k++] = a[i++];
  while (j < b.length) out[k++] = b[j++];
  return out;
}

/** How many fields the two sets share (a linear merge). */
export function sharedCount(a: FieldSet, b: FieldSet): number {
  let shared = 0;
  let i = 0;
  let j = 0;
  while (i < a.length && j < b.length) {
    if (a[i] === b[j]) {
      shared += 1;
      i += 1;
      j += 1;
    } else if (a[i] < b[j]) i += 1;
    else j += 1;
  }
  return shared;
}

/** One string that is equal for two field sets exactly when they hold the same fields; "" for none. */
export function fieldsDigest(fields: FieldSet): string {
  if (fields.length === 0) return "";
  return createHash("sha256")
    .update(new Uint8Array(fields.buffer, fields.byteOffset, fields.byteLength))
    .digest("base64url");
}
