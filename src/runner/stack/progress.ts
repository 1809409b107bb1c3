// Progress of an update from the engine's events: how many resources are done out of how many, and which one
// is being worked on. The total is the steps a preview counted (or a destroy's state holds), else what the program
// says it declared plus the deletes of what it no longer declares (unknown until either: `?`).
import type { EngineEvent } from "@pulumi/pulumi/automation";
import { countsAsStep, parseDeclaredResources } from "../../protocol/declared-resources";

/** `urn:pulumi:stack::project::type::name` -> `type name` (the last type of a nested type chain). */
export function describeUrn(urn: string): string {
  const parts = urn.split("::");
  const name = parts[parts.length - 1] ?? urn;
  const types = (parts[parts.length - 2] ?? "").split("$");
  return `${types[types.length - 1]} ${name}`;
}

/** True for steps that are a resource of the stack (not a provider or the stack itself). */
function counts(urn: string, type: string): boolean {
  return countsAsStep(type) && urn !== "";
}

/**
 * How many resources a stack's exported state holds (what a destroy will delete), not counting the stack or providers.
 */
export function resourcesInDeployment(deployment: {
  deployment?: { resources?: { urn?: string; type?: string }[] };
}): number {
  return (deployment.deployment?.resources ?? []).filter((r) => counts(r.urn ?? "", r.type ?? "")).length;
}

/** Counts the resource steps an operation's events announce (from a preview). */
export class StepCounter {
  readonly urns = new Set<string>();
  readonly onEvent = (event: EngineEvent): void => {
    const meta = event.resourcePreEvent?.metadata;
    if (meta && counts(meta.urn, meta.type)) this.urns.add(meta.urn);
  };
  get total(): number {
    return this.urns.size;
  }
}

/**
 * Turns engine events into progress lines: `[done/total] <op> <type> <name>` as each resource completes (or
 * fails), and `… <op> <type> <name>` as one starts.
 */
export class ProgressReporter {
  private readonly done = new Set<string>();
  private readonly started = new Set<string>();
  /** What the program says it declared, when no total was given. */
  private declared?: number;
  /** Resources the program no longer declares, which the update deletes: steps beyond what it declared. */
  private undeclared = 0;

  constructor(
    private readonly print: (line: string) => void,
    private total?: number,
  ) {}

  setTotal(total: number | undefined): void {
    this.total = total;
  }

  private count(): string {
    const total = this.total ?? (this.declared === undefined ? undefined : this.declared + this.undeclared);
    return `[${this.done.size}/${total !== undefined && total >= this.done.size ? total : "?"}]`;
  }

  readonly onEvent = (event: EngineEvent): void => {
    const pre = event.resourcePreEvent?.metadata;
    if (pre && counts(pre.urn, pre.type) && !this.started.has(pre.urn)) {
      this.started.add(pre.urn);
      if (pre.op === "delete" || pre.op === "discard") this.undeclared++;
      if (pre.op !== "same") this.print(`${this.count()} ${pre.op} ${describeUrn(pre.urn)} …`);
      return;
    }
    const finished = event.resOutputsEvent?.metadata ?? event.resOpFailedEvent?.metadata;
    if (finished && counts(finished.urn, finished.type) && !this.done.has(finished.urn)) {
      this.done.add(finished.urn);
      const failed = event.resOpFailedEvent !== undefined;
      if (finished.op !== "same" || failed)
        this.print(`${this.count()} ${failed ? "failed" : "done"}: ${finished.op} ${describeUrn(finished.urn)}`);
      return;
    }
    const diagnostic = event.diagnosticEvent;
    // The engine sends debug diagnostics too, though the Automation API's type leaves that severity out. The count
    // is the program's own line, tied to no resource: a provider's or a resource's log cannot set it.
    if (diagnostic && (diagnostic.severity as string) === "debug") {
      const declared = diagnostic.urn ? undefined : parseDeclaredResources(diagnostic.message);
      if (declared !== undefined) this.declared ??= declared;
      return;
    }
    if (diagnostic && diagnostic.severity === "error") this.print(`error: ${diagnostic.message.trim().split("\n")[0]}`);
  };

  get completed(): number {
    return this.done.size;
  }
}
