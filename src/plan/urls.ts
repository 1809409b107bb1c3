// The URLs a runner uses: the gateway's, a site's routes through it, a computer's DevTools, and a service URL
// moved onto another address.
import { cdpPath, sitePath } from "../protocol/gateway-paths";
import type { PlannedWebsite } from "./types";

/**
 * Replaces the host of a service URL (a Docker name) with an address (ec2: the VM that publishes that port),
 * keeping scheme, port and path. String-based: the address may be a value not known until deploy.
 */
export function rehost(url: string, host: string): string {
  const match = /^([a-z][a-z0-9+.-]*:\/\/)(\[[^\]]*\]|[^/:?#]*)(.*)$/i.exec(url);
  if (match === null) throw new Error(`rehost: ${url} is not an absolute URL`);
  return `${match[1]}${host.includes(":") && !host.startsWith("[") ? `[${host}]` : host}${match[3]}`;
}

/** The gateway's URL as the runner reaches it: the published address and port. */
export function gatewayUrl(host: string, port: number | string): string {
  return `http://${host.includes(":") ? `[${host}]` : host}:${port}`;
}

/**
 * A site's routes through the gateway (docs/design.md "Gateway"): `/svc/<site>/` always, `/website/<site>/` for a
 * synthetic site and a replayed one (its replay server).
 */
export function siteUrls(
  gateway: string,
  site: Pick<PlannedWebsite, "name" | "live" | "replay">,
): { svcUrl: string; browseUrl?: string } {
  const svcUrl = `${gateway}${sitePath(site.name, "/")}`;
  return site.live && site.replay === undefined
    ? { svcUrl }
    : { svcUrl, browseUrl: `${gateway}${sitePath(site.name, "/", "website")}` };
}

/** A computer's Chrome DevTools endpoint through the gateway (control token required). */
export function computerCdpUrl(gateway: string, computer: string): string {
  return `${gateway}${cdpPath(computer)}`;
}
