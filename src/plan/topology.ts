// Docker names, ports and paths of the topology (docs/contracts.md "Docker topology names", "Ports and paths").
// The one place these are spelled; components and service configs read them from here.

export const GATEWAY_PORT = 8080;
export const SITE_PROXY_PORT = 3128;
export const CDP_PORT = 9222;
export const SITE_PROXY_CONTROL_PORT = 9000;
export const CAPTURES_DIR = "/captures";
export const CA_DIR = "/var/lib/multienv/ca";
export const CA_CERT_PATH = "/var/lib/multienv/ca/ca.pem";
export const CA_KEY_PATH = "/var/lib/multienv/ca-private/ca-key.pem";
export const SITE_PROXY_LOG_PATH = "/var/log/multienv/site-proxy.log";
export const CONNECT_TIMEOUT_MS = 30_000;
export const IDLE_TIMEOUT_MS = 300_000;
export const LISTEN_ALL = "0.0.0.0";

export type SiteRole = "server" | "frontend";

export const topologyNames = {
  envNetwork: (stack: string) => `${stack}-env`,
  egressNetwork: (stack: string) => `${stack}-egress`,
  ingressNetwork: (stack: string) => `${stack}-ingress`,
  computerNetwork: (stack: string, computer: string) => `${stack}-${computer}-net`,
  capturesVolume: (stack: string) => `${stack}-captures`,
  caVolume: (stack: string, computer: string) => `${stack}-${computer}-ca`,
  gateway: (stack: string) => `${stack}-gateway`,
  siteContainer: (stack: string, site: string, role: SiteRole) => `${stack}-${site}-${role}`,
  /** The name a site container answers to on the env network, whatever the stack. */
  siteAlias: (site: string, role: SiteRole) => `${site}-${role}`,
  capture: (stack: string, site: string, role: SiteRole) => `${stack}-${site}-${role}-capture`,
  captureFilePrefix: (site: string, role: SiteRole) => `${site}-${role}.pcap`,
  browser: (stack: string, computer: string) => `${stack}-${computer}-browser`,
  siteProxy: (stack: string, computer: string) => `${stack}-${computer}-proxy`,
};
