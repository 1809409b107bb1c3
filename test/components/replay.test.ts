// A replayed site's replay server under Pulumi's mocks, the real program over a HAR file on disk: its container
// declares the plan's memory limit (swap included) and the state directory the server keeps its episode in.
import { statSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { REPLAY_MAX_BODY_BYTES, replayServerMemoryMiB } from "../../src/plan/replay";
import { REPLAY_STATE_DIR } from "../../src/plan/topology";
import type { Graph } from "../../src/runner/check/graph";
import { cleanup } from "../helpers/processes";
import { entry, har, harFile } from "../replay-server/helpers";
import { container, envOf, graphOf } from "./helpers";

describe("a replayed site's replay server on docker", () => {
  let graph: Graph;
  let file: string;
  beforeAll(async () => {
    file = harFile(har([entry("https://github.com/", { body: "x".repeat(200_000) })]));
    graph = await graphOf(
      "t1",
      {
        target: "docker",
        websites: {
          github: {
            live: true,
            domains: ["github.com"],
            server: { image: "multienv/sample-live-server" },
            replay: { file },
          },
        },
        computers: { desk: { network: "none", startTabs: ["https://github.com/"] } },
      },
      {},
      true,
    );
  });
  afterAll(cleanup);

  it("has the plan's memory limit, swap included, grown with its recording", () => {
    const inputs = container(graph, "t1-github-replay-container");
    const limit = replayServerMemoryMiB(statSync(file).size, REPLAY_MAX_BODY_BYTES);
    expect(limit).toBeGreaterThan(replayServerMemoryMiB(0, REPLAY_MAX_BODY_BYTES));
    expect([inputs.memory, inputs.memorySwap]).toEqual([limit, limit]);
  });

  it("keeps its episode in the state directory its image makes, and holds messages to the body limit", () => {
    const config = JSON.parse(envOf(container(graph, "t1-github-replay-container")).MULTIENV_REPLAY_SERVER_CONFIG);
    expect(config).toMatchObject({ stateDir: REPLAY_STATE_DIR, maxBodyBytes: REPLAY_MAX_BODY_BYTES });
  });
});
