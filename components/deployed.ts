// What MultiEnv hands each family of parts (the Docker-engine parts on the docker, ec2 and hosts targets; the
// kubernetes parts), and what each hands back: MultiEnv keeps only what every target shares (the control token, the
// self-test, the capture collector, the outputs).
import type * as pulumi from "@pulumi/pulumi";
import type { EngineMachine, Plan } from "../src/plan";
import type { ProjectImageIds } from "../src/plan/images";
import type { GatewayTunnel } from "../src/plan/targets/ssh";
import type { GatewayPortForward } from "../src/protocol/port-forward";

/** What a family deploys from, and the resource its parts are children of. */
export interface DeployArgs {
  /** What to deploy, from `plan()`; must be an accepted plan. */
  plan: Plan;
  /** Secret stack config values by config key (namespace `multienv`), for the sites' `secretSettings`. */
  secrets: Record<string, pulumi.Output<string>>;
  /** Site -> the settings of the account leased to it from its pool (a secret), put over its own settings. */
  accounts?: Record<string, pulumi.Output<Record<string, unknown>>>;
  /**
   * The id of each project image the env runs on the runner's engine, by role (src/plan/images.ts
   * `referencedProjectImages`; none on the kubernetes target, whose nodes pull them by tag).
   */
  projectImages: ProjectImageIds;
  /** The build context of a recording image by the recording's SHA-256, relative to the project directory. */
  recordingContext?: (sha256: string) => string;
  /** Docker target: the machine its engine runs on, whose addresses no site proxy may dial. */
  engineMachine?: EngineMachine;
  /** The env's control token (a secret). */
  controlToken: pulumi.Output<string>;
  /** The MultiEnv: every part is its child, named after it. */
  parent: pulumi.Resource;
}

/** What the target's part of the env gives the parts every target shares (self-test, collector, outputs). */
export interface Deployed {
  gatewayUrl: pulumi.Output<string>;
  /** What the self-test runs through: the gateway, and each computer's proxy and browser. */
  underTest: pulumi.CustomResource[];
  /** What identifies them as deployed, when their ids stay the same across a replacement. */
  deployed?: pulumi.Input<string>[];
  /** What the collector collects from: it is deleted before them. */
  collectedFrom: pulumi.Resource[];
  gatewayTunnel?: pulumi.Input<GatewayTunnel>;
  gatewayPortForward?: pulumi.Input<GatewayPortForward>;
}
