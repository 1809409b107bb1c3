// The demo topology (stacks/Pulumi.demo.yaml) on the hosts target, with the real Pulumi engine, on three stand-in
// VMs (test/helpers/standin.ts: a network namespace each with its own dockerd and sshd, reached over SSH with its
// pinned host key): the env (gateway, sites) on one, each computer on its own. Each stand-in holds the allowlist
// its ec2 security group would (iptables from `ec2SecurityRules`). One deploy serves the demo scenarios
// (demo/), the gateway reached through the SSH tunnel alone, then what only remote hosts have:
// one SSH connection per host, the firewall between them, a destroy with a host's sshd gone (refused in one line,
// nothing deleted) and, once it is back and the tunnel is down, a plain destroy whose capture collector brings the
// tunnel up and stores every capture before anything goes.
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import type { EngineEvent } from "@pulumi/pulumi/automation";
import type { Browser } from "playwright-core";
import YAML from "yaml";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { validateStackConfig } from "../../src/config";
import { plan } from "../../src/plan";
import { ec2SecurityRules } from "../../src/plan/targets/ec2";
import { sshSetup, tunnelDownLines, type GatewayTunnel } from "../../src/plan/targets/ssh";
import { engineClient } from "../../src/engines/docker";
import { destroyStack, type StackSpec } from "../../src/runner";
import { openStack } from "../../src/runner/stack/workspace";
import { startStandinVm, type StandinVm } from "../helpers/standin";
import { applyContainerHostGuard, applySecurityGroup } from "../helpers/standin-firewall";
import { demoSuites } from "./demo/suites";
import {
  DEMO_STACK_FILE,
  deployEnv,
  e2eStack,
  specOf,
  stackFileOf,
  type DeployedEnv,
  type Placement,
} from "./helpers/env";

const STACK = e2eStack("e2e-hosts");
const ARTIFACTS = path.resolve(__dirname, "../../artifacts", STACK);
const COMPUTERS = ["desktop", "open"] as const;
/** Stand-in numbers (10.213.<n>.0/24) of this file's hosts; other files use others. */
const INDEX = { env: 21, desktop: 22, open: 23 };

let hosts: { env: StandinVm; desktop: StandinVm; open: StandinVm };
let env: DeployedEnv;
let spec: StackSpec;
let stackFile: string;
let destroyed = false;
const browsers: Browser[] = [];

const hostOf = (s: StandinVm) => ({
  address: s.address,
  user: s.ssh.user,
  hostKey: s.ssh.hostKey,
  identityFile: s.ssh.identityFile,
});
const engineOf = (s: StandinVm) => `unix://${s.dockerSocket}`;

/** A computer's containers and networks (`<stack>-<computer>-...`) are on its host, everything else on the env's. */
function placement(): Placement {
  return {
    engineOf(name) {
      for (const c of COMPUTERS) if (name.startsWith(`${STACK}-${c}-`)) return engineOf(hosts[c]);
      return engineOf(hosts.env);
    },
    engines: [hosts.env, hosts.desktop, hosts.open].map(engineOf),
  };
}

/** The groups an ec2 deploy of this config would get, the runner being this machine's end of each link. */
function applySecurityGroups(): void {
  const raw = Object.fromEntries(
    Object.entries(spec.config).map(([k, v]) => [
      k.replace(/^multienv:/, ""),
      { value: typeof v === "string" ? v : JSON.stringify(v), secret: false },
    ]),
  );
  const validated = validateStackConfig(raw, STACK);
  if (validated.config === undefined) throw new Error(JSON.stringify(validated.problems));
  const planned = plan(validated.config, { stack: STACK });
  if (!planned.ok) throw new Error(JSON.stringify(planned.problems));
  const groups = ec2SecurityRules({
    ...planned.plan,
    ec2: { runnerCidrs: Object.values(INDEX).map((i) => `10.213.${i}.1/32`) } as never,
  });
  const peers = {
    env: hosts.env.address,
    "computer:desktop": hosts.desktop.address,
    "computer:open": hosts.open.address,
  };
  applySecurityGroup(hosts.env, groups.env, peers);
  for (const c of COMPUTERS) applySecurityGroup(hosts[c], groups.computers[c], peers);
  // And each host's own guard against its containers, as ec2 user data installs it (a hosts machine's firewall must).
  for (const s of Object.values(hosts)) applyContainerHostGuard(s);
}

async function stackContainers(s: StandinVm): Promise<string[]> {
  return (await engineClient({ host: engineOf(s) }).listContainers({ all: true }))
    .map((c) => c.Names[0].slice(1))
    .sort();
}

beforeAll(async () => {
  fs.rmSync(ARTIFACTS, { recursive: true, force: true });
  const [envHost, desktop, open] = await Promise.all([
    startStandinVm("hdenv", INDEX.env),
    startStandinVm("hdpc", INDEX.desktop),
    startStandinVm("hdopen", INDEX.open),
  ]);
  hosts = { env: envHost, desktop, open };
  spec = specOf(STACK, DEMO_STACK_FILE, {
    "multienv:target": "hosts",
    "multienv:hosts": {
      env: hostOf(hosts.env),
      computers: { desktop: hostOf(hosts.desktop), open: hostOf(hosts.open) },
    },
  });
  // As on the local engine: gist.github.com's server declares no reset operation (so a reset restarts it).
  const websites = spec.config["multienv:websites"] as Record<string, { settings?: Record<string, unknown> }>;
  websites.gist.settings = { ...websites.gist.settings, declareReset: false };
  applySecurityGroups();
  stackFile = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "multienv-e2e-hosts-")), `Pulumi.${STACK}.yaml`);
  fs.writeFileSync(stackFile, YAML.stringify({ config: spec.config }));
  const started = Date.now();
  env = await deployEnv(STACK, { spec, placement: placement() });
  console.log(
    `hosts demo: deploy ${env.deploySeconds.toFixed(1)} s (images shipped to three hosts), ready with the self-test ${((Date.now() - started) / 1000).toFixed(1)} s`,
  );
}, 900_000);

afterAll(async () => {
  await Promise.all(browsers.map((b) => b.close().catch(() => undefined)));
  try {
    if (env && !destroyed) await env.teardown().catch((e: Error) => console.log(`teardown: ${e.message}`));
  } finally {
    fs.rmSync(stackFileOf(STACK), { force: true });
    fs.rmSync(ARTIFACTS, { recursive: true, force: true });
    if (stackFile) fs.rmSync(path.dirname(stackFile), { recursive: true, force: true });
    await Promise.all(Object.values(hosts ?? {}).map((s) => s.stop()));
  }
}, 300_000);

describe("the demo multi env on the hosts target (three stand-in VMs)", () => {
  demoSuites({
    stack: STACK,
    artifacts: ARTIFACTS,
    env: () => env,
    spec: () => spec,
    stackFile: () => stackFile,
    browsers,
    machines: (computer) => {
      const own = hosts[computer as "desktop" | "open"];
      const other = hosts[computer === "desktop" ? "open" : "desktop"];
      return {
        envHostSsh: [hosts.env.address, 22],
        envHostRunner: [hosts.env.address, 8080],
        envHostBrowse: [hosts.env.address, 8081],
        ownHostSsh: [own.address, 22],
        ownHostControl: [own.address, 9000],
        otherComputerHostControl: [other.address, 9000],
        runner: [own.address.replace(/\.2$/, ".1"), 22],
      };
    },
    remote: {
      get envAddress() {
        return hosts.env.address;
      },
      get computerAddress() {
        return { desktop: hosts.desktop.address, open: hosts.open.address };
      },
      tunnelPort: () => Number(new URL(env.gatewayUrl).port),
      siteProbes: () => {
        const probes: Record<string, [string, number]> = {};
        for (const c of COMPUTERS)
          for (const port of [3128, 9000, 9222, 22, 80]) probes[`${c}Host:${port}`] = [hosts[c].address, port];
        probes["envHost:22"] = [hosts.env.address, 22];
        probes["envHost:8080"] = [hosts.env.address, 8080];
        probes["envHost:8081"] = [hosts.env.address, 8081];
        return probes;
      },
      // A live site's server is on the egress network: it leaves by the env host's address, which each computer
      // host's firewall lets reach its control port (for the gateway). That listener wants the control token.
      tokenGuarded: (site) => (site === "github-server" ? COMPUTERS.map((c) => `${c}Host:9000`) : []),
    },
  });

  it("carried each host's engine traffic over one shared SSH connection (and the tunnel's own)", () => {
    const logins = Object.fromEntries(Object.entries(hosts).map(([role, s]) => [role, s.sshd.logins()]));
    console.log(`hosts demo: SSH logins per host over the whole run: ${JSON.stringify(logins)}`);
    // Two ups, a reset, the scenarios' restarts: a connection per resource or per request would be hundreds.
    for (const [role, count] of Object.entries(logins))
      expect({ role, count: count <= 8 }).toEqual({ role, count: true });
  });

  it("serves the gateway through the SSH tunnel alone: neither listener answers this machine at the env host's address", async () => {
    expect((await fetch(`${env.gatewayUrl}/healthz`)).status).toBe(200);
    for (const port of [8080, 8081])
      await expect(
        fetch(`http://${hosts.env.address}:${port}/healthz`, { signal: AbortSignal.timeout(3000) }),
        `env host :${port}`,
      ).rejects.toThrow();
  });

  it("holds the security groups' allowlist between the hosts: a computer's proxy reaches the env host's browse port alone", () => {
    const results = env.connectsFrom(`${STACK}-desktop-proxy`, {
      browse: [hosts.env.address, 8081],
      ssh: [hosts.env.address, 22],
      runner: [hosts.env.address, 8080],
      control: [hosts.env.address, 9000],
      otherComputer: [hosts.open.address, 9000],
      runnerMachine: [`10.213.${INDEX.desktop}.1`, 22],
    });
    expect(results.browse).toBe("connected");
    for (const [target, result] of Object.entries(results))
      if (target !== "browse") expect({ target, result }).not.toEqual({ target, result: "connected" });
  });

  it("refuses a destroy while a host's sshd is gone, within a bound, in one line naming the host, and deletes nothing", async () => {
    const before = (await env.stateResources()).length;
    const running = await stackContainers(hosts.open);
    expect(running).toEqual([`${STACK}-open-browser`, `${STACK}-open-proxy`, `${STACK}-web-standin`]);
    await hosts.open.stopSshd();
    try {
      const started = Date.now();
      const error = await destroyStack(STACK).then(
        () => undefined,
        (e: Error) => e,
      );
      const seconds = (Date.now() - started) / 1000;
      console.log(`hosts demo: destroy refused after ${seconds.toFixed(1)} s: ${error?.message}`);
      expect(error?.message).toMatch(
        new RegExp(
          `^stack ${STACK}: not destroyed, nothing collected or deleted: computer open's host \\(\\S+@${hosts.open.address.replace(/\./g, "\\.")}\\) does not answer over SSH \\(.*Connection refused.*\\); .*run \`multienv down ${STACK}\` again`,
        ),
      );
      expect(error?.message).not.toContain("\n");
      expect(seconds).toBeLessThan(60);
      // The state still holds every resource, and on the host everything still runs.
      expect((await env.stateResources()).length).toBe(before);
      expect(await stackContainers(hosts.open)).toEqual(running);
      expect(fs.existsSync(path.join(ARTIFACTS, "traffic"))).toBe(false);
    } finally {
      await hosts.open.startSshd();
    }
  });

  it("with sshd back and the gateway tunnel down, a plain destroy stores every capture before anything goes, and leaves nothing on any host", async () => {
    await Promise.all(browsers.splice(0).map((b) => b.close().catch(() => undefined)));
    await env.stopWebStandins();
    const opened = await openStack(STACK);
    const tunnel = (await opened.stack.outputs()).gatewayTunnel.value as GatewayTunnel;
    // As a new shell (or a reboot) finds it: the tunnel is down and the gateway URL answers nothing.
    execFileSync("/bin/sh", [
      "-c",
      `${sshSetup(tunnel.ssh).split("\n").slice(0, -1).join("\n")}\n${tunnelDownLines(tunnel.localPort)}`,
    ]);
    await expect(fetch(`${env.gatewayUrl}/healthz`, { signal: AbortSignal.timeout(3000) })).rejects.toThrow();

    // `pulumi destroy` itself, not the runner's down (which collects first): only the collector's delete step stores.
    const steps: { op: string; urn: string; at: "pre" | "done" }[] = [];
    const onEvent = (event: EngineEvent) => {
      const pre = event.resourcePreEvent?.metadata;
      if (pre) steps.push({ op: pre.op, urn: pre.urn, at: "pre" });
      const done = event.resOutputsEvent?.metadata;
      if (done) steps.push({ op: done.op, urn: done.urn, at: "done" });
    };
    const started = Date.now();
    await opened.stack.destroy({ onEvent });
    destroyed = true;
    console.log(`hosts demo: plain destroy ${((Date.now() - started) / 1000).toFixed(1)} s`);
    const collector = steps.findIndex(
      (s) => s.at === "done" && s.urn.endsWith(`::${STACK}-capture-collector-delete-step`),
    );
    expect(collector).toBeGreaterThanOrEqual(0);
    // No container, network or volume was deleted before the collector's delete step had finished.
    const firstEngineDelete = steps.findIndex(
      (s) =>
        s.op === "delete" &&
        s.at === "pre" &&
        /docker:index\/(container:Container|network:Network|volume:Volume)::/.test(s.urn),
    );
    expect(firstEngineDelete).toBeGreaterThan(collector);
    const stored = fs.readdirSync(path.join(ARTIFACTS, "traffic"));
    for (const c of ["shop-server", "shop-frontend", "github-server", "gist-server", "gist-frontend"])
      expect(stored).toContain(`${c}.pcap0`);
    await opened.stack.workspace.removeStack(STACK, { preserveConfig: true });
    // Nothing is left on any host's engine: no container, no network but Docker's own.
    for (const s of Object.values(hosts)) {
      expect(await stackContainers(s)).toEqual([]);
      const api = engineClient({ host: engineOf(s) });
      const networks = (await api.listNetworks()).map((n) => n.Name);
      const volumes = (await api.listVolumes()).Volumes ?? [];
      expect(networks.filter((n) => !["bridge", "host", "none"].includes(n))).toEqual([]);
      expect(volumes.map((v) => v.Name)).toEqual([]);
    }
  }, 600_000);
});
