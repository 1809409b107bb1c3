// The docker target: one engine, the runner's own (DOCKER_HOST or the local socket), holding every network,
// volume and container of the env.
import * as pulumi from "@pulumi/pulumi";
import { envEngineNetworks } from "../../src/plan/wiring";
import { projectImageIdsOf, projectImagesNeeded } from "../../src/plan/images";
import { LABELS } from "../../src/protocol/labels";
import { DockerEngine } from "../engine/engine";
import type { EnvTarget, EnvTargetArgs } from "../engine/envTarget";

/** A multi env on the local Docker engine. */
export class DockerTarget extends pulumi.ComponentResource implements EnvTarget {
  readonly env: DockerEngine;
  readonly gatewayPrivateAddress = undefined;
  readonly gatewayReachedAt = undefined;
  readonly gatewayTunnel = undefined;

  constructor(name: string, args: EnvTargetArgs, opts?: pulumi.ComponentResourceOptions) {
    super("multienv:docker:DockerTarget", name, {}, opts);
    const { plan } = args;
    this.env = new DockerEngine(
      `${name}-engine`,
      {
        connection: args.runnerEngine,
        networks: envEngineNetworks(plan),
        volumes: [
          ...(plan.capture.enabled ? [plan.capture.volumeName] : []),
          ...plan.computers.map((c) => c.caVolumeName),
        ],
        projectImages: projectImageIdsOf(args.projectImages, projectImagesNeeded(true, plan.computers, plan.websites)),
        recordingContext: args.recordingContext,
        labels: { [LABELS.stack]: plan.stack },
      },
      { parent: this },
    );
    this.registerOutputs({});
  }

  computer(): DockerEngine {
    return this.env;
  }

  computerAddress(): undefined {
    return undefined;
  }
}
