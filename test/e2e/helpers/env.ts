// The e2e tier's deployed env: the demo topology (stacks/Pulumi.demo.yaml) deployed on the local engine
// under its own stack name, the web stand-in beside it, and the clients the scenarios use: the gateway
// with the control token, DevTools of a computer through the gateway, `docker exec` into a container.
import { execFileSync } from "node:child_process";
import path from "node:path";
import { chromium, type Browser } from "playwright-core";
import { dockerApi, type DockerApi } from "../../../src/runner/docker-api";
import { DEPLOYER_LABEL, DEPLOYER_LABEL_VALUE, deployStack, STACK_LABEL, sweepStack, type Deployment } from "../../../src/runner/engine-deploy";
import { makeStandinCerts, startStandin, trustInBrowser } from "./web-standin";

export const REPO = path.resolve(__dirname, "../../..");
export const DEMO_STACK_FILE = path.join(REPO, "stacks/Pulumi.demo.yaml");

export interface DeployedEnv {
  stack: string;
  api: DockerApi;
  deployment: Deployment;
  gatewayUrl: string;
  token: string;
  /** A fetch to the gateway, with the control token unless `auth` is false. */
  gateway(pathAndQuery: string, init?: RequestInit & { auth?: boolean }): Promise<Response>;
  /** Playwright connected over CDP through the gateway to a computer's browser. */
  connect(computer: string): Promise<Browser>;
  /** The JSON lines of a computer's site proxy log, through the gateway. */
  proxyLog(computer: string): Promise<Record<string, any>[]>;
  teardown(): Promise<void>;
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

export async function until<T>(what: string, probe: () => Promise<T | undefined | false>, timeoutMs = 30_000, everyMs = 250): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await probe();
      if (value !== undefined && value !== false) return value;
    } catch (e) {
      last = e;
    }
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${last ? ` (last error: ${(last as Error).message})` : ""}`);
    await sleep(everyMs);
  }
}

export function dockerExec(container: string, args: string[], input?: string): string {
  return execFileSync("docker", ["exec", "-i", container, ...args], { input, encoding: "utf8", stdio: ["pipe", "pipe", "pipe"] });
}

/** Runs a node script inside a container (every multienv image has node) and returns its stdout. */
export function nodeIn(container: string, script: string): string {
  return dockerExec(container, ["node", "-e", script]);
}

/** Pids of processes in a container whose command line matches, read from /proc (the images have no ps). */
export function pidsIn(container: string, pattern: RegExp): number[] {
  const out = nodeIn(
    container,
    `const fs=require("fs");const r=[];for(const p of fs.readdirSync("/proc")){if(!/^\\d+$/.test(p))continue;try{r.push([+p,fs.readFileSync("/proc/"+p+"/cmdline","utf8").split("\\0").join(" ")])}catch{}}console.log(JSON.stringify(r))`,
  );
  return (JSON.parse(out) as [number, string][]).filter(([, cmd]) => pattern.test(cmd)).map(([pid]) => pid);
}

/** Chromium's browser process (not its renderers, zygotes or helpers). */
export const CHROMIUM_MAIN = /^\/usr\/lib\/chromium\/chromium (?!.*--type=)/;

/** kill -9 of Chromium's browser process in a browser container (the launcher restarts it). */
export async function killChromium(browserContainer: string): Promise<number[]> {
  const pids = pidsIn(browserContainer, CHROMIUM_MAIN);
  if (pids.length) dockerExec(browserContainer, ["sh", "-c", `kill -9 ${pids.join(" ")}`]);
  return pids;
}

/**
 * This run's name for an e2e stack: `<base>-<pid>`, so two test runs on one engine (two people, or an editor
 * and CI) never sweep each other's env.
 */
export function e2eStack(base: string): string {
  return `${base}-${process.pid}`;
}

/** Removes the stacks of e2e runs whose process is gone (killed before their teardown). */
export async function sweepDeadRuns(api: DockerApi): Promise<string[]> {
  const filters = encodeURIComponent(JSON.stringify({ label: [`${DEPLOYER_LABEL}=${DEPLOYER_LABEL_VALUE}`] }));
  const containers = (await api.request("GET", `/containers/json?all=1&filters=${filters}`)) as { Labels: Record<string, string> }[];
  const networks = (await api.request("GET", `/networks?filters=${filters}`)) as { Labels: Record<string, string> }[];
  const volumes = ((await api.request("GET", `/volumes?filters=${filters}`)) as { Volumes: { Labels: Record<string, string> }[] | null }).Volumes ?? [];
  const stacks = new Set([...containers, ...networks, ...volumes].map((r) => r.Labels?.[STACK_LABEL]).filter((s): s is string => typeof s === "string"));
  const dead = [...stacks].filter((stack) => {
    const match = /^e2e-.*?(\d+)$/.exec(stack);
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

export async function deployDemo(stack: string, log: (line: string) => void = () => undefined): Promise<DeployedEnv> {
  const api = dockerApi();
  await sweepDeadRuns(api);
  const deployment = await deployStack({ stack, stackFile: DEMO_STACK_FILE, api, log });
  const gatewayUrl: string = deployment.outputs.gatewayUrl;
  const token: string = deployment.outputs.controlToken;
  const gateway = (p: string, init: RequestInit & { auth?: boolean } = {}) => {
    const headers = new Headers(init.headers);
    if (init.auth !== false) headers.set("authorization", `Bearer ${token}`);
    return fetch(gatewayUrl + p, { ...init, headers });
  };
  const env: DeployedEnv = {
    stack,
    api,
    deployment,
    gatewayUrl,
    token,
    gateway,
    connect: (computer) => chromium.connectOverCDP(`${gatewayUrl}/computers/${computer}/cdp`, { headers: { authorization: `Bearer ${token}` } }),
    async proxyLog(computer) {
      const text = await (await gateway(`/computers/${computer}/proxy-log`)).text();
      return text
        .split("\n")
        .filter((l) => l.trim())
        .map((l) => JSON.parse(l));
    },
    async teardown() {
      // Like `pulumi destroy`: the capture collector's delete step runs first, then everything goes.
      await deployment.teardown();
    },
  };
  try {
    // The web stand-in answers for the live hosts on the egress network; the browsers trust its test CA.
    const certs = makeStandinCerts();
    await startStandin(api, stack, `${stack}-egress`, certs);
    const computers = Object.keys(deployment.outputs.computers);
    await Promise.all(
      computers.map(async (computer) => {
        const browser = `${stack}-${computer}-browser`;
        // The launcher creates the NSS db once the env CA is there and Chromium runs.
        const first = await until(`${browser}'s Chromium`, async () => (pidsIn(browser, CHROMIUM_MAIN).length ? pidsIn(browser, CHROMIUM_MAIN) : undefined), 60_000);
        trustInBrowser(browser, certs.caPem);
        await killChromium(browser);
        // Chromium comes back (the launcher restarts it) and reopens its start tabs, now trusting the stand-in.
        await until(`${browser}'s restarted Chromium`, async () => pidsIn(browser, CHROMIUM_MAIN).some((p) => !first.includes(p)), 60_000);
        await until(`${computer}'s DevTools through the gateway`, async () => (await gateway(`/computers/${computer}/cdp/json/version`)).ok, 60_000);
      }),
    );
  } catch (e) {
    await sweepStack(api, stack);
    throw e;
  }
  return env;
}
