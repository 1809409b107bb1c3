// The timeline of one engine operation (an update or a destroy) from the engine's own events: when each resource's
// step started and ended, what it waited for, the chain of waits that decided the operation's length (the critical
// path), the longest steps, and the stretches where no step was under way (the program starting, the engine
// between steps). The event log's own timestamps are whole seconds, too coarse for steps of a second or two, so each
// event carries the time it was received (the Automation API streams them as they happen).
import type { EngineEvent } from "@pulumi/pulumi/automation";

/** An engine event and the time it arrived, in milliseconds on the caller's clock. */
export interface TimedEvent {
  at: number;
  event: EngineEvent;
}

/** One resource's step: from its pre-event to its outputs (or failure), in seconds from the operation's start. */
export interface TimelineStep {
  urn: string;
  /** `Type name` (`Container env-gateway`, `provider env-engine-provider`). */
  name: string;
  op: string;
  start: number;
  end: number;
  seconds: number;
  /**
   * The steps of this operation it waited for, by URN: its dependencies and its provider (a delete: the resources
   * that depend on it).
   */
  waitedFor: string[];
  /** When the last of those ended (the operation's start when none did): from then on it waited for nothing of ours. */
  ready: number;
  failed: boolean;
}

/** A stretch with no step under way. */
export interface IdleGap {
  from: number;
  to: number;
  seconds: number;
}

export interface Timeline {
  /** Seconds from the operation's start to its end (the caller's `ended`, else the last event). */
  seconds: number;
  steps: TimelineStep[];
  /**
   * From the step that ended last back to the start: each step preceded by the one it waited for last. A step
   * that started well after that one ended waited on the program or the engine, not on a resource.
   */
  criticalPath: TimelineStep[];
  idleGaps: IdleGap[];
  /**
   * When the program registered the stack, the first thing it does once the CLI and the language host have started
   * it: what comes before is the engine starting, what comes after and before the first step is the program.
   */
  stackRegistered?: number;
}

/** What a resource waited for, from the state: its dependencies and its provider (`urn::id` in the state). */
export interface StateResourceDependencies {
  urn: string;
  dependencies?: string[];
  provider?: string;
}

/** URN -> the URNs it depends on, its provider included. */
export function dependenciesOf(resources: StateResourceDependencies[]): Map<string, string[]> {
  return new Map(
    resources.map((r) => {
      const provider = r.provider ? [r.provider.slice(0, r.provider.lastIndexOf("::"))] : [];
      return [r.urn, [...new Set([...(r.dependencies ?? []), ...provider])]];
    }),
  );
}

/** The last part of a URN's type and its name: `Container env-gateway`; a provider is `provider <name>`. */
function shortName(urn: string): string {
  const parts = urn.split("::");
  const type = (parts[parts.length - 2] ?? "").split("$").pop() ?? "";
  const name = parts[parts.length - 1] ?? urn;
  return `${type.startsWith("pulumi:providers:") ? "provider" : type.split(":").pop()} ${name}`;
}

/** True for a step that does work: a custom resource or a provider, not a component or the stack. */
function isWork(meta: { type: string; new?: { custom?: boolean }; old?: { custom?: boolean } }): boolean {
  return meta.type.startsWith("pulumi:providers:") || meta.new?.custom === true || meta.old?.custom === true;
}

const round = (n: number) => Math.round(n * 1000) / 1000;

/**
 * The timeline of the operation that started at `started` (ms) and, when given, returned at `ended`, from its
 * events and what each resource depends on (dependenciesOf the state after it).
 */
export function timelineOf(
  events: TimedEvent[],
  dependencies: Map<string, string[]>,
  started: number,
  ended?: number,
): Timeline {
  const open = new Map<string, { op: string; start: number }>();
  const steps: TimelineStep[] = [];
  const seconds = (at: number) => round((at - started) / 1000);
  let stackRegistered: number | undefined;
  for (const { at, event } of events) {
    const pre = event.resourcePreEvent?.metadata;
    // A destroy runs no program: its stack's pre-event is the stack's own delete, at the end.
    if (pre?.type === "pulumi:pulumi:Stack" && pre.op !== "delete") stackRegistered ??= seconds(at);
    if (pre && isWork(pre) && !open.has(pre.urn) && !steps.some((s) => s.urn === pre.urn)) {
      open.set(pre.urn, { op: pre.op, start: seconds(at) });
      continue;
    }
    const done = event.resOutputsEvent?.metadata ?? event.resOpFailedEvent?.metadata;
    const begun = done && open.get(done.urn);
    if (done && begun) {
      open.delete(done.urn);
      const end = seconds(at);
      steps.push({
        urn: done.urn,
        name: shortName(done.urn),
        op: begun.op,
        start: begun.start,
        end,
        seconds: round(end - begun.start),
        waitedFor: [],
        ready: 0,
        failed: event.resOpFailedEvent !== undefined,
      });
    }
  }
  const byUrn = new Map(steps.map((s) => [s.urn, s]));
  // A delete waits for the other way round: every resource that depends on it goes first.
  const dependents = new Map<string, string[]>();
  for (const [urn, on] of dependencies)
    for (const dependency of on) dependents.set(dependency, [...(dependents.get(dependency) ?? []), urn]);
  for (const step of steps) {
    const waits = step.op === "delete" ? dependents.get(step.urn) : dependencies.get(step.urn);
    step.waitedFor = (waits ?? []).filter((urn) => byUrn.has(urn));
    step.ready = Math.max(0, ...step.waitedFor.map((urn) => byUrn.get(urn)!.end));
  }
  const last = events.length > 0 ? seconds(events[events.length - 1].at) : 0;
  const total = ended !== undefined ? seconds(ended) : last;
  return {
    seconds: total,
    steps,
    criticalPath: criticalPathOf(steps),
    idleGaps: idleGapsOf(steps, total),
    ...(stackRegistered === undefined ? {} : { stackRegistered }),
  };
}

function criticalPathOf(steps: TimelineStep[]): TimelineStep[] {
  const byUrn = new Map(steps.map((s) => [s.urn, s]));
  const path: TimelineStep[] = [];
  let step = [...steps].sort((a, b) => b.end - a.end)[0];
  while (step !== undefined) {
    path.unshift(step);
    const before = step.waitedFor.map((urn) => byUrn.get(urn)!).filter((s) => s.end <= step!.start + 0.001);
    step = before.sort((a, b) => b.end - a.end)[0];
  }
  return path;
}

/** Stretches of at least 0.2 s between the start and `total` in which no step was under way. */
function idleGapsOf(steps: TimelineStep[], total: number): IdleGap[] {
  const gaps: IdleGap[] = [];
  let busyUntil = 0;
  for (const step of [...steps].sort((a, b) => a.start - b.start)) {
    if (step.start - busyUntil >= 0.2)
      gaps.push({ from: busyUntil, to: step.start, seconds: round(step.start - busyUntil) });
    busyUntil = Math.max(busyUntil, step.end);
  }
  if (total - busyUntil >= 0.2) gaps.push({ from: busyUntil, to: total, seconds: round(total - busyUntil) });
  return gaps;
}

/** The timeline as lines for a terminal: the critical path, the `longest` longest steps, the idle gaps. */
export function formatTimeline(timeline: Timeline, longest = 8): string[] {
  const s = (n: number) => `${n.toFixed(1)} s`;
  const row = (step: TimelineStep) =>
    `${s(step.start).padStart(7)} ${s(step.end).padStart(7)} ${s(step.seconds).padStart(7)}  ${step.op.padEnd(8)} ${step.name}${step.failed ? " (failed)" : ""}`;
  const lines = [
    `  critical path (${s(timeline.seconds)} in all):`,
    `    ${"start".padStart(7)} ${"end".padStart(7)} ${"took".padStart(7)}  op       resource`,
  ];
  let before: TimelineStep | undefined;
  for (const step of timeline.criticalPath) {
    const waited = step.start - (before?.end ?? 0);
    const registered = timeline.stackRegistered;
    if (before === undefined && registered !== undefined && registered <= step.start && waited >= 0.2)
      lines.push(
        `    ${" ".repeat(23)}  (${s(waited)} before it started: the CLI and language host ${s(registered)}, the program ${s(step.start - registered)})`,
      );
    else if (waited >= 0.2)
      lines.push(`    ${" ".repeat(23)}  (${s(waited)} before it started: the program or the engine)`);
    lines.push(`    ${row(step)}`);
    before = step;
  }
  const tail = timeline.seconds - (before?.end ?? 0);
  if (tail >= 0.2) lines.push(`    ${" ".repeat(23)}  (${s(tail)} after the last step: outputs, state, exit)`);
  lines.push(`  longest steps:`);
  for (const step of [...timeline.steps].sort((a, b) => b.seconds - a.seconds).slice(0, longest))
    lines.push(`    ${row(step)}  (ready at ${s(step.ready)})`);
  lines.push(
    `  idle (no step under way): ${timeline.idleGaps.map((g) => `${s(g.from)}-${s(g.to)}`).join(", ") || "none"}; ` +
      `${s(timeline.idleGaps.reduce((sum, g) => sum + g.seconds, 0))} in all`,
  );
  return lines;
}

/** The timeline without URNs and dependencies, for a JSON line. */
export function timelineSummary(timeline: Timeline): Record<string, unknown> {
  const brief = (step: TimelineStep) => ({
    name: step.name,
    op: step.op,
    start: step.start,
    end: step.end,
    ready: step.ready,
  });
  return {
    seconds: timeline.seconds,
    criticalPath: timeline.criticalPath.map(brief),
    steps: timeline.steps.map(brief),
    idleGaps: timeline.idleGaps,
    stackRegistered: timeline.stackRegistered,
  };
}
