// The timeline of an engine operation, from its events: the steps, what each waited for, the critical path and the
// idle stretches; on a hand-made operation, and on a real deploy and destroy of the demo captured by bench:e2e
// (BENCH_EVENTS; inputs and outputs left out).
import { readFileSync } from "node:fs";
import path from "node:path";
import type { EngineEvent } from "@pulumi/pulumi/automation";
import { describe, expect, it } from "vitest";
import {
  dependenciesOf,
  formatTimeline,
  timelineOf,
  type TimedEvent,
  type TimelineStep,
} from "../../src/runner/stack/timeline";

const urn = (type: string, name: string) => `urn:pulumi:s::multienv::${type}::${name}`;
const NETWORK = urn("docker:index/network:Network", "env");
const SITE = urn("docker:index/container:Container", "site");
const GATEWAY = urn("docker:index/container:Container", "gateway");
const COMPONENT = urn("multienv:gateway:Gateway", "gateway");

function step(kind: "pre" | "out", at: number, op: string, resource: string, custom = true): TimedEvent {
  const metadata = { op, urn: resource, type: resource.split("::")[2], new: { custom }, old: null };
  const event = (kind === "pre" ? { resourcePreEvent: { metadata } } : { resOutputsEvent: { metadata } }) as unknown;
  return { at, event: event as EngineEvent };
}

describe("timelineOf, a hand-made deploy", () => {
  // Started at 1000 ms: the program took 3 s, the network 2 s, the site 1 s, and the gateway started 0.5 s after
  // the site was done; the operation returned 1 s after the gateway.
  const events = [
    step("pre", 4000, "create", COMPONENT, false),
    step("pre", 4000, "create", NETWORK),
    step("out", 6000, "create", NETWORK),
    step("pre", 6000, "create", SITE),
    step("out", 7000, "create", SITE),
    step("pre", 7500, "create", GATEWAY),
    step("out", 9000, "create", GATEWAY),
    step("out", 9000, "create", COMPONENT, false),
  ];
  const dependencies = dependenciesOf([
    { urn: SITE, dependencies: [NETWORK] },
    { urn: GATEWAY, dependencies: [SITE, NETWORK, COMPONENT] },
  ]);
  const timeline = timelineOf(events, dependencies, 1000, 10_000);

  it("has a step per custom resource, from its pre-event to its outputs, in seconds from the start", () => {
    expect(timeline.seconds).toBe(9);
    expect(timeline.steps.map((s) => [s.name, s.start, s.end, s.seconds])).toEqual([
      ["Network env", 3, 5, 2],
      ["Container site", 5, 6, 1],
      ["Container gateway", 6.5, 8, 1.5],
    ]);
  });

  it("says what each step waited for and when the last of it was done", () => {
    const gateway = timeline.steps.find((s) => s.urn === GATEWAY)!;
    expect(gateway.waitedFor.sort()).toEqual([NETWORK, SITE].sort());
    expect(gateway.ready).toBe(6);
    expect(timeline.steps.find((s) => s.urn === NETWORK)!.ready).toBe(0);
  });

  it("follows the last wait back from the step that ended last", () => {
    expect(timeline.criticalPath.map((s) => s.name)).toEqual(["Network env", "Container site", "Container gateway"]);
  });

  it("names the stretches with no step under way: the program's start, between steps, the end", () => {
    expect(timeline.idleGaps).toEqual([
      { from: 0, to: 3, seconds: 3 },
      { from: 6, to: 6.5, seconds: 0.5 },
      { from: 8, to: 9, seconds: 1 },
    ]);
    const lines = formatTimeline(timeline).join("\n");
    expect(lines).toContain("(3.0 s before it started: the program or the engine)");
    expect(lines).toContain("(1.0 s after the last step: outputs, state, exit)");
  });

  it("has a delete wait for the resources that depend on it", () => {
    const destroy = timelineOf(
      [
        step("pre", 0, "delete", GATEWAY),
        step("out", 1000, "delete", GATEWAY),
        step("pre", 1000, "delete", SITE),
        step("out", 1500, "delete", SITE),
        step("pre", 1500, "delete", NETWORK),
        step("out", 3500, "delete", NETWORK),
      ],
      dependencies,
      0,
    );
    expect(destroy.steps.find((s) => s.urn === NETWORK)!.waitedFor.sort()).toEqual([GATEWAY, SITE].sort());
    expect(destroy.criticalPath.map((s) => s.name)).toEqual(["Container gateway", "Container site", "Network env"]);
  });
});

/** A captured operation: its events (`at` in ms from its start) and what each resource depends on. */
function captured(name: string): { events: TimedEvent[]; dependencies: Map<string, string[]> } {
  const dir = path.join(__dirname, "fixtures", "timeline");
  const events = readFileSync(path.join(dir, `${name}.jsonl`), "utf8")
    .split("\n")
    .filter((line) => line !== "")
    .map((line) => JSON.parse(line) as TimedEvent);
  const dependencies = JSON.parse(readFileSync(path.join(dir, "dependencies.json"), "utf8")) as Record<
    string,
    string[]
  >;
  return { events, dependencies: new Map(Object.entries(dependencies)) };
}

const named = (steps: TimelineStep[], suffix: string) => steps.find((s) => s.urn.endsWith(suffix))!;

describe("timelineOf, the demo deployed and destroyed by the real engine", () => {
  it("has the gateway wait for every site container and capture, and the browsers for their proxies", () => {
    const { events, dependencies } = captured("deploy");
    const timeline = timelineOf(events, dependencies, 0);
    const containers = timeline.steps.filter((s) => s.urn.includes("docker:index/container:Container::"));
    expect(containers).toHaveLength(15);
    const gateway = containers.find((s) => s.urn.endsWith("-gateway"))!;
    const sites = containers.filter((s) => /-(server|frontend)(-capture)?$/.test(s.urn));
    expect(sites).toHaveLength(10);
    expect(gateway.waitedFor).toEqual(expect.arrayContaining(sites.map((s) => s.urn)));
    expect(gateway.start).toBeGreaterThanOrEqual(gateway.ready);
    const browser = named(containers, "-desktop-browser");
    expect(browser.waitedFor).toContain(named(containers, "-desktop-proxy").urn);
    // The critical path runs from a step that waited for nothing of ours to the step that ended last, each step
    // after the one it waited for last.
    const path = timeline.criticalPath;
    expect(path.at(-1)!.end).toBe(Math.max(...timeline.steps.map((s) => s.end)));
    expect(path[0].ready).toBe(0);
    for (let i = 1; i < path.length; i++) expect(path[i].waitedFor).toContain(path[i - 1].urn);
    expect(path.map((s) => s.urn)).toContain(gateway.urn);
    // Before the first step, the engine started the program, which registered the stack: an idle stretch.
    expect(timeline.idleGaps[0].from).toBe(0);
    expect(timeline.stackRegistered).toBeGreaterThan(0);
    expect(timeline.stackRegistered).toBeLessThan(timeline.steps[0].start);
  });

  it("has each network deleted after the containers on it", () => {
    const { events, dependencies } = captured("destroy");
    const timeline = timelineOf(events, dependencies, 0);
    expect(timeline.steps.every((s) => s.op === "delete")).toBe(true);
    // A destroy runs no program: nothing registers the stack before the steps.
    expect(timeline.stackRegistered).toBeUndefined();
    const network = timeline.steps.find((s) => s.urn.includes("docker:index/network:Network::"))!;
    const gateway = named(timeline.steps, "-gateway");
    const envNetwork = named(timeline.steps, "-env");
    expect(envNetwork.waitedFor).toContain(gateway.urn);
    expect(envNetwork.start).toBeGreaterThanOrEqual(gateway.end);
    expect(network.ready).toBeGreaterThan(0);
  });
});
