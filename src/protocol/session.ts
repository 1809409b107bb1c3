// A site's session: what `GET /svc/<site>/session` answers, in Playwright's storage-state shape
// (`browserContext.storageState()`), so a session saved by Playwright can be served as it is and the runner
// can load it into a computer's browser over DevTools. The live site's server produces it; the runner reads it.
import { z } from "zod";

/** The path, relative to a site server's root, of its session (the gateway serves it at `/svc/<site>/session`). */
export const SESSION_PATH = "/session";

const sessionCookieSchema = z.object({
  name: z.string().min(1),
  value: z.string(),
  /** A host (`github.com`) or, for a cookie its subdomains receive too, a leading-dot domain (`.github.com`). */
  domain: z.string().min(1),
  path: z.string().default("/"),
  /** Unix time in seconds; -1 for a session cookie. */
  expires: z.number().default(-1),
  httpOnly: z.boolean().default(false),
  secure: z.boolean().default(false),
  sameSite: z.enum(["Strict", "Lax", "None"]).default("Lax"),
});

const sessionOriginSchema = z.object({
  /** Scheme, host and port: `https://github.com`. */
  origin: z.string().url(),
  localStorage: z.array(z.object({ name: z.string(), value: z.string() })).default([]),
});

export const storageStateSchema = z.object({
  cookies: z.array(sessionCookieSchema).default([]),
  origins: z.array(sessionOriginSchema).default([]),
});

/** Playwright's storage state: cookies and each origin's local storage. */
export type StorageState = z.infer<typeof storageStateSchema>;

/** The storage state in `value`, or a one-line reason naming the first bad field. */
export function parseStorageState(value: unknown): { ok: true; state: StorageState } | { ok: false; problem: string } {
  const result = storageStateSchema.safeParse(value);
  if (result.success) return { ok: true, state: result.data };
  const issue = result.error.issues[0];
  const path = issue.path
    .map((p) => (typeof p === "number" ? `[${p}]` : `.${String(p)}`))
    .join("")
    .replace(/^\./, "");
  return { ok: false, problem: `${path || "(root)"}: ${issue.message}` };
}
