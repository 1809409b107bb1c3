// Starts the site proxy: its forward port, its TCP relays (the browser's DevTools port) and its control port,
// all from one checked configuration. Tests call this in-process or spawn bin/multienv-site-proxy.js.
import * as fs from "node:fs";
import * as http from "node:http";
import * as net from "node:net";
import * as path from "node:path";
import type { StartupRecord } from "../protocol/site-proxy";
import { createAddressCheck } from "./addresses";
import { loadOrCreateCa } from "./ca";
import type { SiteProxyConfig } from "./config";
import { ConnectFailure, createConnector } from "./connect";
import { type EventLog, openEventLog } from "./log";
import { parseAuthority } from "./messages";
import { createProxyServer } from "./proxy";
import { relay } from "./relay";
import { createRouter } from "./routing";

export interface Endpoint {
  host: string;
  port: number;
}

export interface RunningSiteProxy {
  proxy: Endpoint;
  relays: (Endpoint & { target: string })[];
  control: Endpoint | null;
  caCertPath: string;
  /** The startup record as written to the log. */
  startup: Omit<StartupRecord, "time">;
  log: EventLog;
  close(): Promise<void>;
}

function listen(server: net.Server, at: Endpoint): Promise<Endpoint> {
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen({ host: at.host, port: at.port, backlog: 4096 }, () => {
      server.off("error", reject);
      const address = server.address() as net.AddressInfo;
      resolve({ host: at.host, port: address.port });
    });
  });
}

function closeServer(server: net.Server): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => resolve());
    (server as http.Server).closeAllConnections?.();
  });
}

/** The control port: the log as JSON lines and the CA certificate, for the gateway and the runner. */
function createControlServer(logPath: string, caCertPath: string): http.Server {
  return http.createServer((req, res) => {
    const url = (req.url ?? "/").split("?")[0];
    if (req.method !== "GET" && req.method !== "HEAD") {
      res.writeHead(405, { Allow: "GET, HEAD" }).end();
    } else if (url === "/log") {
      res.writeHead(200, { "Content-Type": "application/x-ndjson" });
      if (req.method === "HEAD") return void res.end();
      fs.createReadStream(logPath)
        .on("error", () => res.end())
        .pipe(res);
    } else if (url === "/ca.pem") {
      res.writeHead(200, { "Content-Type": "application/x-pem-file" });
      res.end(req.method === "HEAD" ? undefined : fs.readFileSync(caCertPath));
    } else {
      res.writeHead(404, { "Content-Type": "application/json" }).end(JSON.stringify({ error: `no ${url} here; try GET /log or GET /ca.pem` }) + "\n");
    }
  });
}

export async function startSiteProxy(config: SiteProxyConfig): Promise<RunningSiteProxy> {
  const log = openEventLog(config.log);
  const ca = await loadOrCreateCa(config.ca, path.join(path.dirname(config.log), "ca.pem"));
  const connector = createConnector(config);
  const router = createRouter(config.sites, config.reach);

  const check = createAddressCheck(config);
  const proxyServer = createProxyServer({
    router,
    connector,
    check,
    ca,
    log,
    gateway: new URL(config.gateway),
    idleTimeoutMs: config.idleTimeoutMs,
    headTimeoutMs: config.headTimeoutMs,
  });
  const proxy = await listen(proxyServer, config.listen);

  const relayServers: net.Server[] = [];
  const relays: RunningSiteProxy["relays"] = [];
  for (const spec of config.relays ?? []) {
    const target = parseAuthority(spec.target)!; // the schema checked host:port
    const server = net.createServer({ allowHalfOpen: true, noDelay: true }, (client) => {
      client.on("error", () => client.destroy());
      connector.open(target.host, target.port, { bulkReads: true }).then(
        ({ socket, bulk }) => relay(client, socket, config.idleTimeoutMs, bulk),
        (err: Error) => {
          const reason = err instanceof ConnectFailure ? err.reason : "no answer";
          log.write({ event: "failed", method: "RELAY", host: target.host, port: target.port, reason, error: err.message });
          client.destroy();
        },
      );
    });
    relayServers.push(server);
    relays.push({ ...(await listen(server, spec.listen)), target: spec.target });
  }

  let controlServer: http.Server | undefined;
  let control: Endpoint | null = null;
  if (config.control) {
    controlServer = createControlServer(config.log, ca.certPath);
    control = await listen(controlServer, config.control);
  }

  const startup: Omit<StartupRecord, "time"> = {
    event: "startup",
    pid: process.pid,
    proxy,
    relays: relays.map((r) => ({ host: r.host, port: r.port, target: r.target })),
    control,
    caCert: ca.certPath,
    reach: config.reach,
    sites: Object.keys(config.sites),
  };
  log.write(startup);

  return {
    proxy,
    relays,
    control,
    caCertPath: ca.certPath,
    startup,
    log,
    async close() {
      await Promise.all([proxyServer, ...relayServers, ...(controlServer ? [controlServer] : [])].map(closeServer));
      await log.close();
    },
  };
}
