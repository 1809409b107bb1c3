// The gateway's JSON config (MULTIENV_GATEWAY_CONFIG): its one schema, read by the gateway and built by the plan
// (src/plan/services.ts builds values of GatewayConfigInput).
import { availableParallelism } from "node:os";
import { z } from "zod";

const siteName = /^[a-z0-9][a-z0-9-]*$/;

const httpUrl = z
  .string()
  .refine((value) => URL.canParse(value) && new URL(value).protocol === "http:", { message: "expected an http:// URL" })
  .transform((value) => new URL(value));

const siteSchema = z.strictObject({
  server: httpUrl,
  frontend: httpUrl.optional(),
  live: z.boolean().default(false),
});

/** A host name (resolved at start) or an address to bind on. */
const bindHost = z
  .string()
  .min(1)
  .regex(/^[A-Za-z0-9.:_-]+$/, "a host name or an IP address");
const port = z.number().int().min(0).max(65535);

const computerSchema = z.strictObject({
  /** DevTools through the computer's site-proxy control listener, e.g. http://shop-agent-proxy:9000/cdp. */
  cdp: httpUrl,
  /** The site proxy's log on that listener (GET), e.g. http://shop-agent-proxy:9000/log. */
  proxyLog: httpUrl.optional(),
  /**
   * Ends every connection the computer's site proxy holds (POST), e.g. http://shop-agent-proxy:9000/connections/end.
   */
  endConnections: httpUrl.optional(),
});

export const gatewayConfigSchema = z
  .strictObject({
    /** The published listener: everything the gateway serves. */
    listen: z.strictObject({ host: bindHost.default("0.0.0.0"), port }),
    /** The browse listener, bound on each of `hosts`: synthetic sites' /website/<site>/ and nothing else. */
    browse: z
      .strictObject({
        hosts: z
          .array(bindHost)
          .min(1, "at least one host")
          .refine((hosts) => new Set(hosts).size === hosts.length, "a host listed twice"),
        port,
      })
      .optional(),
    sites: z.record(z.string().regex(siteName, "a site name is lowercase letters, digits and dashes"), siteSchema),
    capturesDir: z.string().min(1).optional(),
    computers: z
      .record(z.string().regex(siteName, "a computer name is lowercase letters, digits and dashes"), computerSchema)
      .default({}),
    /** Before an upstream accepts the connection. */
    connectTimeoutMs: z.number().int().positive().default(10_000),
    /** An upstream exchange with no bytes either way for this long is cut. Not a ceiling on the whole exchange. */
    idleTimeoutMs: z.number().int().positive().default(60_000),
    /**
     * A client connection whose request head has not all arrived this long after it began is answered 408 and closed.
     */
    headersTimeoutMs: z.number().int().positive().default(20_000),
    /** How long a listener's host name may take to resolve at start (retried while it fails). */
    resolveTimeoutMs: z.number().int().positive().default(10_000),
    /** /healthz: a capture file modified this recently counts as writing (else it must grow during the check). */
    captureFreshMs: z.number().int().positive().default(30_000),
    /**
     * Processes serving requests (node cluster workers); 1 serves from the main process. By default one per core
     * less one, at least one: the gateway shares its machine with the env's browsers, site proxies and sites, and
     * workers that outnumber the cores left to them spend more CPU on each request (on 2 cores, 2 workers took a
     * third more per request than 1, for a quarter more requests per second at 64 connections).
     */
    workers: z
      .number()
      .int()
      .min(1)
      .max(64)
      .default(() => Math.max(1, availableParallelism() - 1)),
  })
  .superRefine((config, ctx) => {
    for (const [name, site] of Object.entries(config.sites)) {
      if (site.live && site.frontend) {
        ctx.addIssue({
          code: "custom",
          path: ["sites", name, "frontend"],
          message: "a live site has no frontend; remove it or set live: false",
        });
      }
    }
  });

export type GatewayConfig = z.output<typeof gatewayConfigSchema>;
export type GatewayConfigInput = z.input<typeof gatewayConfigSchema>;
export type SiteUpstreams = GatewayConfig["sites"][string];
