// What the Docker-engine parts need from a target, whichever it is: the engine of the gateway and the sites, each
// computer's engine, and the addresses that connect them when they are on different machines. DockerTarget (the
// local engine, components/docker), HostsTarget (existing SSH hosts, components/hosts) and Ec2Target (VMs it creates,
// components/ec2) are the three; `envTargetFor` (components/targets.ts) picks one from the plan. Here, below them,
// so the targets and the parts deployed on them never import each other. The ec2 one loads the AWS SDK only when it
// is used (components/ec2/aws.ts), so a docker deploy never does.
import type * as pulumi from "@pulumi/pulumi";
import type { Plan, PlannedComputer } from "../../src/plan";
import type { GatewayTunnel as GatewayTunnelSpec } from "../../src/plan/targets/ssh";
import type { ProjectImageIds } from "../../src/plan/images";
import type { DockerEngine } from "./engine";

export interface EnvTarget {
  /** The engine of the gateway and the sites. */
  readonly env: DockerEngine;
  /** The engine a computer runs on. */
  computer(computer: PlannedComputer): DockerEngine;
  /** ec2: the private address of a computer's VM, where its proxy's relay and control ports are published. */
  computerAddress(computer: PlannedComputer): pulumi.Input<string | undefined>;
  /** ec2: the env VM's private address, where computer VMs reach the gateway. */
  readonly gatewayPrivateAddress: pulumi.Input<string> | undefined;
  /** Remote hosts: the URL the runner reaches the gateway at (the local end of an SSH tunnel). */
  readonly gatewayReachedAt: pulumi.Input<string> | undefined;
  /** Remote hosts: how the runner brings that tunnel up again (a stack output). */
  readonly gatewayTunnel: pulumi.Input<GatewayTunnelSpec> | undefined;
}

/** What a target reads of the plan. */
export type TargetPlan = Pick<
  Plan,
  "stack" | "target" | "networks" | "capture" | "computers" | "gateway" | "websites" | "ec2" | "hosts"
>;

export interface EnvTargetArgs {
  /** What to deploy: the target reads the engines' networks, volumes and images, and its own section (ec2, hosts). */
  plan: TargetPlan;
  /** The id of each project image the env runs, by role, on the runner's engine (`npm run images` built them). */
  projectImages: ProjectImageIds;
  /** The build context of a recording image by the recording's SHA-256 (components/engine/engine.ts). */
  recordingContext?: (sha256: string) => string;
  /** The runner's own engine: a `unix://` host, or unset for DOCKER_HOST or the local socket. */
  runnerEngine: { host?: string };
}
