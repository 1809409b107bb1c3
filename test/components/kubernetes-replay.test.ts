// A replayed live site on the kubernetes target under Pulumi's mocks, the real program over a HAR file on disk: the
// replay server's pod runs the recording's image where the nodes get the project's images, walled, limited and
// captured as a website pod, and the whole policy pack (what `multienv check` runs) passes the graph.
import { createHash } from "node:crypto";
import { readFileSync, statSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runPolicies } from "../../policies/evaluate";
import { REPLAY_MAX_BODY_BYTES, replayServerMemoryMiB } from "../../src/plan/replay";
import { ENV_VARS } from "../../src/protocol/env";
import { REPLAY_SERVER_ENV } from "../../src/protocol/replay-server-config";
import type { Graph, GraphResource } from "../../src/runner/check/graph";
import { cleanup } from "../helpers/processes";
import { entry, har, harFile } from "../replay-server/helpers";
import { graphOf, recordDependencies } from "./helpers";

const POD = "kubernetes:core/v1:Pod";
const SECRET = "kubernetes:core/v1:Secret";
const REGISTRY = "registry.example.com:5000/multienv";

const config = (kubernetes: Record<string, unknown>, file: string) => ({
  target: "kubernetes",
  captureTraffic: true,
  kubernetes,
  websites: {
    github: {
      live: true,
      domains: ["github.com"],
      server: { image: "multienv/sample-live-server" },
      replay: { file },
    },
  },
  computers: { desk: { network: "none", startTabs: ["https://github.com/"] } },
});

const nameOf = (r: GraphResource): string => (r.inputs as any).metadata.name;
const podNamed = (graph: Graph, name: string): any => {
  const found = graph.resources.find((r) => r.type === POD && nameOf(r) === name);
  if (found === undefined) throw new Error(`no pod ${name}`);
  return found;
};
const spec = (graph: Graph, name: string) => podNamed(graph, name).inputs.spec;

describe("a replayed live site on the kubernetes target", () => {
  const recorded = recordDependencies();
  let file: string;
  let sha256: string;
  let loaded: Graph;
  let registry: Graph;
  let revealed: Graph;
  beforeAll(async () => {
    file = harFile(har([entry("https://github.com/", { body: "<h1>recorded</h1>" })]));
    sha256 = createHash("sha256").update(readFileSync(file)).digest("hex");
    loaded = await graphOf("t1", config({}, file));
    registry = await graphOf("t1", config({ imageRegistry: REGISTRY }, file));
    revealed = await graphOf("t1", config({}, file), {}, true);
  });
  afterAll(async () => {
    recorded.stop();
    await cleanup();
  });

  it("runs its recording's image: under the registry when one is set, else as loaded on the nodes, never pulled", () => {
    const image = `multienv/replay-recording:${sha256}`;
    const [onNodes] = spec(loaded, "github-replay").containers;
    expect([onNodes.image, onNodes.imagePullPolicy]).toEqual([image, "Never"]);
    const [pulled] = spec(registry, "github-replay").containers;
    expect([pulled.image, pulled.imagePullPolicy]).toEqual([`${REGISTRY}/${image}`, "IfNotPresent"]);
  });

  it("is limited to the plan's memory, keeps its episode in an emptyDir, on a read-only root", () => {
    const [server] = spec(loaded, "github-replay").containers;
    const limit = `${replayServerMemoryMiB(statSync(file).size, REPLAY_MAX_BODY_BYTES)}Mi`;
    expect(server.resources).toEqual({ limits: { memory: limit }, requests: { memory: limit } });
    expect(server.securityContext).toMatchObject({ readOnlyRootFilesystem: true, capabilities: { drop: ["ALL"] } });
    expect(server.volumeMounts).toEqual(
      expect.arrayContaining([{ name: "replay-state", mountPath: "/var/lib/multienv/replay-state" }]),
    );
    const config = JSON.parse(server.env.find((e: any) => e.name === REPLAY_SERVER_ENV.config).value);
    expect(config).toMatchObject({ listen: { host: "github-replay" }, control: { host: "github-replay" } });
  });

  it("reads its token from a Secret, and its capture sidecars record it as the site's frontend", () => {
    const pod = spec(revealed, "github-replay");
    const token = pod.containers[0].env.find((e: any) => e.name === REPLAY_SERVER_ENV.token);
    expect(token).toEqual({ name: REPLAY_SERVER_ENV.token, valueFrom: { secretKeyRef: expect.any(Object) } });
    const secret = revealed.resources.find(
      (r) => r.type === SECRET && nameOf(r) === token.valueFrom.secretKeyRef.name,
    )!;
    expect(Object.keys((secret.inputs as any).stringData["[secret]"]).sort()).toEqual(["captureToken", "token"]);
    expect(pod.initContainers.map((c: any) => c.name)).toEqual(["capture", "capture-server"]);
    expect(pod.initContainers[0].startupProbe.exec.command.join(" ")).toContain("/captures/github-frontend.pcap");
    const captureConfig = JSON.parse(pod.initContainers[1].env[0].value);
    expect(captureConfig).toMatchObject({ listen: { host: "github-replay" }, container: "github-frontend" });
  });

  it("is created before the gateway, whose health waits for it", () => {
    const gateway = podNamed(loaded, "gateway");
    expect(recorded.dependencies.get(gateway.urn)).toContain(podNamed(loaded, "github-replay").urn);
    const config = JSON.parse(
      spec(loaded, "gateway").containers[0].env.find((e: any) => e.name === ENV_VARS.gatewayConfig).value,
    );
    expect(config.replays).toEqual({ github: "http://github-replay:9000" });
  });

  it("passes every policy of the pack, which holds its pod as a website pod running a project image", () => {
    for (const graph of [loaded, registry]) expect(runPolicies(graph)).toEqual([]);
    const writable = structuredClone(loaded);
    spec(writable, "github-replay").containers[0].securityContext.readOnlyRootFilesystem = false;
    expect(runPolicies(writable).map((v) => `${v.policy}: ${v.message}`)).toEqual([
      expect.stringMatching(/^container-privileges: .*"replay-server" runs a project image with a writable root/),
    ]);
    const uncaptured = structuredClone(loaded);
    delete spec(uncaptured, "github-replay").initContainers;
    expect(runPolicies(uncaptured).map((v) => `${v.policy}: ${v.message}`)).toEqual([
      expect.stringMatching(/^capture-sidecar-per-website: website pod "github-replay" .* has no capture sidecar/),
    ]);
  });
});
