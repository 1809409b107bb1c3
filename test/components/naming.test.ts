// Every child is named after its component, so a component renamed or instantiated twice in one program never
// collides with itself: two envs side by side, and two engines holding networks of one Docker name. The graph
// refuses two resources of one URN as the engine would, which the last case shows.
import * as pulumi from "@pulumi/pulumi";
import { describe, expect, it } from "vitest";
import { DockerEngine, MultiEnv } from "../../components";
import type { StackConfig } from "../../src/plan/types";
import { GraphError, renderGraph } from "../../src/runner/check/graph";
import { planned } from "../helpers/plans";
import { NETWORK, PROJECT_IMAGE_IDS, VOLUME } from "./helpers";

const CONFIG: StackConfig = {
  target: "docker",
  websites: {
    shop: {
      domains: ["shop.test"],
      live: false,
      allowHosts: [],
      server: { image: "s", port: 8000 },
      frontend: { image: "f", port: 80 },
      settings: {},
      secretSettings: {},
    },
  },
  computers: { desktop: { network: "none", startTabs: [], routesSites: true, headful: false } },
  captureTraffic: true,
  capture: { fileSizeMb: 20, fileCount: 10 },
  selfTest: true,
};

function envNamed(name: string): MultiEnv {
  return new MultiEnv(name, { plan: planned(CONFIG, { stack: name }), secrets: {}, projectImages: PROJECT_IMAGE_IDS });
}

function engineNamed(name: string): DockerEngine {
  return new DockerEngine(name, {
    networks: { internal: ["shared-net"], external: [] },
    volumes: ["shared-volume"],
    projectImages: { gateway: "sha256:gateway" },
    labels: {},
  });
}

describe("child names", () => {
  it("lets two envs live in one program, every resource of each named after it", async () => {
    const graph = await renderGraph({
      stack: "two",
      config: {},
      program: async () => {
        envNamed("alpha");
        envNamed("beta");
        return {};
      },
    });
    const urns = graph.resources.map((r) => r.urn);
    expect(new Set(urns).size).toBe(urns.length);
    for (const env of ["alpha", "beta"]) {
      const own = graph.resources.filter((r) => r.name.startsWith(`${env}`));
      expect(own.length).toBeGreaterThan(30);
    }
    for (const r of graph.resources) expect(r.name, `${r.type} ${r.name}`).toMatch(/^(alpha|beta)(-|$)/);
  });

  it("lets two engines hold networks and volumes of one Docker name", async () => {
    const graph = await renderGraph({
      stack: "engines",
      config: {},
      program: async () => {
        engineNamed("one");
        engineNamed("two");
        return {};
      },
    });
    const named = (type: string) => graph.resources.filter((r) => r.type === type).map((r) => [r.name, r.inputs.name]);
    expect(named(NETWORK)).toEqual([
      ["one-shared-net", "shared-net"],
      ["two-shared-net", "shared-net"],
    ]);
    expect(named(VOLUME)).toEqual([
      ["one-shared-volume", "shared-volume"],
      ["two-shared-volume", "shared-volume"],
    ]);
    // Each engine is its own provider, so the two are never one Docker object.
    expect(graph.resources.filter((r) => r.type === NETWORK).map((r) => r.provider)).toEqual([
      "one-provider",
      "two-provider",
    ]);
  });

  it("refuses two resources of one URN, as the engine would", async () => {
    await expect(
      renderGraph({
        stack: "same",
        config: {},
        program: async () => {
          new pulumi.ComponentResource("multienv:test:Thing", "twice");
          new pulumi.ComponentResource("multienv:test:Thing", "twice");
          return {};
        },
      }),
    ).rejects.toThrow(
      new GraphError(
        "two resources have the URN urn:pulumi:same::multienv::pulumi:pulumi:Stack$multienv:test:Thing::twice; give each component instance its own name",
      ),
    );
  });
});
