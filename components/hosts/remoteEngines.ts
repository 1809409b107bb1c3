// What the ec2 and hosts targets share: Docker hosts reached over SSH, one for the env (gateway, sites) and one
// per computer. For each, a readiness check from the runner, then its engine: networks, volumes and the images
// its containers run, shipped from the runner's engine in one load. How the hosts came to be (VMs this deploy
// created, or machines the config names) is the caller's; everything done on them is here, once.
import * as pulumi from "@pulumi/pulumi";
import type { PlannedComputer } from "../../src/plan";
import { projectImageIdsOf, projectImagesNeeded, remoteEngineImages } from "../../src/plan/images";
import { gatewayUrl } from "../../src/plan/urls";
import { computerEngineNetworks, envEngineNetworks } from "../../src/plan/wiring";
import {
  engineConnection,
  readinessCommand,
  type GatewayTunnel as GatewayTunnelSpec,
  type SshEndpoint,
} from "../../src/plan/targets/ssh";
import { sshDir } from "../../src/providers/ssh";
import { GatewayTunnel, LocalCommand } from "../../src/providers/resources";
import { LABELS } from "../../src/protocol/labels";
import { DockerEngine } from "../engine/engine";
import type { EnvTarget, EnvTargetArgs } from "../engine/envTarget";

/** One Docker host of the env. */
export interface RemoteHost {
  /** How the runner reaches it over SSH (its pinned host key among it). */
  ssh: pulumi.Input<SshEndpoint>;
  /** The address the env's other hosts reach it at. */
  privateAddress: pulumi.Input<string>;
  /** The host was booted by this deploy: wait for cloud-init and its user data before anything else. */
  booted: boolean;
  /** The machine when this deploy creates it: everything on its engine is deleted with it. */
  machine?: pulumi.Resource;
  /** What must exist before the readiness check can connect (the firewall rules that open SSH). */
  readyAfter?: pulumi.Resource[];
}

export interface RemoteEnginesArgs extends EnvTargetArgs {
  env: RemoteHost;
  computers: Record<string, RemoteHost>;
}

/** The engines of the env's SSH hosts: each checked for readiness, then given its networks, volumes and images. */
export class RemoteEngines extends pulumi.ComponentResource implements EnvTarget {
  readonly env: DockerEngine;
  readonly gatewayPrivateAddress: pulumi.Input<string>;
  readonly gatewayReachedAt: pulumi.Output<string>;
  readonly gatewayTunnel: pulumi.Output<GatewayTunnelSpec>;
  private readonly computerEngines = new Map<string, DockerEngine>();
  private readonly computerHosts: Record<string, RemoteHost>;

  constructor(name: string, args: RemoteEnginesArgs, opts?: pulumi.ComponentResourceOptions) {
    super("multienv:remote:RemoteEngines", name, {}, opts);
    const { plan } = args;
    this.computerHosts = args.computers;
    const engineArgs = { labels: { [LABELS.stack]: plan.stack } };
    // Every image is referenced, built or pulled on the runner's engine and shipped to the hosts that run it.
    const images = new DockerEngine(
      `${name}-images`,
      {
        ...engineArgs,
        connection: args.runnerEngine,
        networks: { internal: [], external: [] },
        volumes: [],
        projectImages: projectImageIdsOf(args.projectImages, projectImagesNeeded(true, plan.computers, plan.websites)),
        recordingContext: args.recordingContext,
      },
      { parent: this },
    );
    const readiness = new Map<string, LocalCommand>();
    const engineOn = (role: string, host: RemoteHost, computer: PlannedComputer | undefined) => {
      const ready = new LocalCommand(
        `${name}-${role}-docker-ready`,
        {
          create: pulumi.output(host.ssh).apply((ssh) => readinessCommand(ssh, { cloudInit: host.booted })),
          // A new machine (or a new key) is checked again.
          triggers: [host.machine ? (host.machine as pulumi.CustomResource).id : "", host.ssh],
        },
        {
          parent: this,
          dependsOn: [...(host.readyAfter ?? []), ...(host.machine ? [host.machine] : [])],
        },
      );
      // Every resource on the engine carries the readiness check as a dependency through its provider's config.
      const connection = pulumi.all([host.ssh, ready.stdout]).apply(([ssh]) => engineConnection(ssh, sshDir()));
      readiness.set(role, ready);
      return new DockerEngine(
        `${name}-${role}-engine`,
        {
          ...engineArgs,
          connection,
          networks: computer ? computerEngineNetworks(computer) : envEngineNetworks(plan),
          volumes: computer ? [computer.caVolumeName] : plan.capture.enabled ? [plan.capture.volumeName] : [],
          projectImages: {},
          imagesFrom: { engine: images, ssh: host.ssh, after: [ready], images: remoteEngineImages(plan, computer) },
          deletedWith: host.machine,
        },
        { parent: this },
      );
    };
    this.env = engineOn("env", args.env, undefined);
    // The runner reaches the gateway through an SSH tunnel to the env host's loopback, where it is published.
    const tunnel = new GatewayTunnel(
      `${name}-gateway-tunnel`,
      { ssh: args.env.ssh, remotePort: plan.gateway.port },
      { parent: this, dependsOn: [readiness.get("env")!] },
    );
    this.gatewayTunnel = pulumi
      .all([args.env.ssh, tunnel.localPort])
      .apply(([ssh, localPort]) => ({ ssh, localPort, remotePort: plan.gateway.port }));
    this.gatewayReachedAt = tunnel.localPort.apply((port) => gatewayUrl("127.0.0.1", port));
    for (const computer of plan.computers) {
      const host = args.computers[computer.name];
      if (host === undefined)
        throw new pulumi.ResourceError(`RemoteEngines ${name}: no host for computer ${computer.name}`, this);
      this.computerEngines.set(computer.name, engineOn(computer.name, host, computer));
    }
    this.gatewayPrivateAddress = args.env.privateAddress;
    this.registerOutputs({});
  }

  computer(computer: PlannedComputer): DockerEngine {
    return this.computerEngines.get(computer.name)!;
  }

  computerAddress(computer: PlannedComputer): pulumi.Input<string> {
    return this.computerHosts[computer.name].privateAddress;
  }
}
