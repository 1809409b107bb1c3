// A reset starting a capture over on the docker target, with a real sidecar (the capture image, its script, real
// tcpdump) in a real site container's network namespace on the engine, both under the stack's restart policy:
// signalled through the engine, with no process started in the sidecar, it ends the ended episode's tcpdump and files
// and records the next episode's packets from the moment the reset's step answers; and the signal leaves the sidecar
// under its restart policy, so a crash of its site after it still finds the site's packets recorded.
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { engineClient, type StateResource } from "../../src/engines/docker";
import { CAPTURES_DIR } from "../../src/plan/topology";
import {
  CAPTURE_BEGAN_LINE,
  CAPTURE_CAPABILITIES,
  CAPTURE_RESTART,
  CAPTURE_STOP_SIGNAL,
  captureCommand,
} from "../../src/plan/wiring";
import { RESTART } from "../../components/engine/containers";
import type { Plan } from "../../src/plan/types";
import { LABELS, ROLES } from "../../src/protocol/labels";
import { RESOURCE_TYPES } from "../../src/protocol/resource-types";
import { dockerRuntime } from "../../src/runner/targets/docker/runtime";
import { cleanup, onCleanup, tempDir } from "../helpers/processes";
import { until } from "../helpers/until";

const IMAGE = "multienv/gateway:latest";
const api = engineClient({});
const name = `multienv-capture-over-${process.pid}`;
const site = `${name}-shop-server`;
const sidecar = `${name}-capture-shop-server`;
let captures: string;
let siteAddress: string;

const plan: Pick<Plan, "capture"> = {
  capture: { enabled: true, fileSizeMb: 1, fileCount: 3, volumeName: "unused" } as Plan["capture"],
};

/** The sidecar as the stack's state holds it: its name and labels, on the local engine. */
const state: StateResource[] = [
  {
    type: RESOURCE_TYPES.container,
    urn: `urn:pulumi:test::multienv::docker:index/container:Container::${sidecar}`,
    id: sidecar,
    inputs: {
      name: sidecar,
      stopSignal: CAPTURE_STOP_SIGNAL,
      restart: CAPTURE_RESTART,
      labels: [
        { label: LABELS.role, value: ROLES.capture },
        { label: LABELS.captureSite, value: "shop" },
        { label: LABELS.captureRole, value: "server" },
      ],
    },
  } as StateResource,
];

/** Sends one request carrying `marker` to the site, so its packets are in whatever capture records now. */
function request(marker: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const req = http.get({ host: siteAddress, port: 8000, path: `/${marker}` }, (res) =>
      res.resume().on("end", resolve),
    );
    req.on("error", reject);
  });
}

/** The capture files of the volume, each with whether it holds `marker`. */
function capturesHolding(marker: string): Record<string, boolean> {
  return Object.fromEntries(
    fs
      .readdirSync(captures)
      .sort()
      .map((f) => [f, fs.readFileSync(`${captures}/${f}`).includes(marker)]),
  );
}

/** The pids of the sidecar's tcpdump processes, as the engine sees them. */
async function tcpdumps(): Promise<string[]> {
  const top = await api.getContainer(sidecar).top({ ps_args: "-eo pid,comm" });
  return top.Processes.filter((p: string[]) => p[1] === "tcpdump").map((p: string[]) => p[0]);
}

/** The sidecar's own output. */
function sidecarOutput(): string {
  return execFileSync("docker", ["logs", sidecar], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
}

beforeAll(async () => {
  captures = tempDir("multienv-capture-over-");
  const network = await api.createNetwork({ Name: name, Driver: "bridge", Internal: true });
  onCleanup(() => network.remove().catch(() => undefined));
  const server = await api.createContainer({
    name: site,
    Image: IMAGE,
    // A request for /crash ends the server as a crash would: its restart policy starts it again, in a new namespace.
    Entrypoint: [
      "node",
      "-e",
      "require('http').createServer((q, r) => (q.url === '/crash' ? process.exit(1) : r.end('ok'))).listen(8000)",
    ],
    HostConfig: { NetworkMode: name, RestartPolicy: { Name: RESTART } },
  });
  onCleanup(() => server.remove({ force: true }).catch(() => undefined));
  await server.start();
  siteAddress = (await server.inspect()).NetworkSettings.Networks[name].IPAddress;
  const [entrypoint, ...command] = captureCommand(plan, {
    target: site,
    site: "shop",
    role: "server",
    containerName: sidecar,
    filePrefix: "shop-server.pcap",
  });
  const capture = await api.createContainer({
    name: sidecar,
    Image: IMAGE,
    Entrypoint: [entrypoint],
    Cmd: command,
    StopSignal: CAPTURE_STOP_SIGNAL,
    HostConfig: {
      RestartPolicy: { Name: CAPTURE_RESTART },
      NetworkMode: `container:${server.id}`,
      CapAdd: [...CAPTURE_CAPABILITIES.adds],
      CapDrop: [...CAPTURE_CAPABILITIES.drops],
      Binds: [`${captures}:${CAPTURES_DIR}`],
    },
  });
  onCleanup(() => capture.remove({ force: true }).catch(() => undefined));
  await capture.start();
  await until("the sidecar's first capture", () => fs.existsSync(`${captures}/shop-server.pcap0`) || undefined, 30_000);
}, 60_000);

afterAll(cleanup);

describe("a capture sidecar started over by a reset on docker", () => {
  it("starts over in place on the engine's signal, no exec: the ended episode's tcpdump and files gone, the next episode's packets recorded", async () => {
    await request("ended-episode");
    await until(
      "the ended episode's packets",
      () => capturesHolding("ended-episode")["shop-server.pcap0"] || undefined,
    );
    // What else the ended episode left: a rotated file, an earlier run's, and another container's, not this capture's.
    for (const file of ["shop-server.pcap1", "shop-server.run1.pcap0", "other-server.pcap0"])
      fs.writeFileSync(`${captures}/${file}`, "the ended episode");
    const [ended] = await tcpdumps();
    const since = Math.floor(Date.now() / 1000) - 1;

    const done: string[] = [];
    await dockerRuntime(state).startOver({ servers: [], captures: true, done: (line) => done.push(line) });
    expect(done).toEqual([`${sidecar} started over in place`]);
    // The next episode's first request, sent the moment the step answered, is in the new capture.
    await request("next-episode");
    await until("the next episode's packets", () => capturesHolding("next-episode")["shop-server.pcap0"] || undefined);

    expect(capturesHolding("ended-episode")).toEqual({ "other-server.pcap0": false, "shop-server.pcap0": false });
    const now = await tcpdumps();
    expect(now).toHaveLength(1);
    expect(now[0]).not.toBe(ended);
    // The engine started no process in the sidecar to do it.
    const execs = execFileSync(
      "docker",
      ["events", "--since", String(since), "--until", String(Math.ceil(Date.now() / 1000) + 1)].concat([
        "--filter",
        `container=${sidecar}`,
        "--filter",
        "event=exec_create",
        "--format",
        "{{.Action}}",
      ]),
      { encoding: "utf8" },
    );
    expect(execs.trim()).toBe("");
    // And again, the script never having ended: its count goes on.
    await dockerRuntime(state).startOver({ servers: [], captures: true, done: (line) => done.push(line) });
    expect(done.at(-1)).toBe(`${sidecar} started over in place`);
    expect(sidecarOutput()).toContain(`${CAPTURE_BEGAN_LINE} 2`);
  }, 90_000);

  it("stays under its restart policy after the signals: its site crashes, and the site's next packets are recorded", async () => {
    const before = (await api.getContainer(sidecar).inspect()).RestartCount;
    await request("crash").catch(() => undefined);
    // The site is back at its address (the network keeps it), in a new namespace the sidecar must join again.
    await until(
      "the site back after its crash",
      () =>
        request("after-crash").then(
          () => true,
          () => undefined,
        ),
      30_000,
    );
    await until(
      "the sidecar started again by its restart policy, recording the site",
      async () => {
        await request("after-crash");
        const restarts = (await api.getContainer(sidecar).inspect()).RestartCount;
        return (restarts > before && Object.values(capturesHolding("after-crash")).some(Boolean)) || undefined;
      },
      60_000,
      500,
    );
  }, 90_000);
});
