// A destroy when SSH to a VM is gone, with the real Pulumi engine: a stand-in VM (test/helpers/standin.ts) plays
// the instance, a resource whose delete marks the VM terminated plays aws.ec2.Instance, and a network and a
// container on the stand-in's engine are `deletedWith` it, as RemoteEngines declares them on ec2. Once the
// stand-in's sshd is stopped the destroy still ends, without one call to the engine; the same resources without
// deletedWith make the destroy fail on the unreachable engine, so the test can tell.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import * as pulumi from "@pulumi/pulumi";
import { LocalWorkspace, type Stack } from "@pulumi/pulumi/automation";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { shellQuote, shipImagesCommand } from "../../src/plan/ec2";
import { sshRun, sshSetup } from "../../src/plan/ssh";
import { dockerApi } from "../../src/providers/docker-api";
import { DockerContainer, DockerNetwork, LocalCommand } from "../../src/providers/resources";
import { startStandin, type Standin } from "../helpers/standin";
import { execFileSync } from "node:child_process";
import { REPO } from "./helpers/env";

const IMAGE = "multienv/base:bookworm";
let vm: Standin;
let imageId = "";

beforeAll(async () => {
  vm = await startStandin("delwith", 13);
  imageId = execFileSync("docker", ["image", "inspect", "-f", "{{.Id}}", IMAGE]).toString().trim();
  execFileSync("/bin/sh", ["-c", shipImagesCommand([imageId], vm.ssh)]);
});
afterAll(async () => {
  await vm?.stop();
});

async function stackOf(name: string, withDeletedWith: boolean, marker: string): Promise<Stack> {
  const program = async () => {
    const engine = { host: `ssh://${vm.ssh.user}@${vm.address}`, ssh: vm.ssh };
    const machine = new LocalCommand(`${name}-vm`, { create: "true", delete: `touch ${shellQuote(marker)}` });
    const opts: pulumi.CustomResourceOptions = withDeletedWith ? { deletedWith: machine } : { dependsOn: [machine] };
    const network = new DockerNetwork(`${name}-net`, { engine, name: `${name}-net`, internal: true }, opts);
    new DockerContainer(
      `${name}-box`,
      {
        engine,
        name: `${name}-box`,
        image: imageId,
        command: ["sleep", "600"],
        networksAdvanced: [{ name: network.name }],
      },
      opts,
    );
    return {};
  };
  const stack = await LocalWorkspace.createOrSelectStack(
    { stackName: name, projectName: "multienv", program },
    { workDir: REPO, envVars: { PULUMI_SKIP_UPDATE_CHECK: "true" } },
  );
  return stack;
}

describe("destroy with the VM's SSH gone", () => {
  it("ends cleanly when the VM's resources are deletedWith it, and fails without", async () => {
    const marker = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "multienv-delwith-")), "terminated");
    const withIt = await stackOf(`delwith-a-${process.pid}`, true, marker);
    const without = await stackOf(`delwith-b-${process.pid}`, false, `${marker}-b`);
    await withIt.up();
    await without.up();
    const onVm = dockerApi({ host: `unix://${vm.dockerSocket}` });
    const running = ((await onVm.request("GET", "/containers/json")) as { Names: string[] }[]).map((c) => c.Names[0]);
    expect(running.sort()).toEqual([`/delwith-a-${process.pid}-box`, `/delwith-b-${process.pid}-box`]);

    await vm.stopSshd();
    // SSH is gone: no new connection, and the shared one the deploy used died with the server.
    expect(() =>
      execFileSync("/bin/sh", ["-c", `${sshSetup(vm.ssh)}\n${sshRun("true")}`], { stdio: "pipe" }),
    ).toThrow();
    await withIt.destroy();
    // The "instance" went (its delete ran) and nothing asked the engine for anything.
    expect(fs.existsSync(marker)).toBe(true);
    await withIt.workspace.removeStack(withIt.name);

    await expect(without.destroy()).rejects.toThrow(/ssh|not reachable/i);
    expect(fs.existsSync(`${marker}-b`)).toBe(false);
    await without.workspace.removeStack(without.name, { force: true });
    // A forced removal of a stack whose destroy failed keeps its config file.
    fs.rmSync(path.join(REPO, "stacks", `Pulumi.${without.name}.yaml`), { force: true });
    onVm.close();
  }, 600_000);
});
