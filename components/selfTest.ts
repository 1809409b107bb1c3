// The deploy's self-test: once the gateway and the computers are up, each computer's browser loads what it must
// and is refused what it must not, through its own proxy (src/providers/self-test.ts runs the checks,
// src/plan/self-test.ts decides them). A failed check fails the deploy. It runs again whenever what it tests
// changes: the checks, the gateway's address, or any container (or pod) under test recreated.
import * as pulumi from "@pulumi/pulumi";
import type { SelfTestPlan } from "../src/plan/types";
import { SelfTest as SelfTestResource } from "../src/providers/resources";
import type { SelfTestResults } from "../src/plan/stack-outputs";
import type { GatewayPortForward } from "../src/protocol/port-forward";

export interface SelfTestArgs {
  /** The checks and start tabs, from the plan; must be enabled. */
  selfTest: SelfTestPlan;
  /** The gateway as the runner reaches it. */
  gatewayUrl: pulumi.Input<string>;
  /** The env's control token (a secret). */
  controlToken: pulumi.Input<string>;
  /**
   * What the checks run through: the gateway, and each computer's proxy and browser (Docker containers, or pods on
   * the kubernetes target). The self-test waits for them, and runs again when one's id changes.
   */
  containers: pulumi.CustomResource[];
  /**
   * What identifies each of them as deployed, when their ids do not change on a replacement (a pod's id is
   * `<namespace>/<name>`: pass each pod's `metadata.uid`). Default: the containers' ids.
   */
  deployed?: pulumi.Input<string>[];
  /** Kubernetes: the gateway's pod (`gatewayUrl` names it); each run opens a port-forward to it. */
  gatewayPortForward?: pulumi.Input<GatewayPortForward>;
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
        deployed: args.deployed ?? args.containers.map((c) => c.id),
        ...(args.gatewayPortForward === undefined ? {} : { gatewayPortForward: args.gatewayPortForward }),
      },
      { parent: this, dependsOn: args.containers },
    );
    this.results = run.results;
    this.registerOutputs({ results: this.results });
  }
}
