// Starts the site proxy: its forward port and its control port (log, CA, the browser's DevTools), from one checked
// configuration. Tests call this in-process or spawn bin/multienv-site-proxy.js.
import type * as http from "node:http";
import * as fs from "node:fs";
import * as net from "node:net";
import * as tls from "node:tls";
import * as path from "node:path";
import { secretTokens } from "../protocol/auth";
import type { StartupRecord } from "../protocol/site-proxy";
import { createAddressCheck } from "../protocol/address-check";
import { loadOrCreateCa } from "./ca";
import type { SiteProxyConfig } from "./config";
import { ServiceConfigError } from "../protocol/service-config";
import { type Connector, createConnector } from "./connect";
import { createControlServer } from "./control";
import { type EventLog, openEventLog } from "./log";
import { parseAuthority } from "./messages";
import { OpenConnections } from "./connections";
import { createProxyServer } from "./proxy";
import { openRecorder, type RequestRecorder } from "./recorder";
import { reportEvictionsTo } from "./rotating-file";
import { createRouter } from "./routing";
import { CONFIG_ENV } from "./supervision";

export interface Endpoint {
  host: string;
  port: number;
}

export interface RunningSiteProxy {
  proxy: Endpoint;
  control: Endpoint | null;
  caCertPath: string;
  /** The startup record as written to the log. */
  startup: Omit<StartupRecord, "time">;
  log: EventLog;
  /** The request log, when the config asks for one. */
  recorder?: RequestRecorder;
  close(): Promise<void>;
}

/** How long a listener's name may take to resolve at start: Docker's DNS knows a container's aliases a moment late. */
export const LISTEN_RESOLVE_MS = 5_000;
const LISTEN_RETRY_MS = 250;

/**
 * The address a listener binds: `host` itself when it is an address, else the first address it resolves to,
 * asked again until it resolves or LISTEN_RESOLVE_MS pass (then a ServiceConfigError naming `field`).
 */
export async function listenAddress(connector: Connector, field: string, host: string): Promise<string> {
  const until = Date.now() + LISTEN_RESOLVE_MS;
  for (;;) {
    try {
      return (await connector.lookup(host, until))[0];
    } catch (err) {
      if (Date.now() + LISTEN_RETRY_MS > until) {
        throw new ServiceConfigError(
          `${CONFIG_ENV}.${field}: "${host}" does not resolve (${(err as Error).message}) after ${LISTEN_RESOLVE_MS} ms; give an address or a name this container resolves`,
        );
      }
      await new Promise((resolve) => setTimeout(resolve, LISTEN_RETRY_MS));
    }
  }
}

function listen(server: net.Server, host: string, port: number): Promise<Endpoint> {
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen({ host, port, backlog: 4096 }, () => {
      server.off("error", reject);
      resolve({ host, port: (server.address() as net.AddressInfo).port });
    });
  });
}

function closeServer(server: net.Server): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => resolve());
    (server as http.Server).closeAllConnections?.();
  });
}

/** The PEM file of the certificates recorded hosts are also trusted by, or a one-line config error. */
function readTrust(file: string): string {
  try {
    return fs.readFileSync(file, "utf8");
  } catch (err) {
    throw new ServiceConfigError(
      `${CONFIG_ENV}.record.trust: cannot read ${file} (${(err as Error).message}); give a PEM file of the certificates the recorded hosts' TLS is checked against`,
    );
  }
}

/** `token` guards the control listener; it is required when `config.control` is set. */
export async function startSiteProxy(config: SiteProxyConfig, token?: string): Promise<RunningSiteProxy> {
  const log = openEventLog(config.log);
  const ca = await loadOrCreateCa(config.ca, path.join(path.dirname(config.log), "ca.pem"));
  const connector = createConnector(config);
  const router = createRouter(config.sites, config.reach, config.record?.hosts);
  const connections = new OpenConnections();
  const secrets = token !== undefined ? secretTokens([token]) : undefined;
  // What the request log's rotation removes is said in the proxy's own log, before it goes.
  reportEvictionsTo((eviction) => log.write(eviction));
  const recorder = config.requestLog
    ? openRecorder({ ...config.requestLog, ...(secrets ? { secrets } : {}) })
    : undefined;

  const proxyServer = createProxyServer({
    router,
    connector,
    check: createAddressCheck(config),
    ca,
    log,
    gateway: new URL(config.gateway),
    idleTimeoutMs: config.idleTimeoutMs,
    headTimeoutMs: config.headTimeoutMs,
    connections,
    ...(secrets ? { secrets } : {}),
    ...(recorder ? { recorder } : {}),
    ...(config.replayed ? { replayed: config.replayed } : {}),
    ...(config.record
      ? {
          record: {
            keepCredentials: config.record.keepCredentials,
            trust: [...tls.rootCertificates, ...(config.record.trust ? [readTrust(config.record.trust)] : [])],
            ...(config.record.trustFor ? { trustFor: config.record.trustFor } : {}),
          },
        }
      : {}),
  });
  const proxy = await listen(
    proxyServer,
    await listenAddress(connector, "listen.host", config.listen.host),
    config.listen.port,
  );

  let controlServer: http.Server | undefined;
  let control: Endpoint | null = null;
  if (config.control) {
    if (token === undefined) throw new Error("the control listener needs its token");
    controlServer = createControlServer({
      logPath: config.log,
      caCertPath: ca.certPath,
      token,
      cdp: parseAuthority(config.control.cdp)!, // the schema checked host:port
      connector,
      log,
      idleTimeoutMs: config.idleTimeoutMs,
      headTimeoutMs: config.headTimeoutMs,
      connections,
      ...(config.requestLog && recorder ? { requestLog: { dir: config.requestLog.dir, recorder } } : {}),
    });
    control = await listen(
      controlServer,
      await listenAddress(connector, "control.host", config.control.host),
      config.control.port,
    );
  }

  const startup: Omit<StartupRecord, "time"> = {
    event: "startup",
    pid: process.pid,
    proxy,
    control: control && config.control ? { ...control, cdp: config.control.cdp } : null,
    caCert: ca.certPath,
    reach: config.reach,
    sites: Object.keys(config.sites),
  };
  log.write(startup);

  return {
    proxy,
    control,
    caCertPath: ca.certPath,
    startup,
    log,
    ...(recorder ? { recorder } : {}),
    async close() {
      await Promise.all([proxyServer, ...(controlServer ? [controlServer] : [])].map(closeServer));
      await Promise.all([log.close(), recorder?.close()]);
    },
  };
}
