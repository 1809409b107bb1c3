// A destroy when SSH to a host is gone, with the real Pulumi engine and the real components: a stand-in VM
// (test/helpers/standin.ts) is the host, RemoteEngines declares everything on it as on ec2 or hosts, and a
// real Website runs there. On ec2 the stack owns the machine: here a resource whose delete marks the VM
// terminated plays aws.ec2.Instance, handed to RemoteEngines as the host's machine, as Ec2Target does. With the
// stand-in's sshd stopped, that stack's destroy ends without one call to the engine, and its state shows every
// resource on the host deleted with the machine (the runner's own reading of it, so a resource RemoteEngines or a
// component declares without deletedWith fails this test). The same wiring without a machine (the hosts target,
// whose machines the stack does not own) cannot delete what runs there: its destroy fails within a bound, naming
// the host, and the state still holds the containers, which still run; once sshd is back, a destroy ends cleanly.
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { LocalWorkspace, type Stack } from "@pulumi/pulumi/automation";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RemoteEngines, type RemoteHost } from "../../components/hosts/remoteEngines";
import { Website } from "../../components/engine/website";
import { validateStackConfig } from "../../src/config";
import { plan } from "../../src/plan";
import { referencedProjectImages } from "../../src/plan/images";
import { shellQuote, sshRun, sshSetup } from "../../src/plan/targets/ssh";
import { engineClient, projectImagesOn } from "../../src/engines/docker";
import { LocalCommand } from "../../src/providers/resources";
import { RESOURCE_TYPES } from "../../src/protocol/resource-types";
import { hostsToReach, type StateResource } from "../../src/runner/targets/hosts/hosts-reachable";
import { startStandinVm, type StandinVm } from "../helpers/standin";
import { REPO, SAMPLE_SHOP } from "./helpers/env";

let vm: StandinVm;

beforeAll(async () => {
  vm = await startStandinVm("delwith", 13);
});
afterAll(async () => {
  await vm?.stop();
});

/** The plan of a small env on the stand-in: one synthetic site with its captures. */
function planOf(stack: string) {
  const config = {
    target: "hosts",
    captureTraffic: true,
    hosts: { env: { address: vm.address, user: vm.ssh.user, hostKey: vm.ssh.hostKey }, computers: {} },
    websites: {
      shop: SAMPLE_SHOP,
    },
    computers: {},
  };
  const raw = Object.fromEntries(
    Object.entries(config).map(([k, v]) => [
      k,
      { value: typeof v === "string" ? v : JSON.stringify(v), secret: false },
    ]),
  );
  const validated = validateStackConfig(raw, stack);
  if (validated.config === undefined) throw new Error(JSON.stringify(validated.problems));
  const planned = plan(validated.config, { stack });
  if (!planned.ok) throw new Error(JSON.stringify(planned.problems));
  return planned.plan;
}

/** RemoteEngines and a Website on the stand-in; with `marker`, the host is a machine the stack owns. */
async function stackOf(name: string, marker: string | undefined): Promise<Stack> {
  const program = async () => {
    const planned = planOf(name);
    const machine =
      marker === undefined
        ? undefined
        : new LocalCommand(`${name}-vm`, { create: "true", delete: `touch ${shellQuote(marker)}` });
    const host: RemoteHost = { ssh: vm.ssh, privateAddress: vm.address, booted: false, machine };
    const engines = new RemoteEngines(`${name}-remote`, {
      plan: planned,
      projectImages: Object.fromEntries(
        Object.entries(await projectImagesOn(referencedProjectImages(planned))).map(([role, image]) => [
          role,
          image.id,
        ]),
      ),
      runnerEngine: {},
      env: host,
      computers: {},
    });
    for (const site of planned.websites)
      new Website(`${name}-${site.name}`, { plan: planned, site, engine: engines.env, secrets: {} });
    return {};
  };
  return LocalWorkspace.createOrSelectStack(
    { stackName: name, projectName: "multienv", program },
    { workDir: REPO, envVars: { PULUMI_SKIP_UPDATE_CHECK: "true" } },
  );
}

async function stateOf(stack: Stack): Promise<StateResource[]> {
  return ((await stack.exportStack()).deployment.resources ?? []) as StateResource[];
}

const CONTAINER = RESOURCE_TYPES.container;

describe("destroy with the host's SSH gone", () => {
  it("ends cleanly when the stack owns the machine (all deleted with it); without, fails in bounded time naming the host, keeps the state, and ends once sshd is back", async () => {
    const marker = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "multienv-delwith-")), "terminated");
    const owned = await stackOf(`delwith-a-${process.pid}`, marker);
    const notOwned = await stackOf(`delwith-b-${process.pid}`, undefined);
    await owned.up();
    await notOwned.up();
    const onVm = engineClient({ host: `unix://${vm.dockerSocket}` });
    const running = async () => (await onVm.listContainers()).map((c) => c.Names[0].slice(1)).sort();
    const sites = (stack: string) => [`${stack}-shop-frontend`, `${stack}-shop-server`];
    expect((await running()).filter((n) => !n.endsWith("-capture"))).toEqual(
      [...sites(owned.name), ...sites(notOwned.name)].sort(),
    );

    // Every resource on the host's engine is deleted with the machine: none is left that a destroy must ask it for.
    const ownedState = await stateOf(owned);
    const machineUrn = ownedState.find((r) => r.urn.endsWith(`::${owned.name}-vm`))!.urn;
    expect(hostsToReach(owned.name, ownedState)).toEqual([]);
    // On the host: created with a docker provider whose engine is reached over SSH.
    const sshProviders = new Set(
      ownedState
        .filter((r) => r.type === RESOURCE_TYPES.dockerProvider && String(r.inputs?.host ?? "").startsWith("ssh://"))
        .map((r) => `${r.urn}::${r.id}`),
    );
    const onHost = ownedState.filter((r) => r.provider !== undefined && sshProviders.has(r.provider));
    expect(onHost.filter((r) => r.type === CONTAINER).length).toBeGreaterThanOrEqual(2);
    for (const r of onHost)
      expect({ urn: r.urn, deletedWith: r.deletedWith }).toEqual({ urn: r.urn, deletedWith: machineUrn });
    // Without a machine, the same resources are the host's to delete.
    const notOwnedHosts = hostsToReach(notOwned.name, await stateOf(notOwned));
    expect(notOwnedHosts.map((h) => [h.role, h.ssh.host])).toEqual([["env", vm.address]]);

    await vm.stopSshd();
    try {
      // SSH is gone: no new connection, and the shared one the deploy used died with the server.
      expect(() =>
        execFileSync("/bin/sh", ["-c", `${sshSetup(vm.ssh)}\n${sshRun("true")}`], { stdio: "pipe" }),
      ).toThrow();
      await owned.destroy();
      // The "instance" went (its delete ran) and nothing asked the engine for anything.
      expect(fs.existsSync(marker)).toBe(true);
      await owned.workspace.removeStack(owned.name);

      const started = Date.now();
      await expect(notOwned.destroy()).rejects.toThrow(new RegExp(`ssh[^\\n]*${vm.address.replace(/\./g, "\\.")}`));
      const seconds = (Date.now() - started) / 1000;
      console.log(`destroy with the host's sshd stopped failed after ${seconds.toFixed(1)} s`);
      expect(seconds).toBeLessThan(120);
      // The state claims nothing is gone that may still run: its containers are in it, and on the host they run.
      const left = await stateOf(notOwned);
      for (const name of sites(notOwned.name))
        expect(
          left.some((r) => r.type === CONTAINER && r.urn.endsWith(`::${name}`)),
          name,
        ).toBe(true);
      expect((await running()).filter((n) => n.startsWith(`${notOwned.name}-`) && !n.endsWith("-capture"))).toEqual(
        sites(notOwned.name),
      );
    } finally {
      await vm.startSshd();
    }
    await notOwned.destroy();
    // (The owned stack's containers stay on the stand-in: a real VM would have been terminated with them.)
    expect((await running()).filter((n) => n.startsWith(`${notOwned.name}-`))).toEqual([]);
    const networks = (await onVm.listNetworks()).map((n) => n.Name);
    expect(networks.filter((n) => n.startsWith(notOwned.name))).toEqual([]);
    await notOwned.workspace.removeStack(notOwned.name);
    for (const s of [owned.name, notOwned.name])
      fs.rmSync(path.join(REPO, "stacks", `Pulumi.${s}.yaml`), { force: true });
  }, 600_000);
});
