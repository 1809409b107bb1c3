// What every resource kind of the project's dynamic providers implements, and the rules they share: which
// state keys are inputs, what a change of an input does (update in place or replace), and how an input
// that is not known yet (a preview before its dependency exists) is recognised.
import type * as pulumi from "@pulumi/pulumi";

/** One resource kind's operations, as Pulumi's dynamic provider calls them (inputs already decrypted). */
export interface Operations {
  check?(olds: Record<string, any>, news: Record<string, any>): Promise<pulumi.dynamic.CheckResult>;
  diff(id: string, olds: Record<string, any>, news: Record<string, any>): Promise<pulumi.dynamic.DiffResult>;
  create(inputs: Record<string, any>): Promise<pulumi.dynamic.CreateResult>;
  read?(id: string, props: Record<string, any>): Promise<pulumi.dynamic.ReadResult>;
  update?(id: string, olds: Record<string, any>, news: Record<string, any>): Promise<pulumi.dynamic.UpdateResult>;
  delete?(id: string, props: Record<string, any>): Promise<void>;
}

/** The value Pulumi puts where an input is not known yet (during a preview). */
export const UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9";

/** True when `value` or anything inside it is not known yet. */
export function hasUnknown(value: unknown): boolean {
  if (value === UNKNOWN) return true;
  if (Array.isArray(value)) return value.some(hasUnknown);
  if (value && typeof value === "object") return Object.values(value).some(hasUnknown);
  return false;
}

/** JSON with sorted keys, so two equal inputs compare equal whatever their key order. */
export function canonical(value: unknown): string {
  return JSON.stringify(value, (_k, v) =>
    v && typeof v === "object" && !Array.isArray(v)
      ? Object.fromEntries(
          Object.keys(v)
            .sort()
            .map((k) => [k, v[k]]),
        )
      : v,
  );
}

/** The inputs among `keys` whose value differs between the old state and the new inputs. */
export function changedInputs(olds: Record<string, any>, news: Record<string, any>, keys: readonly string[]): string[] {
  return keys.filter((k) => canonical(olds[k] ?? null) !== canonical(news[k] ?? null));
}

/**
 * A diff where a change of any of `replaceOn` replaces the resource (deleting the old one first when
 * `deleteFirst`: its Docker name is fixed) and a change of any other input key updates it in place.
 */
export function diffInputs(
  olds: Record<string, any>,
  news: Record<string, any>,
  keys: readonly string[],
  options: { replaceOn: readonly string[] | "all"; deleteFirst?: boolean },
): pulumi.dynamic.DiffResult {
  const changed = changedInputs(olds, news, keys);
  const replaces = options.replaceOn === "all" ? changed : changed.filter((k) => options.replaceOn.includes(k));
  return { changes: changed.length > 0, replaces, deleteBeforeReplace: options.deleteFirst ?? false };
}

/** The inputs of `state` (outputs include them): only `keys`, so outputs never feed back as inputs. */
export function pick(state: Record<string, any>, keys: readonly string[]): Record<string, any> {
  return Object.fromEntries(keys.filter((k) => state[k] !== undefined).map((k) => [k, state[k]]));
}
