// The control token on the wire: `Authorization: Bearer <token>`, compared in constant time.
// Shared by the gateway (which checks and strips it) and the runner (which sends it).
import { createHash, timingSafeEqual } from "node:crypto";

/** The realm named in the gateway's `WWW-Authenticate` challenge. */
export const CONTROL_REALM = "multienv";
export const WWW_AUTHENTICATE_CHALLENGE = `Bearer realm="${CONTROL_REALM}"`;

/** The header value a client sends to carry the control token. */
export function bearer(token: string): string {
  return `Bearer ${token}`;
}

/**
 * The token of a `Bearer <token>` Authorization value, or undefined when the value is
 * of another scheme. The scheme is case-insensitive (RFC 9110 section 11.1).
 */
export function parseBearer(value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  const match = /^bearer +(\S+) *$/i.exec(value);
  return match ? match[1] : undefined;
}

/**
 * True when `presented` equals `expected`, in time that does not depend on where they
 * differ: both are hashed first, so the compared buffers always have the same length and
 * even the token's length does not leak.
 */
export function tokensEqual(presented: string, expected: string): boolean {
  const a = createHash("sha256").update(presented, "utf8").digest();
  const b = createHash("sha256").update(expected, "utf8").digest();
  return timingSafeEqual(a, b);
}

/** True when an Authorization header value carries exactly the control token. */
export function carriesControlToken(authorization: string | undefined, controlToken: string): boolean {
  const presented = parseBearer(authorization);
  // Compare even when absent, so a missing header costs what a wrong one does.
  return tokensEqual(presented ?? "", controlToken) && presented !== undefined;
}
