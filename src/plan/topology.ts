// Docker names, ports and paths of the topology (docs/contracts.md "Docker topology names", "Ports and paths").
// The one place these are spelled; components and service configs read them from here.

/** The gateway's published listener: the runner's (everything the gateway serves). */
export const GATEWAY_PORT = 8080;
/** The gateway's browse listener: synthetic sites' `/website/<site>/` and nothing else, for the site proxies. */
export const GATEWAY_BROWSE_PORT = 8081;
export const SITE_PROXY_PORT = 3128;
export const CDP_PORT = 9222;
export const SITE_PROXY_CONTROL_PORT = 9000;
export const CAPTURES_DIR = "/captures";
export const CA_DIR = "/var/lib/multienv/ca";
export const CA_CERT_PATH = "/var/lib/multienv/ca/ca.pem";
export const CA_KEY_PATH = "/var/lib/multienv/ca-private/ca-key.pem";
export const SITE_PROXY_LOG_PATH = "/var/log/multienv/site-proxy.log";
/** The site proxy's request log: its rotating files of HAR entries. */
export const SITE_PROXY_REQUEST_LOG_DIR = "/var/log/multienv/requests";
/**
 * A replay server's listeners: the site's (the gateway's frontend upstream) and its control one (the gateway's). Not
 * the gateway's runner port (8080): on a cluster the replay server is behind a Service, and no Service carries that.
 */
export const REPLAY_PORT = 8070;
export const REPLAY_CONTROL_PORT = 9000;
/** Where a recording image holds its HAR file. */
export const RECORDING_PATH = "/var/lib/multienv/recording/recording.har";
/** Where a replay server keeps its episode across a restart (its image makes it, owned by the server's user). */
export const REPLAY_STATE_DIR = "/var/lib/multienv/replay-state";
export const CONNECT_TIMEOUT_MS = 30_000;
export const IDLE_TIMEOUT_MS = 300_000;

export type SiteRole = "server" | "frontend";

export const topologyNames = {
  envNetwork: (stack: string) => `${stack}-env`,
  egressNetwork: (stack: string) => `${stack}-egress`,
  ingressNetwork: (stack: string) => `${stack}-ingress`,
  computerNetwork: (stack: string, computer: string) => `${stack}-${computer}-net`,
  /** Internal: the gateway and one computer's site proxy, nothing else. */
  linkNetwork: (stack: string, computer: string) => `${stack}-${computer}-link`,
  /** Reaches the web: one computer's site proxy alone (only when the computer reaches public hosts). */
  computerEgressNetwork: (stack: string, computer: string) => `${stack}-${computer}-egress`,
  capturesVolume: (stack: string) => `${stack}-captures`,
  caVolume: (stack: string, computer: string) => `${stack}-${computer}-ca`,
  gateway: (stack: string) => `${stack}-gateway`,
  siteContainer: (stack: string, site: string, role: SiteRole) => `${stack}-${site}-${role}`,
  /** The name a site container answers to on the env network, whatever the stack. */
  siteAlias: (site: string, role: SiteRole) => `${site}-${role}`,
  /** A replayed live site's replay server, and the name it answers to on the env network. */
  replayContainer: (stack: string, site: string) => `${stack}-${site}-replay`,
  replayAlias: (site: string) => `${site}-replay`,
  capture: (stack: string, site: string, role: SiteRole) => `${stack}-${site}-${role}-capture`,
  captureFilePrefix: (site: string, role: SiteRole) => `${site}-${role}.pcap`,
  browser: (stack: string, computer: string) => `${stack}-${computer}-browser`,
  siteProxy: (stack: string, computer: string) => `${stack}-${computer}-proxy`,
};

/**
 * Names a service answers to on one network only. Resolved inside the container that carries one, such a name
 * gives that container's address on that network, so a listener bound to it is reachable there and nowhere else.
 */
export const networkAliases = {
  /** The gateway on the ingress network: its published listener. */
  gatewayIngress: "gateway-ingress",
  /** The gateway on a computer's link network: its browse listener, for that computer's proxy. */
  gatewayOnLink: (computer: string) => `gateway-${computer}`,
  /** A computer's site proxy on its link network: its control listener (log, CA, DevTools), for the gateway. */
  proxyOnLink: (computer: string) => `proxy-${computer}`,
  /** The site proxy on its computer's network: its forward port, for the browser. */
  proxyOnComputerNet: "site-proxy",
  /** The browser on its computer's network: its DevTools relay, for the proxy. */
  browserOnComputerNet: "browser",
};
