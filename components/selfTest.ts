// The deploy's self-test: once the gateway and the computers are up, each computer's browser loads what it must
// and is refused what it must not, through its own proxy (src/providers/self-test.ts runs the checks,
// src/plan/self-test.ts decides them). A failed check fails the deploy. It runs again whenever what it tests
// changes: the checks, the gateway's address, or any container under test recreated.
import * as pulumi from "@pulumi/pulumi";
import type { SelfTestPlan } from "../src/plan/self-test";
import type * as docker from "@pulumi/docker";
import { SelfTest as SelfTestResource } from "../src/providers/resources";
import type { SelfTestResults } from "../src/protocol/outputs";

export interface SelfTestArgs {
  /** The checks and start tabs, from the plan; must be enabled. */
  selfTest: SelfTestPlan;
  /** The gateway as the runner reaches it. */
  gatewayUrl: pulumi.Input<string>;
  /** The env's control token (a secret). */
  controlToken: pulumi.Input<string>;
  /** The containers the checks run through: the gateway, and each computer's proxy and browser. */
  containers: docker.Container[];
}

/** The deploy's own check from inside each computer, through its proxy; its results are a stack output. */
export class SelfTest extends pulumi.ComponentResource {
  /** Every check's result; the deploy fails before this exists when one fails. */
  readonly results: pulumi.Output<SelfTestResults>;

  constructor(name: string, args: SelfTestArgs, opts?: pulumi.ComponentResourceOptions) {
    super("multienv:index:SelfTest", name, {}, opts);
    if (!args.selfTest.enabled)
      throw new pulumi.ResourceError(`${name}: the plan's self-test is off; declare no SelfTest then`, this);
    const run = new SelfTestResource(
      `${name}-run`,
      {
        gatewayUrl: args.gatewayUrl,
        controlToken: args.controlToken,
        checks: args.selfTest.checks,
        startTabs: args.selfTest.startTabs,
        deployed: args.containers.map((c) => c.id),
      },
      { parent: this, dependsOn: args.containers },
    );
    this.results = run.results;
    this.registerOutputs({ results: this.results });
  }
}
