// The e2e tier's deployed env: a task stack (the demo topology of stacks/Pulumi.demo.yaml by default)
// deployed by the runner's deployStack (Automation API, real engine, the file backend of test/e2e/setup.ts)
// and torn down by its destroyStack (collect, then destroy), the web stand-in beside it, and the clients the
// scenarios use: the gateway with the control token, DevTools of a computer through the gateway, `docker
// exec` into a container.
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { chromium, type Browser } from "playwright-core";
import type Docker from "dockerode";
import { engineClient, isNotFound } from "../../../src/engines/docker";
import { GATEWAY_CONNECTIONS } from "../../../src/protocol/gateway-client";
import {
  deployStack,
  destroyStack,
  gatewayAccess,
  specFromStackFile,
  type StackOutputs,
  type StackSpec,
} from "../../../src/runner";
import { openStack } from "../../../src/runner/stack/workspace";
import { connectToInternet, makeStandinCerts, startWebStandin, trustInBrowser, type StandinCerts } from "./web-standin";
import { until } from "../../helpers/until";

export const REPO = path.resolve(__dirname, "../../..");
export const DEMO_STACK_FILE = path.join(REPO, "stacks/Pulumi.demo.yaml");
/** The label every container, network and volume of a stack carries (src/protocol/labels.ts LABELS.stack). */
export const STACK_LABEL = "multienv.stack";

/** The project's sample shop at shop.test (its server and frontend images), as a stack file's website. */
export const SAMPLE_SHOP = {
  domains: ["shop.test"],
  server: { image: "multienv/sample-shop-server" },
  frontend: { image: "multienv/sample-shop-frontend" },
} as const;

export interface DeployedEnv {
  stack: string;
  api: Docker;
  outputs: StackOutputs;
  gatewayUrl: string;
  token: string;
  /** Seconds from the start of the deploy to the gateway healthy (the deploy waits for it). */
  deploySeconds: number;
  /** Seconds of the `up` that ran the self-test once the stand-in was there (undefined when it did not run). */
  selfTestSeconds?: number;
  /** A fetch to the gateway, with the control token unless `auth` is false. */
  gateway(pathAndQuery: string, init?: RequestInit & { auth?: boolean }): Promise<Response>;
  /** Playwright connected over CDP through the gateway to a computer's browser. */
  connect(computer: string): Promise<Browser>;
  /** The JSON lines of a computer's site proxy log, through the gateway. */
  proxyLog(computer: string): Promise<Record<string, any>[]>;
  /** The resources in the stack's state (type and name), less the stack itself and the engine's default providers. */
  stateResources(): Promise<{ type: string; name: string }[]>;
  /** The engine a container or network of the stack is on (see Placement); undefined: the local one. */
  engineOf(name: string): string | undefined;
  /** A client of that engine. */
  apiOf(name: string): Docker;
  /** A container's `docker inspect`, asked of its engine. */
  inspect(container: string): Promise<any>;
  /** `docker <args>` on the engine of `container` (logs, restart), its stdout. */
  docker(container: string, args: string[]): string;
  /** The helpers of this module, run on the engine of the container. */
  exec(container: string, args: string[], input?: string): string;
  nodeIn(container: string, script: string): string;
  pidsIn(container: string, pattern: RegExp): number[];
  connectsFrom(container: string, targets: Record<string, [string, number]>): Record<string, string>;
  throughProxy(
    browserContainer: string,
    requests: Record<string, { method: "GET" | "CONNECT"; target: string }>,
  ): Record<string, { status: number; marker?: string; body?: string }>;
  /** Every container of the stack (its label), on every engine it uses: name and engine. */
  containers(): Promise<{ name: string; host: string | undefined }[]>;
  /** The web stand-in a computer's proxy reaches the web through: its container, on the computer's engine. */
  webStandin(computer: string): string;
  /** Removes the web stand-ins and their internet networks (they are the test's, not the stack's). */
  stopWebStandins(): Promise<void>;
  teardown(): Promise<void>;
}

/**
 * Where a stack's containers and networks run. Docker target: all on the local engine. Hosts target: the env's on
 * the env host, a computer's (named `<stack>-<computer>-...`) on its host.
 */
export interface Placement {
  /** The engine (a DOCKER_HOST value) a container or network named `name` is on; undefined for the local one. */
  engineOf(name: string): string | undefined;
  /** Every engine the stack uses. */
  engines: (string | undefined)[];
}

export const LOCAL_PLACEMENT: Placement = { engineOf: () => undefined, engines: [undefined] };

/**
 * The docker CLI's arguments that reach an engine: none for the local one (DOCKER_HOST or the default socket),
 * `-H <host>` for another (a stand-in VM's socket).
 */
export function dockerHostArgs(host?: string): string[] {
  return host === undefined ? [] : ["-H", host];
}

/** `docker <args>` on the engine `host` (default: the local one), its stdout. */
export function dockerCli(args: string[], host?: string): string {
  return execFileSync("docker", [...dockerHostArgs(host), ...args], {
    encoding: "utf8",
    stdio: ["ignore", "pipe", "pipe"],
  });
}

export function dockerExec(container: string, args: string[], input?: string, host?: string): string {
  return execFileSync("docker", [...dockerHostArgs(host), "exec", "-i", container, ...args], {
    input,
    encoding: "utf8",
    stdio: ["pipe", "pipe", "pipe"],
  });
}

/** Runs a node script inside a container (every multienv image has node) and returns its stdout. */
export function nodeIn(container: string, script: string, host?: string): string {
  return dockerExec(container, ["node", "-e", script], undefined, host);
}

/** Pids of processes in a container whose command line matches, read from /proc (the images have no ps). */
export function pidsIn(container: string, pattern: RegExp, host?: string): number[] {
  const out = nodeIn(
    container,
    `const fs=require("fs");const r=[];for(const p of fs.readdirSync("/proc")){if(!/^\\d+$/.test(p))continue;try{r.push([+p,fs.readFileSync("/proc/"+p+"/cmdline","utf8").split("\\0").join(" ")])}catch{}}console.log(JSON.stringify(r))`,
    host,
  );
  return (JSON.parse(out) as [number, string][]).filter(([, cmd]) => pattern.test(cmd)).map(([pid]) => pid);
}

/** Chromium's browser process (not its renderers, zygotes or helpers). */
export const CHROMIUM_MAIN = /^\/usr\/lib\/chromium\/chromium (?!.*--type=)/;

/** kill -9 of Chromium's browser process in a browser container (the launcher restarts it). */
export async function killChromium(browserContainer: string, host?: string): Promise<number[]> {
  const pids = pidsIn(browserContainer, CHROMIUM_MAIN, host);
  if (pids.length) dockerExec(browserContainer, ["sh", "-c", `kill -9 ${pids.join(" ")}`], undefined, host);
  return pids;
}

/**
 * This run's name for an e2e stack: `<base>-<pid>`, so two test runs on one engine (two people, or an editor
 * and CI) never touch each other's env.
 */
export function e2eStack(base: string): string {
  return `${base}-${process.pid}`;
}

/** The config of a stack file as a spec's config (full `namespace:key` names, structured values as given). */
export function specOf(name: string, stackFile = DEMO_STACK_FILE, override: Record<string, unknown> = {}): StackSpec {
  return specFromStackFile(stackFile, name, override);
}

/** Removes whatever a stack left on the engine: containers, networks, volumes labelled with its name. */
export async function sweepStack(api: Docker, stack: string): Promise<string[]> {
  const filters = { label: [`${STACK_LABEL}=${stack}`] };
  const removed: string[] = [];
  const ignoreGone = (e: unknown) => {
    if (!isNotFound(e)) throw e;
  };
  for (const c of await api.listContainers({ all: true, filters })) {
    await api.getContainer(c.Id).remove({ force: true, v: true }).catch(ignoreGone);
    removed.push(`container ${c.Names[0]?.replace(/^\//, "")}`);
  }
  for (const n of await api.listNetworks({ filters })) {
    await api.getNetwork(n.Id).remove().catch(ignoreGone);
    removed.push(`network ${n.Name}`);
  }
  for (const v of (await api.listVolumes({ filters })).Volumes ?? []) {
    await api.getVolume(v.Name).remove({ force: true }).catch(ignoreGone);
    removed.push(`volume ${v.Name}`);
  }
  return removed;
}

/** Removes the stacks of e2e runs whose process is gone (killed before their teardown; their state went with them). */
export async function sweepDeadRuns(api: Docker): Promise<string[]> {
  const filters = { label: [STACK_LABEL] };
  const labelled: { Labels?: Record<string, string> }[] = [
    ...(await api.listContainers({ all: true, filters })),
    ...(await api.listNetworks({ filters })),
  ];
  const stacks = new Set(
    labelled.map((r) => r.Labels?.[STACK_LABEL]).filter((s): s is string => typeof s === "string"),
  );
  const dead = [...stacks].filter((stack) => {
    const match = /^e2e[a-z0-9-]*?-(\d+)$/.exec(stack);
    if (!match) return false;
    try {
      process.kill(Number(match[1]), 0);
      return false;
    } catch {
      return true;
    }
  });
  for (const stack of dead) await sweepStack(api, stack);
  return dead;
}

/** The stack file the runner writes for a spec's stack (it stays when the stack is removed, so tests remove it). */
export function stackFileOf(stack: string): string {
  return path.join(REPO, "stacks", `Pulumi.${stack}.yaml`);
}

export interface DeployOptions {
  log?: (line: string) => void;
  /** The stack's config (default: the demo's). */
  spec?: StackSpec;
  /** Start the web stand-in and make the browsers trust its CA (default true). */
  standin?: boolean;
  /**
   * Once the stand-in is up, run `up` again with the self-test on (default true with the stand-in). The first
   * deploy skips it: the live and public hosts it checks answer only once the stand-in is connected.
   */
  selfTest?: boolean;
  /** Where the stack's containers run (default: all on the local engine). */
  placement?: Placement;
  /** The stand-in's certificates, when the spec names its CA (a recorded site's recordTrust); default: made here. */
  certs?: StandinCerts;
}

/** Deploys a stack through the runner library on the real engine, then readies the web stand-in. */
export async function deployEnv(stack: string, options: DeployOptions = {}): Promise<DeployedEnv> {
  const api = engineClient();
  const placement = options.placement ?? LOCAL_PLACEMENT;
  const apis = new Map<string | undefined, Docker>();
  const apiOn = (host: string | undefined): Docker => {
    if (host === undefined) return api;
    if (!apis.has(host)) apis.set(host, engineClient({ host }));
    return apis.get(host)!;
  };
  const apiOf = (name: string) => apiOn(placement.engineOf(name));
  const standins = new Map<string | undefined, { network: string; id: string }>();
  await sweepDeadRuns(api);
  await sweepStack(api, stack);
  const spec = options.spec ?? specOf(stack);
  const started = Date.now();
  let deployed;
  try {
    deployed = await deployStack(spec, { log: options.log, selfTest: false });
  } catch (error) {
    await sweepStack(api, stack).catch(() => undefined);
    fs.rmSync(stackFileOf(stack), { force: true });
    throw error;
  }
  const deploySeconds = (Date.now() - started) / 1000;
  const { gatewayUrl, controlToken: token } = await gatewayAccess(stack);
  const gateway = (p: string, init: RequestInit & { auth?: boolean } = {}) => {
    const headers = new Headers(init.headers);
    if (init.auth !== false) headers.set("authorization", `Bearer ${token}`);
    return fetch(gatewayUrl + p, { ...init, headers, dispatcher: GATEWAY_CONNECTIONS } as RequestInit);
  };
  const filters = { label: [`${STACK_LABEL}=${stack}`] };
  const env: DeployedEnv = {
    stack,
    api,
    engineOf: (name) => placement.engineOf(name),
    apiOf,
    inspect: (container) => apiOf(container).getContainer(container).inspect(),
    docker: (container, args) => dockerCli(args, placement.engineOf(container)),
    exec: (container, args, input) => dockerExec(container, args, input, placement.engineOf(container)),
    nodeIn: (container, script) => nodeIn(container, script, placement.engineOf(container)),
    pidsIn: (container, pattern) => pidsIn(container, pattern, placement.engineOf(container)),
    connectsFrom: (container, targets) => connectsFrom(container, targets, placement.engineOf(container)),
    throughProxy: (container, requests) => throughProxy(container, requests, placement.engineOf(container)),
    async containers() {
      const all: { name: string; host: string | undefined }[] = [];
      for (const host of placement.engines) {
        const listed = await apiOn(host).listContainers({ all: true, filters });
        all.push(...listed.map((c) => ({ name: c.Names[0].slice(1), host })));
      }
      return all;
    },
    webStandin: () => `${stack}-web-standin`,
    async stopWebStandins() {
      for (const [host, standin] of standins) {
        const on = apiOn(host);
        await on.getContainer(standin.id).remove({ force: true });
        // The proxies joined to it leave it first: a network with endpoints cannot go.
        const network = on.getNetwork(standin.network);
        const joined = ((await network.inspect()) as { Containers?: Record<string, unknown> }).Containers ?? {};
        for (const id of Object.keys(joined)) await network.disconnect({ Container: id, Force: true });
        await network.remove();
      }
      standins.clear();
    },
    outputs: deployed.outputs,
    gatewayUrl,
    token,
    deploySeconds,
    gateway,
    connect: (computer) =>
      chromium.connectOverCDP(`${gatewayUrl}/computers/${computer}/cdp`, {
        headers: { authorization: `Bearer ${token}` },
      }),
    async proxyLog(computer) {
      const text = await (await gateway(`/computers/${computer}/proxy-log`)).text();
      return text
        .split("\n")
        .filter((l) => l.trim())
        .map((l) => JSON.parse(l));
    },
    async stateResources() {
      const opened = await openStack(stack);
      const state = await opened.stack.exportStack();
      // The engine's default providers (of the dynamic resources) are its own; the docker providers are the program's.
      return ((state.deployment.resources ?? []) as { urn: string; type: string }[])
        .map((r) => ({ type: r.type, name: r.urn.split("::").at(-1)! }))
        .filter(
          (r) =>
            r.type !== "pulumi:pulumi:Stack" &&
            !(r.type.startsWith("pulumi:providers:") && r.name.startsWith("default")),
        );
    },
    async teardown() {
      // The runner's down: close the browsers, collect every capture and proxy log, then destroy.
      try {
        await destroyStack(stack, { remove: true });
      } finally {
        for (const host of placement.engines) await sweepStack(apiOn(host), stack).catch(() => undefined);
        fs.rmSync(stackFileOf(stack), { force: true });
      }
    },
  };
  if (options.standin === false) return env;
  try {
    // The web stand-in answers for the live and public hosts on the test's internet network, which the proxies
    // that reach the web are connected to; the browsers trust its test CA.
    const certs = options.certs ?? makeStandinCerts();
    const computers = Object.keys(deployed.outputs.computers);
    for (const computer of computers) {
      const proxy = `${stack}-${computer}-proxy`;
      const host = placement.engineOf(proxy);
      const info = await apiOn(host).getContainer(proxy).inspect();
      if (!Object.keys(info.NetworkSettings.Networks).includes(`${stack}-${computer}-egress`)) continue;
      // One stand-in per engine; on a remote one it runs the proxy's image (node is in every multienv image), which
      // the deploy shipped there.
      if (!standins.has(host))
        standins.set(
          host,
          await startWebStandin(
            apiOn(host),
            stack,
            certs,
            host === undefined ? {} : { image: info.Image, remote: true },
          ),
        );
      await connectToInternet(apiOn(host), standins.get(host)!.network, proxy);
    }
    await Promise.all(
      computers.map(async (computer) => {
        const browser = `${stack}-${computer}-browser`;
        const host = placement.engineOf(browser);
        // The launcher creates the NSS db once the env CA is there and Chromium runs.
        const first = await until(
          `${browser}'s Chromium`,
          async () => (pidsIn(browser, CHROMIUM_MAIN, host).length ? pidsIn(browser, CHROMIUM_MAIN, host) : undefined),
          60_000,
          250,
        );
        trustInBrowser(browser, certs.caPem, host);
        await killChromium(browser, host);
        // Chromium comes back (the launcher restarts it) and reopens its start tabs, now trusting the stand-in.
        await until(
          `${browser}'s restarted Chromium`,
          async () => pidsIn(browser, CHROMIUM_MAIN, host).some((p) => !first.includes(p)),
          60_000,
          250,
        );
        await until(
          `${computer}'s DevTools through the gateway`,
          async () => (await gateway(`/computers/${computer}/cdp/json/version`)).ok,
          60_000,
          250,
        );
      }),
    );
    if (options.selfTest !== false) {
      const started = Date.now();
      env.outputs = (await deployStack(spec, { log: options.log })).outputs;
      env.selfTestSeconds = (Date.now() - started) / 1000;
    }
  } catch (e) {
    await env.teardown().catch(() => undefined);
    throw e;
  }
  return env;
}

/** The demo task (stacks/Pulumi.demo.yaml) under `stack`. */
export function deployDemo(stack: string, log?: (line: string) => void): Promise<DeployedEnv> {
  return deployEnv(stack, { log });
}

/** Each address a container has, by network name. */
export async function addressesOf(api: Docker, container: string): Promise<Record<string, string>> {
  const info = await api.getContainer(container).inspect();
  return Object.fromEntries(
    Object.entries(info.NetworkSettings.Networks as Record<string, { IPAddress: string }>).map(([n, v]) => [
      n,
      v.IPAddress,
    ]),
  );
}

/** A node script that connects to each target and prints `{name: "connected" | error code | "timeout"}`. */
export function connectProbeScript(targets: Record<string, [string, number]>): string {
  return `
    const net = require("net");
    const targets = ${JSON.stringify(targets)};
    Promise.all(Object.entries(targets).map(([k, [host, port]]) => new Promise((resolve) => {
      // A name of another network never resolves here; its lookup would take the resolver's full timeout.
      setTimeout(() => resolve([k, "timeout"]), 4000).unref();
      const s = net.connect({ host, port, timeout: 3000 });
      s.on("connect", () => { s.destroy(); resolve([k, "connected"]); });
      s.on("timeout", () => { s.destroy(); resolve([k, "timeout"]); });
      s.on("error", (e) => resolve([k, e.code]));
    }))).then((r) => { console.log(JSON.stringify(Object.fromEntries(r))); process.exit(0); });`;
}

/**
 * TCP connects from inside `container` to each target (`[host, port]`), at once: `connected`, or why not
 * (`ECONNREFUSED`, `EHOSTUNREACH`, `timeout`, a lookup error). Every multienv image has node.
 */
export function connectsFrom(
  container: string,
  targets: Record<string, [string, number]>,
  host?: string,
): Record<string, string> {
  return JSON.parse(nodeIn(container, connectProbeScript(targets), host)) as Record<string, string>;
}

/**
 * A node script sending requests through a computer's site proxy (at `site-proxy:3128`, the name its computer
 * dials), as the agent's page would send them: `GET <absolute URL>` or `CONNECT host:port`. Prints each answer's
 * status and X-Agentenv-Site-Proxy marker.
 */
export function throughProxyScript(requests: Record<string, { method: "GET" | "CONNECT"; target: string }>): string {
  return `
    const http = require("http");
    const requests = ${JSON.stringify(requests)};
    Promise.all(Object.entries(requests).map(([k, r]) => new Promise((resolve) => {
      setTimeout(() => resolve([k, { status: 0, body: "timeout" }]), 8000).unref();
      const req = http.request({ host: "site-proxy", port: 3128, method: r.method, path: r.target, headers: r.method === "CONNECT" ? { host: r.target } : {} });
      const done = (res, body) => resolve([k, { status: res.statusCode, marker: res.headers["x-agentenv-site-proxy"], body: body.slice(0, 200) }]);
      req.on("connect", (res, socket) => { socket.destroy(); done(res, ""); });
      req.on("response", (res) => { let b = ""; res.on("data", (c) => (b += c)); res.on("end", () => done(res, b)); });
      req.on("error", (e) => resolve([k, { status: 0, body: e.code }]));
      req.end();
    }))).then((r) => { console.log(JSON.stringify(Object.fromEntries(r))); process.exit(0); });`;
}

/** throughProxyScript run inside a computer's browser container. */
export function throughProxy(
  browserContainer: string,
  requests: Record<string, { method: "GET" | "CONNECT"; target: string }>,
  host?: string,
): Record<string, { status: number; marker?: string; body?: string }> {
  return JSON.parse(nodeIn(browserContainer, throughProxyScript(requests), host));
}
