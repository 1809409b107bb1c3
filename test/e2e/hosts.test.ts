// The hosts target with the real Pulumi engine on stand-in VMs (test/helpers/standin.ts): each a network
// namespace on this machine with its own dockerd and sshd, reached over SSH with its pinned host key. A
// synthetic site and a computer deploy across two of them (images shipped in one load each), the self-test
// passes through the computer's proxy on the other host, the gateway answers through the SSH tunnel alone, and
// a destroy removes everything from both engines. Each stand-in holds the allowlist its ec2 security group
// would (iptables from `ec2SecurityRules`), and probes from inside the computer's containers find no other way.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { dockerApi } from "../../src/providers/docker-api";
import { deployStack, destroyStack, gatewayAccess } from "../../src/runner";
import { validateStackConfig } from "../../src/config";
import { plan } from "../../src/plan";
import { ec2SecurityRules } from "../../src/plan/ec2";
import { startStandin, type Standin } from "../helpers/standin";
import { applySecurityGroup } from "../helpers/standin-firewall";
import { execFileSync } from "node:child_process";
import { e2eStack } from "./helpers/env";

const STACK = e2eStack("e2e-hosts");
let env: Standin;
let desktop: Standin;

const hostOf = (s: Standin) => ({
  address: s.address,
  user: s.ssh.user,
  hostKey: s.ssh.hostKey,
  identityFile: s.ssh.identityFile,
});
const onStandin = (s: Standin) => dockerApi({ host: `unix://${s.dockerSocket}` });

const CONFIG = () => ({
  target: "hosts",
  hosts: { env: hostOf(env), computers: { desktop: hostOf(desktop) } },
  websites: {
    shop: {
      domains: ["shop.test"],
      server: { image: "multienv/sample-shop-server" },
      frontend: { image: "multienv/sample-shop-frontend" },
    },
  },
  computers: { desktop: { network: "none", startTabs: ["https://shop.test/"] } },
});

beforeAll(async () => {
  env = await startStandin("hostenv", 11);
  desktop = await startStandin("hostpc", 12);
  // The groups an ec2 deploy of this config would get, the runner being this machine's end of each link.
  const raw = Object.fromEntries(
    Object.entries(CONFIG()).map(([k, v]) => [
      k,
      { value: typeof v === "string" ? v : JSON.stringify(v), secret: false },
    ]),
  );
  const validated = validateStackConfig(raw, STACK);
  const planned = plan(validated.config!, { stack: STACK });
  if (!planned.ok) throw new Error(JSON.stringify(planned.problems));
  const groups = ec2SecurityRules({
    ...planned.plan,
    ec2: { runnerCidrs: ["10.213.11.1/32", "10.213.12.1/32"] } as never,
  });
  const peers = { env: env.address, "computer:desktop": desktop.address };
  applySecurityGroup(env, groups.env, peers);
  applySecurityGroup(desktop, groups.computers.desktop, peers);
});
afterAll(async () => {
  await env?.stop();
  await desktop?.stop();
});

describe("hosts target on stand-in VMs", () => {
  let gatewayUrl = "";
  let token = "";

  it("deploys across the two hosts, the self-test passing through the computer's proxy", async () => {
    const lines: string[] = [];
    const deployed = await deployStack(
      {
        name: STACK,
        config: CONFIG(),
      },
      { preview: false, log: (l) => lines.push(l) },
    );
    ({ gatewayUrl, controlToken: token } = await gatewayAccess(STACK));
    // Through the SSH tunnel: the gateway's runner listener is on the env host's loopback alone.
    expect(gatewayUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    await expect(fetch(`http://${env.address}:8080/healthz`)).rejects.toThrow();
    const selfTest = deployed.outputs.selfTest as { skipped?: boolean; computers?: Record<string, unknown> };
    expect(selfTest.skipped).toBeUndefined();
    // Each engine holds its own role's containers, and nothing of the other's.
    const names = async (s: Standin) =>
      ((await onStandin(s).request("GET", "/containers/json")) as { Names: string[] }[])
        .map((c) => c.Names[0].slice(1))
        .sort();
    expect(await names(env)).toEqual([`${STACK}-gateway`, `${STACK}-shop-frontend`, `${STACK}-shop-server`]);
    expect(await names(desktop)).toEqual([`${STACK}-desktop-browser`, `${STACK}-desktop-proxy`]);
    // One SSH connection per host carried the whole deploy's engine traffic (readiness, the load, every resource).
    expect(env.sshd.logins()).toBeLessThanOrEqual(3);
  }, 900_000);

  it("serves the site and the computer's DevTools through the gateway at the env host's address", async () => {
    expect((await fetch(`${gatewayUrl}/healthz`)).status).toBe(200);
    const page = await fetch(`${gatewayUrl}/website/shop/`);
    expect(page.status).toBe(200);
    const version = await fetch(`${gatewayUrl}/computers/desktop/cdp/json/version`, {
      headers: { authorization: `Bearer ${token}` },
    });
    expect(version.status).toBe(200);
  });

  it("holds the security groups' allowlist between the hosts: from the computer's containers only the browse port of the env host", () => {
    // A TCP connect from inside a container on the computer's host, through the stand-in's namespace.
    const connect = (container: string, host: string, port: number) =>
      execFileSync("docker", [
        "-H",
        `unix://${desktop.dockerSocket}`,
        "exec",
        container,
        "node",
        "-e",
        `const s=require("net").connect(${port},${JSON.stringify(host)});s.setTimeout(3000);s.on("connect",()=>{console.log("open");process.exit(0)});s.on("timeout",()=>{console.log("timeout");process.exit(0)});s.on("error",(e)=>{console.log(e.code);process.exit(0)})`,
      ])
        .toString()
        .trim();
    const proxy = `${STACK}-desktop-proxy`;
    expect(connect(proxy, env.address, 8081)).toBe("open");
    // SSH, the gateway's runner port (on the host's loopback anyway) and the sites are not reachable.
    for (const port of [22, 8080, 9000]) expect(connect(proxy, env.address, port), `env:${port}`).not.toBe("open");
    // Nor this machine (the runner), which reaches the hosts over SSH alone.
    expect(connect(proxy, "10.213.12.1", 22)).not.toBe("open");
  });

  it("destroys everything it made on both hosts", async () => {
    await destroyStack(STACK, { remove: true });
    for (const s of [env, desktop]) {
      const api = onStandin(s);
      expect(await api.request("GET", "/containers/json?all=1")).toEqual([]);
      const networks = ((await api.request("GET", "/networks")) as { Name: string }[])
        .map((n) => n.Name)
        .filter((n) => n.startsWith(STACK));
      expect(networks).toEqual([]);
    }
  }, 600_000);
});
