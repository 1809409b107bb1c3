import { describe, expect, it } from "vitest";
import { formatProblem, gatewayServiceConfig, plan, siteProxyServiceConfig } from "../../src/plan";
import type { RecordingFile, StackConfig } from "../../src/plan";
import { projectImagesNeeded, remoteEngineImages } from "../../src/plan/images";
import { recordingDockerfile, replayServerServiceConfig } from "../../src/plan/replay";
import { replayNetworks, serverNetworks } from "../../src/plan/wiring";
import { gatewayConfigSchema } from "../../src/protocol/gateway-config";
import { replayServerConfigSchema } from "../../src/protocol/replay-server-config";
import { planned } from "../helpers/plans";
import { stackConfig } from "./fixtures";

const SHA = "a".repeat(64);
const recording: RecordingFile = { path: "/recordings/gh.har", sha256: SHA, bytes: 3 * 1024 * 1024 };

function config(overrides: Record<string, unknown> = {}, target = "docker"): StackConfig {
  return stackConfig({
    target,
    captureTraffic: true,
    websites: {
      gh: {
        live: true,
        domains: ["github.com", "*.github.com"],
        allowHosts: ["*.githubassets.com"],
        server: { image: "gh-server:1", port: 9000 },
        replay: { file: "recordings/gh.har", ignoreParams: ["_"], ignoreBodyFields: ["nonce"] },
        ...overrides,
      },
      docs: { live: true, domains: ["docs.example.org"], server: { image: "docs-server:1" } },
    },
    // An allowlist, so the tab loads from the real site too when the site is not replayed.
    computers: { desk: { network: [], startTabs: ["https://github.com/"] } },
  });
}

/** The recording the replayed site gh is planned with, as the runner reads it. */
const RECORDED = { recordings: { gh: recording } };

describe("a replayed live site", () => {
  it("gets a replay server on the env network alone, running its recording's image", () => {
    const p = planned(config(), RECORDED);
    const gh = p.websites.find((w) => w.name === "gh")!;
    expect(gh.replay).toMatchObject({
      containerName: "demo-gh-replay",
      alias: "gh-replay",
      port: 8070,
      controlPort: 9000,
      file: "recordings/gh.har",
      recording,
      recordingImage: `multienv/replay-recording:${SHA}`,
      ignoreParams: ["_"],
      ignoreBodyFields: ["nonce"],
    });
    expect(replayNetworks(p, gh)).toEqual([{ network: "demo-env", aliases: ["gh-replay"] }]);
    expect(recordingDockerfile()).toContain("FROM multienv/replay-server:latest");
    expect(recordingDockerfile()).toContain("COPY recording.har /var/lib/multienv/recording/recording.har");
  });

  it("keeps its server, without egress; the live site beside it keeps its egress", () => {
    const p = planned(config(), RECORDED);
    const gh = p.websites.find((w) => w.name === "gh")!;
    const docs = p.websites.find((w) => w.name === "docs")!;
    expect(gh.serverOnEgress).toBe(false);
    expect(serverNetworks(p, gh).map((n) => n.network)).toEqual(["demo-env"]);
    expect(docs.serverOnEgress).toBe(true);
    expect(docs.replay).toBeUndefined();
  });

  it("is, for the gateway, a synthetic site whose frontend is the replay server, and its control is forwarded", () => {
    const gateway = gatewayConfigSchema.parse(gatewayServiceConfig(planned(config(), RECORDED)));
    expect(gateway.sites.gh).toEqual({
      server: new URL("http://gh-server:9000"),
      frontend: new URL("http://gh-replay:8070"),
      live: false,
    });
    expect(gateway.sites.docs.live).toBe(true);
    expect(gateway.sites.docs.frontend).toBeUndefined();
    expect(gateway.replays).toEqual({ gh: new URL("http://gh-replay:9000") });
  });

  it("is routed by every computer's site proxy to the gateway at its domains and allowed hosts, never tunneled", () => {
    const p = planned(config(), RECORDED);
    const desk = p.computers[0];
    expect(desk.siteTable).toEqual({ gh: ["github.com", "*.github.com", "*.githubassets.com"] });
    expect(siteProxyServiceConfig(p, desk).sites).toEqual(desk.siteTable);
    expect(p.liveHosts).toEqual(["docs.example.org"]);
  });

  it("is named replayed to each site proxy routing it, whose log then takes its misses (and no other site's)", () => {
    const p = planned(config(), RECORDED);
    expect(siteProxyServiceConfig(p, "desk").replayed).toEqual(["gh"]);
    const noReplay = planned(config({ replay: undefined }));
    expect(siteProxyServiceConfig(noReplay, "desk").replayed).toBeUndefined();
  });

  it("is not live: the marks list it as replayed, with its recording and digest", () => {
    const p = planned(config(), RECORDED);
    expect(p.liveWebsites.map((w) => w.name)).toEqual(["docs"]);
    expect(p.replayedWebsites).toEqual([{ name: "gh", recording: "recordings/gh.har", sha256: SHA }]);
    expect(p.live).toBe(true);
    expect(p.reproducible).toBe(false);
  });

  it("makes the env reproducible when every live site is replayed", () => {
    const c = config();
    delete c.websites.docs;
    const p = planned(c, RECORDED);
    expect(p.live).toBe(false);
    expect(p.reproducible).toBe(true);
    expect(p.liveWebsites).toEqual([]);
    expect(p.liveHosts).toEqual([]);
  });

  it("is captured as the site's frontend when capture is on", () => {
    const sidecars = planned(config(), RECORDED).capture.sidecars.filter((s) => s.site === "gh");
    expect(sidecars.map((s) => [s.role, s.target])).toEqual([
      ["frontend", "demo-gh-replay"],
      ["server", "demo-gh-server"],
    ]);
  });

  it("needs the replay server's image where the gateway runs, and ships its recording image to a remote engine", () => {
    const p = planned(config(), RECORDED);
    expect(projectImagesNeeded(true, p.computers, p.websites)).toContain("replay-server");
    expect(projectImagesNeeded(true, p.computers, [])).not.toContain("replay-server");
    expect(remoteEngineImages(p).recordings).toEqual([SHA]);
    expect(remoteEngineImages(p, p.computers[0]).recordings).toEqual([]);
  });

  it("gives its replay server a config the replay server accepts, with the site's ignore lists", () => {
    const replay = planned(config(), RECORDED).websites.find((w) => w.name === "gh")!.replay!;
    const parsed = replayServerConfigSchema.parse(replayServerServiceConfig(replay));
    expect(parsed).toMatchObject({
      listen: { port: 8070 },
      control: { port: 9000 },
      recording: "/var/lib/multienv/recording/recording.har",
      ignoreParams: ["_"],
      ignoreBodyFields: ["nonce"],
    });
  });
});

describe("replay refusals", () => {
  const problemsOf = (c: StackConfig, recordings: Record<string, RecordingFile> = { gh: recording }) => {
    const result = plan(c, { stack: "demo", recordings });
    return result.ok ? [] : result.problems.map(formatProblem);
  };

  it("refuses replay on a synthetic site", () => {
    const c = config();
    c.websites.gh.live = false;
    c.websites.gh.allowHosts = [];
    expect(problemsOf(c)).toContain(
      "multienv:websites.gh.replay: only a live site is replayed (a synthetic site is served by its own images); remove replay",
    );
  });

  it("refuses no target: the kubernetes one replays as the others do", () => {
    for (const target of ["docker", "kubernetes"])
      expect(problemsOf(config({}, target)).filter((l) => l.includes(".replay"))).toEqual([]);
    expect(planned(config({}, "kubernetes"), RECORDED).websites.find((w) => w.name === "gh")?.replay).toMatchObject({
      recordingImage: `multienv/replay-recording:${SHA}`,
    });
  });

  it("refuses a replayed site whose recording was not read", () => {
    expect(problemsOf(config(), {})).toEqual([
      "multienv:websites.gh.replay: the recording recordings/gh.har was not read, so the site cannot be served from it; deploy with multienv up or pulumi up, which read it",
    ]);
  });
});

describe("websites.<name>.replay in the stack config", () => {
  it("takes a path alone, or the file with its ignore lists", () => {
    const short = stackConfig({ websites: { gh: { live: true, domains: ["github.com"], replay: "gh.har" } } });
    expect(short.websites.gh.replay).toEqual({ file: "gh.har", ignoreParams: [], ignoreBodyFields: [] });
    const full = stackConfig({
      websites: {
        gh: { live: true, domains: ["github.com"], replay: { file: "/r/gh.har", ignoreBodyFields: ["a.b"] } },
      },
    });
    expect(full.websites.gh.replay).toEqual({ file: "/r/gh.har", ignoreParams: [], ignoreBodyFields: ["a.b"] });
  });

  it("refuses anything else, saying what it takes", () => {
    for (const replay of [3, ["x.har"], "", { file: "" }]) {
      expect(() => stackConfig({ websites: { gh: { live: true, domains: ["github.com"], replay } } })).toThrow(
        /path of a HAR file/,
      );
    }
  });
});
