// The site proxy's configuration (docs/design.md "Entry points", docs/contracts.md "Service config extensions"):
// one JSON object in MULTIENV_SITE_PROXY_CONFIG, checked here so a mistake is one line naming the field.
import { z } from "zod";
import { isCidr } from "./addresses";
import { CONFIG_ENV, TOKEN_ENV } from "./supervision";

const port = z.number().int().min(0).max(65535);
/** `host` an address or a name, resolved once at start and bound alone. */
const listen = z.object({ host: z.string().min(1), port }).strict();
/** `host:port`, the host possibly a bracketed IPv6 address. */
const cidrs = z.array(z.string().refine(isCidr, { error: "must be a CIDR such as 172.18.0.0/16 or fd00::/64" }));
const hostPort = z.string().regex(/^(\[[0-9a-fA-F:.]+\]|[^\s:/[\]]+):\d{1,5}$/, 'must be "host:port", e.g. "127.0.0.1:53"');

export const siteProxyConfigSchema = z
  .object({
    listen,
    gateway: z.url({ protocol: /^https?$/, error: "must be an http:// URL of the gateway, e.g. http://gateway:8080" }),
    /** Synthetic site -> the names (exact or `*.suffix`) it claims. */
    sites: z.record(z.string().min(1), z.array(z.string().min(1))),
    reach: z.union([z.literal("allow-all"), z.literal("none"), z.array(z.string().min(1))], {
      error: 'must be "allow-all", "none" or a list of host names',
    }),
    log: z.string().min(1),
    connectTimeoutMs: z.number().int().positive().default(30_000),
    idleTimeoutMs: z.number().int().positive().default(300_000),
    /** A connection whose request head (TLS handshake included, for a synthetic name) takes longer is dropped. */
    headTimeoutMs: z.number().int().positive().default(30_000),
    /** The env's own networks: never dialled, in any reach mode. */
    deny: cidrs.optional(),
    /** Ranges that may be dialled although loopback, private, shared or reserved (never overriding `deny`). */
    allowAddresses: cidrs.optional(),
    /** Static answers, checked before DNS. */
    resolve: z.record(z.string().min(1), z.array(z.union([z.ipv4(), z.ipv6()], { error: "must be an IP address" })).min(1)).optional(),
    /** DNS servers to ask instead of the system's resolver. */
    dnsServers: z.array(hostPort).min(1).optional(),
    ca: z.object({ cert: z.string().min(1), key: z.string().min(1) }).strict().optional(),
    /** The control listener (log, CA, DevTools); `cdp` is the browser's DevTools relay, `host:port`. */
    control: z.object({ host: z.string().min(1), port, cdp: hostPort }).strict().optional(),
  })
  .strict();

export type SiteProxyConfig = z.infer<typeof siteProxyConfigSchema>;

/** Thrown with a one-line message naming the field, e.g. `MULTIENV_SITE_PROXY_CONFIG.reach: must be ...`. */
export class ConfigError extends Error {}

function fieldPath(path: readonly PropertyKey[]): string {
  return path.map((key) => (typeof key === "number" ? `[${key}]` : `.${String(key)}`)).join("");
}

function valueAt(value: unknown, path: readonly PropertyKey[]): unknown {
  for (const key of path) {
    if (value === null || typeof value !== "object") return undefined;
    value = (value as Record<PropertyKey, unknown>)[key];
  }
  return value;
}

export function parseSiteProxyConfig(raw: unknown): SiteProxyConfig {
  const result = siteProxyConfigSchema.safeParse(raw);
  if (!result.success) {
    const issue = result.error.issues[0];
    let message = issue.message;
    if (issue.code !== "unrecognized_keys" && valueAt(raw, issue.path) === undefined) message = "is required";
    if (issue.code === "unrecognized_keys") message = `unknown field ${issue.keys.map((k) => `"${k}"`).join(", ")} (a typo?)`;
    throw new ConfigError(`${CONFIG_ENV}${fieldPath(issue.path)}: ${message}`);
  }
  return result.data;
}

/** Reads and checks the configuration from the environment. */
export function configFromEnv(env: NodeJS.ProcessEnv = process.env): SiteProxyConfig {
  const text = env[CONFIG_ENV];
  if (text === undefined || text.trim() === "") throw new ConfigError(`${CONFIG_ENV}: is not set; set it to the proxy's JSON configuration`);
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    throw new ConfigError(`${CONFIG_ENV}: is not JSON (${(err as Error).message})`);
  }
  return parseSiteProxyConfig(raw);
}

/** The fewest characters (whitespace not counted) the control token may have. */
export const MIN_TOKEN_LENGTH = 16;

/** Why `token` cannot guard the control listener, or undefined when it can. */
export function tokenProblem(token: string | undefined): string | undefined {
  if (token === undefined || token === "") return "is not set";
  const visible = token.replace(/\s/g, "").length;
  if (visible === 0) return "is blank";
  if (visible < token.length - visible) return "is mostly whitespace";
  // An Authorization header loses the whitespace around its value: such a token could never be presented.
  if (token.trim() !== token) return "has whitespace around it";
  if (visible < MIN_TOKEN_LENGTH) return `is shorter than ${MIN_TOKEN_LENGTH} characters`;
  return undefined;
}

/** The control listener's token from the environment, or a one-line ConfigError naming the variable. */
export function controlTokenFromEnv(env: NodeJS.ProcessEnv = process.env): string {
  const token = env[TOKEN_ENV];
  const problem = tokenProblem(token);
  if (problem) throw new ConfigError(`${TOKEN_ENV}: ${problem}; set it to the computer's control token (at least ${MIN_TOKEN_LENGTH} characters, no whitespace)`);
  return token!;
}
