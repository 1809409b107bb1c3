// How a value's secret-ness is seen by the pack, whichever way the resources reach it.
// Under Pulumi's mocks (`multienv check`) secret inputs arrive wrapped in Pulumi's secret marker
// (`{[specialSigKey]: specialSecretSig, value}`); a rendered graph may redact them to "[secret]";
// CrossGuard unwraps every secret before a policy sees it, so there nothing looks secret.
import { specialSecretSig, specialSigKey } from "@pulumi/pulumi/runtime/rpc";
import { Secret } from "@pulumi/policy";

/** What `multienv check --json` prints in place of a secret value. */
export const REDACTED = "[secret]";

/** True when `value` is itself marked secret (not when it merely contains a secret). */
export function isSecretValue(value: unknown): boolean {
  if (value === REDACTED) return true;
  if (value instanceof Secret) return true;
  return (
    typeof value === "object" &&
    value !== null &&
    (value as Record<string, unknown>)[specialSigKey] === specialSecretSig
  );
}

/** The value inside one layer of secret marking; "[secret]" stays as it is (its plaintext is gone). */
function unwrapOnce(value: unknown): unknown {
  if (value instanceof Secret) return value.value;
  if (isSecretValue(value) && typeof value === "object") return (value as { value: unknown }).value;
  return value;
}

/** `value` with every secret marker removed, at any depth: plain data policies can read. */
export function reveal(value: unknown): unknown {
  const inner = unwrapOnce(value);
  if (Array.isArray(inner)) return inner.map(reveal);
  if (typeof inner === "object" && inner !== null && Object.getPrototypeOf(inner) === Object.prototype) {
    return Object.fromEntries(Object.entries(inner).map(([k, v]) => [k, reveal(v)]));
  }
  return inner;
}

/**
 * One string found while walking a value: where it is, its plaintext, and whether it (or something around it) is
 * secret.
 */
export interface StringLeaf {
  path: string;
  text: string;
  secret: boolean;
}

/** Calls `visit` with every string in `value` and whether a secret marker encloses it (no paths: the fast walk). */
export function visitStrings(
  value: unknown,
  visit: (text: string, secret: boolean) => void,
  enclosedBySecret = false,
): void {
  const secret = enclosedBySecret || isSecretValue(value);
  const inner = unwrapOnce(value);
  if (typeof inner === "string") visit(inner, secret);
  else if (Array.isArray(inner)) for (const v of inner) visitStrings(v, visit, secret);
  else if (typeof inner === "object" && inner !== null && Object.getPrototypeOf(inner) === Object.prototype) {
    for (const v of Object.values(inner)) visitStrings(v, visit, secret);
  }
}

/** Every string in `value`, each with its path and whether a secret marker encloses it. */
export function stringLeaves(value: unknown, path = "", enclosedBySecret = false): StringLeaf[] {
  const secret = enclosedBySecret || isSecretValue(value);
  const inner = unwrapOnce(value);
  if (typeof inner === "string") return [{ path, text: inner, secret }];
  if (Array.isArray(inner)) return inner.flatMap((v, i) => stringLeaves(v, `${path}[${i}]`, secret));
  if (typeof inner === "object" && inner !== null && Object.getPrototypeOf(inner) === Object.prototype) {
    return Object.entries(inner).flatMap(([k, v]) => stringLeaves(v, path === "" ? k : `${path}.${k}`, secret));
  }
  return [];
}
