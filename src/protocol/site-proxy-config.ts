// The site proxy's JSON config (MULTIENV_SITE_PROXY_CONFIG): its one schema, read by the proxy and built by the
// plan (src/plan/services.ts builds values of SiteProxyConfigInput).
import ipaddr from "ipaddr.js";
import { z } from "zod";
import { DEFAULT_REQUEST_LOG_BODY_BYTES } from "./request-log";

const port = z.number().int().min(0).max(65535);
/** `host` an address or a name, resolved once at start and bound alone. */
const listen = z.object({ host: z.string().min(1), port }).strict();
/** `host:port`, the host possibly a bracketed IPv6 address. */
const cidrs = z.array(
  z.string().refine((text) => ipaddr.isValidCIDR(text), { error: "must be a CIDR such as 172.18.0.0/16 or fd00::/64" }),
);
const hostPort = z
  .string()
  .regex(/^(\[[0-9a-fA-F:.]+\]|[^\s:/[\]]+):\d{1,5}$/, 'must be "host:port", e.g. "127.0.0.1:53"');

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
    resolve: z
      .record(z.string().min(1), z.array(z.union([z.ipv4(), z.ipv6()], { error: "must be an IP address" })).min(1))
      .optional(),
    /** DNS servers to ask instead of the system's resolver. */
    dnsServers: z.array(hostPort).min(1).optional(),
    ca: z
      .object({ cert: z.string().min(1), key: z.string().min(1) })
      .strict()
      .optional(),
    /**
     * The request log (every exchange the proxy decrypts, as HAR entries): absent, nothing is recorded. `dir` holds
     * its rotating files, `computer` names the computer in each entry; a body is kept up to `bodyLimitBytes` (its
     * whole size and SHA-256 always), and the values of the headers and cookies named in `redact` (any case) never.
     */
    requestLog: z
      .object({
        dir: z.string().min(1),
        computer: z.string().min(1),
        bodyLimitBytes: z.number().int().nonnegative().default(DEFAULT_REQUEST_LOG_BODY_BYTES),
        redact: z.array(z.string().min(1)).default([]),
        /** A file is closed and the next begun once it holds this many bytes. */
        fileBytes: z
          .number()
          .int()
          .positive()
          .default(64 * 1024 * 1024),
        /** Files kept: the oldest is removed as one more begins. */
        files: z.number().int().min(1).default(8),
      })
      .strict()
      .optional(),
    /**
     * Live hosts whose HTTPS is opened here to be recorded (exact or `*.suffix`; only those the computer reaches):
     * TLS is terminated with a leaf from the env CA and each request sent on over TLS verified against the trust
     * store (Node's bundled roots, and `trust`, a PEM file, when given; each of `trustFor`'s PEM for its hosts alone).
     * Their credentials' values (cookies, Authorization and other credential headers) are kept out of the request log
     * unless `keepCredentials` names the host.
     */
    record: z
      .object({
        hosts: z.array(z.string().min(1)).min(1),
        keepCredentials: z.array(z.string().min(1)).default([]),
        trust: z.string().min(1).optional(),
        /** PEM certificates trusted besides those, each for its hosts alone (a recorded site's `recordTrust`). */
        trustFor: z
          .array(z.object({ hosts: z.array(z.string().min(1)).min(1), pem: z.string().min(1) }).strict())
          .optional(),
      })
      .strict()
      .optional(),
    /**
     * Sites of `sites` served from a recording (the gateway's frontend for them is a replay server): their misses get
     * a `replay-miss` line in the log.
     */
    replayed: z.array(z.string().min(1)).optional(),
    /** The control listener (log, CA, DevTools); `cdp` is the browser's DevTools relay, `host:port`. */
    control: z
      .object({ host: z.string().min(1), port, cdp: hostPort })
      .strict()
      .optional(),
  })
  .strict();

export type SiteProxyConfig = z.output<typeof siteProxyConfigSchema>;
export type SiteProxyConfigInput = z.input<typeof siteProxyConfigSchema>;
