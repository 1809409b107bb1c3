// The hosts target with the real Pulumi engine on stand-in VMs (test/helpers/standin.ts): each a network
// namespace on this machine with its own dockerd and sshd, reached over SSH with its pinned host key. A
// synthetic site and a computer deploy across two of them (images shipped in one load each), the self-test
// passes through the computer's proxy on the other host, the gateway answers at the env host's address, and a
// destroy removes everything from both engines.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { dockerApi } from "../../src/providers/docker-api";
import { deployStack, destroyStack, gatewayAccess } from "../../src/runner";
import { startStandin, type Standin } from "../helpers/standin";
import { e2eStack } from "./helpers/env";

const STACK = e2eStack("e2e-hosts");
let env: Standin;
let desktop: Standin;

const hostOf = (s: Standin) => ({ address: s.address, user: s.ssh.user, hostKey: s.ssh.hostKey, identityFile: s.ssh.identityFile });
const onStandin = (s: Standin) => dockerApi({ host: `unix://${s.dockerSocket}` });

beforeAll(async () => {
  env = await startStandin("hostenv", 11);
  desktop = await startStandin("hostpc", 12);
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
        config: {
          target: "hosts",
          hosts: { env: hostOf(env), computers: { desktop: hostOf(desktop) } },
          websites: { shop: { domains: ["shop.test"], server: { image: "multienv/sample-shop-server" }, frontend: { image: "multienv/sample-shop-frontend" } } },
          computers: { desktop: { network: "none", startTabs: ["https://shop.test/"] } },
        },
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
    const names = async (s: Standin) => ((await onStandin(s).request("GET", "/containers/json")) as { Names: string[] }[]).map((c) => c.Names[0].slice(1)).sort();
    expect(await names(env)).toEqual([`${STACK}-gateway`, `${STACK}-shop-frontend`, `${STACK}-shop-server`]);
    expect(await names(desktop)).toEqual([`${STACK}-desktop-browser`, `${STACK}-desktop-proxy`]);
    // One SSH connection per host carried the whole deploy's engine traffic (readiness, the load, every resource).
    expect(env.sshd.logins()).toBeLessThanOrEqual(3);
  }, 900_000);

  it("serves the site and the computer's DevTools through the gateway at the env host's address", async () => {
    expect((await fetch(`${gatewayUrl}/healthz`)).status).toBe(200);
    const page = await fetch(`${gatewayUrl}/website/shop/`);
    expect(page.status).toBe(200);
    const version = await fetch(`${gatewayUrl}/computers/desktop/cdp/json/version`, { headers: { authorization: `Bearer ${token}` } });
    expect(version.status).toBe(200);
  });

  it("destroys everything it made on both hosts", async () => {
    await destroyStack(STACK, { remove: true });
    for (const s of [env, desktop]) {
      const api = onStandin(s);
      expect(await api.request("GET", "/containers/json?all=1")).toEqual([]);
      const networks = ((await api.request("GET", "/networks")) as { Name: string }[]).map((n) => n.Name).filter((n) => n.startsWith(STACK));
      expect(networks).toEqual([]);
    }
  }, 600_000);
});
