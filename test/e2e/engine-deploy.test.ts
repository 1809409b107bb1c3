// The e2e deploy itself on the engine: a failed deploy says why and leaves nothing, and the sweep that
// runs before every deploy removes what a killed run left behind.
import path from "node:path";
import { describe, expect, it } from "vitest";
import { dockerApi } from "../../src/runner/docker-api";
import { e2eStack, sweepDeadRuns } from "./helpers/env";
import { DEPLOYER_LABEL, DEPLOYER_LABEL_VALUE, deployStack, STACK_LABEL, sweepStack } from "../../src/runner/engine-deploy";

const api = dockerApi();

async function leftovers(stack: string): Promise<number> {
  const filters = encodeURIComponent(JSON.stringify({ label: [`${STACK_LABEL}=${stack}`] }));
  const containers = (await api.request("GET", `/containers/json?all=1&filters=${filters}`)) as unknown[];
  const networks = (await api.request("GET", `/networks?filters=${filters}`)) as unknown[];
  const volumes = ((await api.request("GET", `/volumes?filters=${filters}`)) as { Volumes: unknown[] | null }).Volumes ?? [];
  return containers.length + networks.length + volumes.length;
}

describe("e2e deploy", () => {
  it("fails naming an image that is not on the engine, and removes what it had created", async () => {
    const stack = e2eStack("e2e-missing-image");
    const deploy = deployStack({ stack, stackFile: path.join(__dirname, "fixtures/Pulumi.missing-image.yaml"), api });
    await expect(deploy).rejects.toThrow(/image multienv\/no-such-image-for-e2e is not on the engine; build it with `npm run images`/);
    expect(await leftovers(stack)).toBe(0);
  }, 120_000);

  it("sweeps a stack's leftovers: containers, networks and volumes it labelled", async () => {
    const stack = e2eStack("e2e-sweep");
    const Labels = { [STACK_LABEL]: stack, [DEPLOYER_LABEL]: DEPLOYER_LABEL_VALUE };
    await api.request("POST", "/networks/create", { Name: `${stack}-net`, Internal: true, Labels });
    await api.request("POST", "/volumes/create", { Name: `${stack}-vol`, Labels });
    const c = await api.request<{ Id: string }>("POST", `/containers/create?name=${stack}-c`, {
      Image: "multienv/node-base",
      Cmd: ["node", "-e", "setInterval(() => {}, 1000)"],
      Labels,
      HostConfig: { NetworkMode: `${stack}-net`, Mounts: [{ Type: "volume", Source: `${stack}-vol`, Target: "/v" }] },
    });
    await api.request("POST", `/containers/${c.Id}/start`);
    // Something of another stack, or not ours, stays.
    await api.request("POST", "/volumes/create", { Name: `${stack}-other`, Labels: { [STACK_LABEL]: "someone-else", [DEPLOYER_LABEL]: DEPLOYER_LABEL_VALUE } });
    expect(await leftovers(stack)).toBe(3);
    const removed = await sweepStack(api, stack);
    expect(removed.sort()).toEqual([`container ${stack}-c`, `network ${stack}-net`, `volume ${stack}-vol`]);
    expect(await leftovers(stack)).toBe(0);
    await api.request("GET", `/volumes/${stack}-other`);
    await api.request("DELETE", `/volumes/${stack}-other`);
  }, 60_000);

  it("sweeps the stacks of e2e runs whose process is gone, and leaves a live run's alone", async () => {
    const Labels = (stack: string) => ({ [STACK_LABEL]: stack, [DEPLOYER_LABEL]: DEPLOYER_LABEL_VALUE });
    // A pid above the kernel's pid_max (4194304 at most) belongs to no process.
    const dead = "e2e-killed-9999999";
    const live = e2eStack("e2e-live");
    await api.request("POST", "/networks/create", { Name: `${dead}-net`, Internal: true, Labels: Labels(dead) });
    await api.request("POST", "/networks/create", { Name: `${live}-net`, Internal: true, Labels: Labels(live) });
    expect(await sweepDeadRuns(api)).toContain(dead);
    expect(await leftovers(dead)).toBe(0);
    expect(await leftovers(live)).toBe(1);
    await sweepStack(api, live);
  });
});
