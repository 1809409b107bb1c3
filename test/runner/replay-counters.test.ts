// A replayed site's counters in run.json and its episode ended by the runner, against the real gateway and a real
// replay server over a HAR, wired as the plan wires them.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { replayServerToken } from "../../src/protocol/auth";
import { collectRun } from "../../src/runner/evidence/collect";
import { readReplayCounters, resetReplays } from "../../src/runner/evidence/replay-counters";
import type { RunRecord } from "../../src/runner/evidence/run-record";
import { cleanup, onCleanup, spawnService, tempDir } from "../helpers/processes";
import { request } from "../helpers/servers";
import { TOKEN } from "../gateway/helpers";
import { entry, har, harFile, REPLAY_SERVER_ARGS } from "../replay-server/helpers";
import { startTestGateway } from "./helpers";

afterEach(cleanup);

async function env() {
  const file = harFile(
    har([
      entry("https://github.com/", { body: "<p>home</p>" }),
      entry("https://github.com/poll?t=1", { body: "one", mimeType: "text/plain" }),
    ]),
  );
  const replay = spawnService(REPLAY_SERVER_ARGS, {
    MULTIENV_REPLAY_SERVER_CONFIG: JSON.stringify({
      listen: { host: "127.0.0.1", port: 0 },
      control: { host: "127.0.0.1", port: 0 },
      recording: file,
    }),
    MULTIENV_REPLAY_SERVER_TOKEN: replayServerToken(TOKEN, "github"),
  });
  onCleanup(() => replay.stop());
  const line = await replay.listening;
  const gateway = await startTestGateway({
    sites: { github: { server: "http://127.0.0.1:9", frontend: `http://127.0.0.1:${line.port}` } },
    replays: { github: `http://127.0.0.1:${line.controlPort}` },
  });
  const browse = (path: string) =>
    request(`${gateway.url}/website/github${path}`, {
      headers: { "X-Multienv-Token": TOKEN, "X-Forwarded-Host": "github.com", "X-Forwarded-Proto": "https" },
    });
  return { gateway, browse, replay };
}

describe("replayed sites' evidence", () => {
  it("collect writes each replayed site's exact, fuzzy and missed exchanges into run.json", async () => {
    const { gateway, browse } = await env();
    expect((await browse("/")).status).toBe(200);
    expect((await browse("/poll?t=2")).body).toBe("one"); // same path, another query: fuzzy
    expect((await browse("/not-recorded")).status).toBe(404);
    const artifactsDir = join(tempDir("runner-artifacts-"), "artifacts", "task-1");
    await collectRun({
      stack: "task-1",
      access: { gatewayUrl: gateway.url, controlToken: TOKEN },
      artifactsDir,
      marks: { live: false, liveWebsites: [], captureTraffic: false },
      captureTraffic: false,
      computers: [],
      syntheticDomains: ["github.com"],
      replayedSites: ["github"],
    });
    const record = JSON.parse(readFileSync(join(artifactsDir, "run.json"), "utf8")) as RunRecord;
    expect(record.replay).toEqual({ github: { exact: 1, fuzzy: 1, missed: 1 } });
    expect(record.reproducible).toBe(true);
  });

  it("a reset ends the episode on the replay server: counters from zero, repeats from the first answer", async () => {
    const { gateway, browse } = await env();
    await browse("/");
    expect(await resetReplays(gateway.url, TOKEN, ["github"])).toEqual({ github: { exact: 1, fuzzy: 0, missed: 0 } });
    expect(await readReplayCounters(gateway.url, TOKEN, ["github"])).toEqual({
      github: { exact: 0, fuzzy: 0, missed: 0 },
    });
  });

  it("says why a site's counters could not be read, and refuses a reset the gateway does not take", async () => {
    const { gateway } = await env();
    expect(await readReplayCounters(gateway.url, "wrong-token-0123456789abcdef0123", ["github"])).toEqual({
      github: { error: "the gateway answered HTTP 401 for its counters" },
    });
    await expect(resetReplays(gateway.url, TOKEN, ["shop"])).rejects.toThrow(
      "replayed site shop: its replay server's reset answered HTTP 404",
    );
  });
});
