// The JSON configs the containers' services read (DESIGN "Entry points" and docs/contracts.md extensions).
// Pure data from a Plan; the services parse them with their own schemas (src/gateway/config.ts,
// src/site-proxy/config.ts), so field names here follow the contract exactly.
import {
  CA_CERT_PATH,
  CA_KEY_PATH,
  CAPTURES_DIR,
  CDP_PORT,
  CONNECT_TIMEOUT_MS,
  IDLE_TIMEOUT_MS,
  LISTEN_ALL,
  SITE_PROXY_CONTROL_PORT,
  SITE_PROXY_LOG_PATH,
  SITE_PROXY_PORT,
} from "./topology";
import type { Plan, PlannedComputer, Reaching } from "./types";

export interface HostPort {
  host: string;
  port: number;
}

export interface GatewayServiceConfig {
  listen: HostPort;
  sites: Record<string, { server: string; frontend?: string; live: boolean }>;
  capturesDir?: string;
  computers: Record<string, { cdp: string; proxyLog: string }>;
}

export interface SiteProxyServiceConfig {
  listen: HostPort;
  gateway: string;
  sites: Record<string, string[]>;
  reach: Reaching;
  log: string;
  connectTimeoutMs: number;
  idleTimeoutMs: number;
  ca: { cert: string; key: string };
  relays: { listen: HostPort; target: string }[];
  control: HostPort;
}

export interface BrowserServiceConfig {
  proxy: string;
  startTabs: string[];
  cdpPort: number;
  caFile: string;
}

/** `MULTIENV_GATEWAY_CONFIG`: sites by their env-network aliases, computers by their site proxies. */
export function gatewayServiceConfig(plan: Plan): GatewayServiceConfig {
  const sites: GatewayServiceConfig["sites"] = {};
  for (const website of plan.websites) {
    sites[website.name] = {
      server: `http://${website.server.alias}:${website.server.port}`,
      ...(website.frontend ? { frontend: `http://${website.frontend.alias}:${website.frontend.port}` } : {}),
      live: website.live,
    };
  }
  const computers: GatewayServiceConfig["computers"] = {};
  for (const computer of plan.computers) {
    computers[computer.name] = {
      cdp: `http://${computer.proxyContainerName}:${CDP_PORT}`,
      proxyLog: `http://${computer.proxyContainerName}:${SITE_PROXY_CONTROL_PORT}/log`,
    };
  }
  return {
    listen: { host: LISTEN_ALL, port: plan.gateway.port },
    sites,
    ...(plan.capture.enabled ? { capturesDir: CAPTURES_DIR } : {}),
    computers,
  };
}

function findComputer(plan: Plan, computer: string | PlannedComputer): PlannedComputer {
  const name = typeof computer === "string" ? computer : computer.name;
  const found = plan.computers.find((c) => c.name === name);
  if (found === undefined) throw new Error(`plan of stack ${plan.stack} has no computer ${JSON.stringify(name)}`);
  return found;
}

/** `MULTIENV_SITE_PROXY_CONFIG` for one computer's site proxy. */
export function siteProxyServiceConfig(plan: Plan, computer: string | PlannedComputer): SiteProxyServiceConfig {
  const c = findComputer(plan, computer);
  return {
    listen: { host: LISTEN_ALL, port: SITE_PROXY_PORT },
    gateway: `http://${plan.gateway.containerName}:${plan.gateway.port}`,
    sites: structuredClone(c.siteTable),
    reach: Array.isArray(c.reaching) ? [...c.reaching] : c.reaching,
    log: SITE_PROXY_LOG_PATH,
    connectTimeoutMs: CONNECT_TIMEOUT_MS,
    idleTimeoutMs: IDLE_TIMEOUT_MS,
    ca: { cert: CA_CERT_PATH, key: CA_KEY_PATH },
    relays: [{ listen: { host: LISTEN_ALL, port: CDP_PORT }, target: `${c.browserContainerName}:${CDP_PORT}` }],
    control: { host: LISTEN_ALL, port: SITE_PROXY_CONTROL_PORT },
  };
}

/** `MULTIENV_BROWSER_CONFIG` for one computer's browser. */
export function browserServiceConfig(plan: Plan, computer: string | PlannedComputer): BrowserServiceConfig {
  const c = findComputer(plan, computer);
  return {
    proxy: `http://${c.proxyContainerName}:${SITE_PROXY_PORT}`,
    startTabs: [...c.startTabs],
    cdpPort: CDP_PORT,
    caFile: CA_CERT_PATH,
  };
}
