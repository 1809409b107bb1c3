// The JSON configs the containers' services read (docs/design.md "Entry points" and docs/contracts.md extensions).
// Pure data from a Plan, typed by the services' own schemas (src/protocol/*-config.ts), so the plan writes
// exactly what the services read.
import {
  CA_CERT_PATH,
  CA_KEY_PATH,
  CAPTURES_DIR,
  CDP_PORT,
  CONNECT_TIMEOUT_MS,
  GATEWAY_BROWSE_PORT,
  IDLE_TIMEOUT_MS,
  SITE_PROXY_CONTROL_PORT,
  SITE_PROXY_LOG_PATH,
  SITE_PROXY_PORT,
  SITE_PROXY_REQUEST_LOG_DIR,
  networkAliases,
} from "./topology";
import type { BrowserConfigInput } from "../protocol/browser-config";
import type { GatewayConfigInput } from "../protocol/gateway-config";
import { SITE_PROXY_CONTROL_PATHS } from "../protocol/site-proxy";
import type { SiteProxyConfigInput } from "../protocol/site-proxy-config";
import type { Plan, PlannedComputer, PlannedWebsite } from "./types";
import { replayControlUrl, replayUrl } from "./replay";
import { rehost } from "./urls";
import { KUBERNETES_NON_PUBLIC_CIDRS } from "./targets/kubernetes";

export interface HostPort {
  host: string;
  port: number;
}

/** `MULTIENV_GATEWAY_CONFIG` as the plan writes it: the schema's input, with what the plan always sets required. */
export type GatewayServiceConfig = GatewayConfigInput & {
  listen: HostPort;
  /**
   * Each computer's site-proxy control listener: DevTools, the proxy log and (when the env keeps one) the request
   * log, behind the computer's token.
   */
  computers: Record<
    string,
    { cdp: string; proxyLog: string; endConnections: string; requests?: string; person?: string }
  >;
};

/**
 * `MULTIENV_SITE_PROXY_CONFIG` as the plan writes it (`deny` is filled in at deploy, when the engine gives subnets).
 */
export type SiteProxyServiceConfig = SiteProxyConfigInput & {
  connectTimeoutMs: number;
  idleTimeoutMs: number;
  ca: { cert: string; key: string };
  /** The control listener (log, CA, DevTools), for the gateway alone. */
  control: HostPort & { cdp: string };
};

/** `MULTIENV_BROWSER_CONFIG` as the plan writes it. */
export type BrowserServiceConfig = BrowserConfigInput & { startTabs: string[]; cdpPort: number };

/** Where a site's server answers on the env network: the gateway's upstream, and its frontend's own server. */
export function siteServerUrl(website: Pick<PlannedWebsite, "server">): string {
  return `http://${website.server.alias}:${website.server.port}`;
}

/**
 * `MULTIENV_GATEWAY_CONFIG`: sites by their env-network aliases, computers by their site proxies' control
 * listeners. docker: the browse listener on each computer's link network; ec2: on the ingress network, published
 * on the env VM for the computer VMs (their addresses are filled in at deploy).
 */
export function gatewayServiceConfig(plan: Plan): GatewayServiceConfig {
  const sites: GatewayServiceConfig["sites"] = {};
  const replays: Record<string, string> = {};
  for (const website of plan.websites) {
    // A replayed live site is, for the gateway, a synthetic site whose frontend is its replay server.
    const frontend = website.replay
      ? replayUrl(website.replay)
      : website.frontend
        ? `http://${website.frontend.alias}:${website.frontend.port}`
        : undefined;
    sites[website.name] = {
      server: siteServerUrl(website),
      ...(frontend ? { frontend } : {}),
      live: website.live && website.replay === undefined,
    };
    if (website.replay) replays[website.name] = replayControlUrl(website.replay);
  }
  const computers: GatewayServiceConfig["computers"] = {};
  for (const computer of plan.computers) {
    const control = `http://${networkAliases.proxyOnLink(computer.name)}:${SITE_PROXY_CONTROL_PORT}`;
    computers[computer.name] = {
      cdp: control + SITE_PROXY_CONTROL_PATHS.cdp,
      proxyLog: control + SITE_PROXY_CONTROL_PATHS.log,
      endConnections: control + SITE_PROXY_CONTROL_PATHS.endConnections,
      ...(plan.requestLog
        ? { requests: control + SITE_PROXY_CONTROL_PATHS.requests, person: control + SITE_PROXY_CONTROL_PATHS.person }
        : {}),
    };
  }
  const browseHosts =
    plan.target === "docker"
      ? plan.computers.map((c) => networkAliases.gatewayOnLink(c.name))
      : [networkAliases.gatewayIngress];
  return {
    listen: { host: networkAliases.gatewayIngress, port: plan.gateway.port },
    ...(plan.computers.length > 0 ? { browse: { hosts: browseHosts, port: GATEWAY_BROWSE_PORT } } : {}),
    sites,
    ...(Object.keys(replays).length > 0 ? { replays } : {}),
    ...(plan.capture.enabled ? { capturesDir: CAPTURES_DIR } : {}),
    computers,
  };
}

/**
 * Whether a proxy reaches the gateway under its own computer's name (`gateway-<computer>`): on docker the name of
 * the gateway on that computer's link network, on kubernetes a name the proxy's pod maps to the gateway's Service.
 */
function linksComputers(plan: Pick<Plan, "target">): boolean {
  return plan.target === "docker" || plan.target === "kubernetes";
}

function findComputer(plan: Plan, computer: string | PlannedComputer): PlannedComputer {
  const name = typeof computer === "string" ? computer : computer.name;
  const found = plan.computers.find((c) => c.name === name);
  if (found === undefined) throw new Error(`plan of stack ${plan.stack} has no computer ${JSON.stringify(name)}`);
  return found;
}

/**
 * `MULTIENV_SITE_PROXY_CONFIG` for one computer's site proxy, before the deploy adds what only the engine knows
 * (`siteProxyConfigOnHosts`).
 */
export function siteProxyServiceConfig(plan: Plan, computer: string | PlannedComputer): SiteProxyServiceConfig {
  const c = findComputer(plan, computer);
  const gatewayHost = linksComputers(plan) ? networkAliases.gatewayOnLink(c.name) : networkAliases.gatewayIngress;
  return {
    listen: { host: networkAliases.proxyOnComputerNet, port: SITE_PROXY_PORT },
    gateway: `http://${gatewayHost}:${GATEWAY_BROWSE_PORT}`,
    sites: structuredClone(c.siteTable),
    reach: Array.isArray(c.reaching) ? [...c.reaching] : c.reaching,
    log: SITE_PROXY_LOG_PATH,
    connectTimeoutMs: CONNECT_TIMEOUT_MS,
    idleTimeoutMs: IDLE_TIMEOUT_MS,
    ca: { cert: CA_CERT_PATH, key: CA_KEY_PATH },
    control: {
      host: networkAliases.proxyOnLink(c.name),
      port: SITE_PROXY_CONTROL_PORT,
      cdp: `${networkAliases.browserOnComputerNet}:${CDP_PORT}`,
    },
    ...recordedHosts(plan),
    ...replayedSites(plan, c),
    ...(plan.requestLog
      ? {
          requestLog: {
            dir: SITE_PROXY_REQUEST_LOG_DIR,
            computer: c.name,
            bodyLimitBytes: plan.requestLog.bodyLimitBytes,
            redact: [...plan.requestLog.redact],
          },
        }
      : {}),
  };
}

/**
 * The gateway's config once the computers' hosts are known (remote targets): each computer's control endpoints at
 * its host's address. A computer without an address (the docker target) keeps its network alias.
 */
export function gatewayConfigOnHosts(
  config: GatewayServiceConfig,
  computerAddresses: Record<string, string | undefined>,
): GatewayServiceConfig {
  const computers = { ...config.computers };
  for (const [computer, address] of Object.entries(computerAddresses)) {
    if (address === undefined) continue;
    const endpoints = computers[computer];
    computers[computer] = {
      cdp: rehost(endpoints.cdp, address),
      proxyLog: rehost(endpoints.proxyLog, address),
      endConnections: rehost(endpoints.endConnections, address),
      ...(endpoints.requests !== undefined ? { requests: rehost(endpoints.requests, address) } : {}),
      ...(endpoints.person !== undefined ? { person: rehost(endpoints.person, address) } : {}),
    };
  }
  return { ...config, computers };
}

/**
 * Docker's own address pools when its daemon is given none (`default-address-pools`): 172.17-31.0.0/16 and
 * 192.168.0.0/16. Every bridge network an engine creates takes its subnet from its pools, and the bridge's gateway
 * address is the engine's machine itself.
 */
export const DOCKER_DEFAULT_ADDRESS_POOLS = [
  ...Array.from({ length: 15 }, (_, i) => `172.${17 + i}.0.0/16`),
  "192.168.0.0/16",
];

/** What the deploy learns of a machine that runs one of the env's engines. */
export interface EngineMachine {
  /** Every address the machine has on its own interfaces (not Docker's bridges), IPv4 or IPv6, or a CIDR of them. */
  addresses: string[];
  /** The engine's address pools (CIDRs): every network it makes, and so every bridge gateway, is inside them. */
  addressPools: string[];
}

/**
 * The machines of the env's engines as far as the deploy knows them before they exist: on the docker target the
 * local engine's (asked of it; Docker's own pools when it could not be); on remote targets each host's engine has
 * Docker's own pools (the VMs the ec2 target boots are configured so; a hosts machine given other pools must guard
 * them with its firewall), their addresses being the hosts' (`siteProxyConfigOnHosts`).
 */
export function engineMachines(plan: Pick<Plan, "target">, local: EngineMachine | undefined): EngineMachine[] {
  // A cluster's pods, Services and nodes are on addresses the deploy cannot list: every non-public range then.
  if (plan.target === "kubernetes")
    return [
      { addresses: [], addressPools: [...KUBERNETES_NON_PUBLIC_CIDRS.ipv4, ...KUBERNETES_NON_PUBLIC_CIDRS.ipv6] },
    ];
  if (plan.target === "docker") return [local ?? { addresses: [], addressPools: DOCKER_DEFAULT_ADDRESS_POOLS }];
  return [{ addresses: [], addressPools: DOCKER_DEFAULT_ADDRESS_POOLS }];
}

/** A CIDR for one address: /32 or /128. */
function hostCidr(address: string): string {
  return `${address}/${address.includes(":") ? 128 : 32}`;
}

/**
 * A site proxy's config once the env exists. It never dials an address of a machine that runs the env's engines,
 * on any port, whatever its reach: not the engine's networks (this stack's or another's: every subnet of the
 * engine's address pools, whose bridge gateways are the machine itself), not the machine's own interfaces, and on
 * remote targets not the env host and any computer's host, its own among them. There, `gateway` is the env host's
 * address.
 */
export function siteProxyConfigOnHosts(
  config: SiteProxyServiceConfig,
  known: {
    subnets: string[];
    envHost: string | undefined;
    computerHosts: (string | undefined)[];
    machines: EngineMachine[];
  },
): SiteProxyServiceConfig {
  const hosts = [known.envHost, ...known.computerHosts, ...known.machines.flatMap((m) => m.addresses)].filter(
    (a): a is string => a !== undefined,
  );
  const deny = [
    ...known.subnets,
    ...known.machines.flatMap((m) => m.addressPools),
    ...hosts.map((a) => (a.includes("/") ? a : hostCidr(a))),
  ];
  return {
    ...config,
    deny: [...new Set(deny)],
    ...(known.envHost === undefined ? {} : { gateway: rehost(config.gateway, known.envHost) }),
  };
}

/**
 * The live hosts a site proxy opens to record: every recorded live site's domains and allowHosts (the proxy records
 * only those its computer reaches), and those whose credentials the log keeps.
 */
function recordedHosts(plan: Plan): Pick<SiteProxyServiceConfig, "record"> {
  if (plan.requestLog === undefined) return {};
  const recorded = plan.websites.filter((w) => w.live && w.record);
  if (recorded.length === 0) return {};
  const hosts = (ws: PlannedWebsite[]) => ws.flatMap((w) => [...w.domains, ...w.allowHosts]);
  const trusted = recorded.filter((w) => w.record!.trust !== undefined);
  return {
    record: {
      hosts: hosts(recorded),
      keepCredentials: hosts(recorded.filter((w) => w.record!.keepCredentials)),
      ...(trusted.length > 0 ? { trustFor: trusted.map((w) => ({ hosts: hosts([w]), pem: w.record!.trust! })) } : {}),
    },
  };
}

/** The sites of the computer's site table served from a recording: their misses get `replay-miss` lines. */
function replayedSites(plan: Plan, c: PlannedComputer): Pick<SiteProxyServiceConfig, "replayed"> {
  const replayed = plan.websites.filter((w) => w.replay !== undefined && Object.hasOwn(c.siteTable, w.name));
  return replayed.length > 0 ? { replayed: replayed.map((w) => w.name) } : {};
}

/** `MULTIENV_BROWSER_CONFIG` for one computer's browser. */
export function browserServiceConfig(plan: Plan, computer: string | PlannedComputer): BrowserServiceConfig {
  const c = findComputer(plan, computer);
  return {
    proxy: `http://${networkAliases.proxyOnComputerNet}:${SITE_PROXY_PORT}`,
    startTabs: [...c.startTabs],
    cdpHost: networkAliases.browserOnComputerNet,
    cdpPort: CDP_PORT,
    caFile: CA_CERT_PATH,
    // Absent when headless, so a headless computer's container (its env, and so the engine's idea of it) is unchanged.
    ...(c.headful ? { headful: true } : {}),
  };
}
