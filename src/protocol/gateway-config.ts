// The gateway's JSON config (MULTIENV_GATEWAY_CONFIG): its one schema, read by the gateway and built by the plan
// (src/plan/services.ts builds values of GatewayConfigInput).
import { availableParallelism } from "node:os";
import { z } from "zod";
import { CAPTURE_CONTAINER_PATTERN, parseCaptureContainer } from "./traffic";

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
  /** The site proxy's request log on that listener (GET), e.g. http://shop-agent-proxy:9000/requests. */
  requests: httpUrl.optional(),
  /**
   * Where the gateway tells the site proxy that a person holds the computer (PUT) or handed it back (DELETE), e.g.
   * http://shop-agent-proxy:9000/person: its request log marks the person's exchanges. A takeover is refused when
   * the proxy cannot be told.
   */
  person: httpUrl.optional(),
});

/**
 * How long the gateway keeps an idle client connection open (its listeners' keep-alive timeout, announced to each
 * client as `Keep-Alive: timeout=65`).
 */
export const GATEWAY_IDLE_CONNECTION_MS = 65_000;

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
    /** The captures folder the capture sidecars write (docker: one volume, mounted read-only). */
    capturesDir: z.string().min(1).optional(),
    /**
     * Instead of `capturesDir` (kubernetes: each website container's captures stay in its own pod): the base URL of
     * each website container's capture server, by `<site>-<role>`, e.g. `{"shop-server": "http://shop-server:8090"}`.
     * One for every website container, none for another. The gateway reads each with
     * `captureServerToken(control token, container)`.
     */
    captureSources: z.record(z.string(), httpUrl).optional(),
    computers: z
      .record(z.string().regex(siteName, "a computer name is lowercase letters, digits and dashes"), computerSchema)
      .default({}),
    /**
     * Replayed sites' replay servers: site -> the base URL of its control listener, e.g.
     * `{"shop": "http://shop-replay:9000"}`. The runner's `/replay/v1/<site>/counters` and `/replay/v1/<site>/reset`
     * are forwarded there with `replayServerToken(control token, site)`.
     */
    replays: z.record(z.string(), httpUrl).default({}),
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
    /**
     * /healthz: a capture file modified this recently counts as writing (else it must grow during the check). With
     * `captureSources` each capture server applies its own (its config's `captureFreshMs`).
     */
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
    if (config.capturesDir !== undefined && config.captureSources !== undefined) {
      ctx.addIssue({
        code: "custom",
        path: ["captureSources"],
        message:
          "capturesDir and captureSources are both set; set one: capturesDir (one captures folder) or captureSources (a capture server per container)",
      });
    } else if (config.captureSources !== undefined) {
      const containers = websiteContainers(config.sites);
      for (const container of Object.keys(config.captureSources)) {
        const parsed = parseCaptureContainer(container);
        if (!parsed)
          ctx.addIssue({
            code: "custom",
            path: ["captureSources", container],
            message: "not a website container; a key is <site>-server or <site>-frontend",
          });
        else if (!containers.includes(container))
          ctx.addIssue({
            code: "custom",
            path: ["captureSources", container],
            message: Object.hasOwn(config.sites, parsed.site)
              ? `site ${parsed.site} has no ${parsed.role} container; remove this source`
              : `no site ${parsed.site} in sites; remove this source or add the site`,
          });
      }
      const missing = containers.filter((container) => !Object.hasOwn(config.captureSources!, container));
      if (missing.length > 0)
        ctx.addIssue({
          code: "custom",
          path: ["captureSources"],
          message: `no capture server for ${missing.join(", ")}; every website container needs one`,
        });
    }
    for (const site of Object.keys(config.replays)) {
      if (!Object.hasOwn(config.sites, site))
        ctx.addIssue({
          code: "custom",
          path: ["replays", site],
          message: `no site ${site} in sites; remove this replay server or add the site`,
        });
    }
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

/** The website containers of `sites`, as captures name them: every site's server, and its frontend when it has one. */
export function websiteContainers(sites: Record<string, { frontend?: unknown }>): string[] {
  return Object.entries(sites).flatMap(([site, upstreams]) =>
    upstreams.frontend ? [`${site}-server`, `${site}-frontend`] : [`${site}-server`],
  );
}

export type GatewayConfig = z.output<typeof gatewayConfigSchema>;
export type GatewayConfigInput = z.input<typeof gatewayConfigSchema>;
export type SiteUpstreams = GatewayConfig["sites"][string];

/**
 * A capture server's environment (the gateway image's second bundle, /opt/multienv/capture-server.js, run in each
 * website container's pod beside its tcpdump): its JSON config and its token, `captureServerToken(control token,
 * container)`.
 */
export const CAPTURE_SERVER_ENV = {
  config: "MULTIENV_CAPTURE_SERVER_CONFIG",
  token: "MULTIENV_CAPTURE_TOKEN",
} as const;

export const captureServerConfigSchema = z.strictObject({
  listen: z.strictObject({ host: bindHost.default("0.0.0.0"), port }),
  /** The pod's captures folder, which tcpdump writes. */
  capturesDir: z.string().min(1),
  /** The website container whose captures these are, `<site>-<role>`: no file of another is listed or served. */
  container: z.string().regex(CAPTURE_CONTAINER_PATTERN, "a website container: <site>-server or <site>-frontend"),
  /** /healthz: a capture file modified this recently counts as writing (else it must grow between two checks). */
  captureFreshMs: z.number().int().positive().default(30_000),
  /** A connection whose request head has not all arrived this long after it began is answered 408 and closed. */
  headersTimeoutMs: z.number().int().positive().default(20_000),
});

export type CaptureServerConfig = z.output<typeof captureServerConfigSchema>;
