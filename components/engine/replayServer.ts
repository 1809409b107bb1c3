// A replayed live site's replay server (`<site>-replay`): the site's pages and calls answered from its recording,
// on the env network alone (no egress: a request the recording lacks is a 404, never the live web). It runs the
// recording's image (FROM multienv/replay-server, the HAR copied in, tagged by its SHA-256), so every target's image
// shipping carries the recording with it. Its control listener requires `replayServerToken(control token, site)`.
import * as docker from "@pulumi/docker";
import * as pulumi from "@pulumi/pulumi";
import type { Plan, PlannedWebsite } from "../../src/plan";
import { replayServerServiceConfig } from "../../src/plan";
import { DEFAULT_CAPABILITIES, replayNetworks } from "../../src/plan/wiring";
import { replayServerToken } from "../../src/protocol/auth";
import { LABELS, ROLES } from "../../src/protocol/labels";
import { REPLAY_SERVER_ENV } from "../../src/protocol/replay-server-config";
import { containerLabels, containerOptions, envEntry, networksAdvanced, RESTART } from "./containers";
import type { DockerEngine } from "./engine";

export interface ReplayServerArgs {
  /** The plan the site belongs to: its networks. */
  plan: Pick<Plan, "networks">;
  /** The planned site; it must be a replayed one (`replay` set). */
  site: PlannedWebsite;
  /** The engine the replay server runs on (the env's: the gateway's network). */
  engine: DockerEngine;
  /** The env's control token (a secret): the replay server's own token is derived from it. */
  controlToken: pulumi.Input<string>;
}

/** One replayed site's replay server. */
export class ReplayServer extends pulumi.ComponentResource {
  readonly container: docker.Container;

  constructor(name: string, args: ReplayServerArgs, opts?: pulumi.ComponentResourceOptions) {
    super("multienv:website:ReplayServer", name, {}, opts);
    const { site, engine } = args;
    const replay = site.replay;
    if (replay === undefined)
      throw new pulumi.ResourceError(`ReplayServer ${name}: site ${site.name} is not replayed in this plan`, this);
    if (site.serverOnEgress)
      throw new pulumi.ResourceError(
        `ReplayServer ${name}: site ${site.name}'s server is on the egress network; a replayed site has no egress`,
        this,
      );
    const token = pulumi.secret(pulumi.output(args.controlToken).apply((t) => replayServerToken(t, site.name)));
    this.container = new docker.Container(
      `${name}-container`,
      {
        name: replay.containerName,
        image: engine.recordingImage(replay.recording.sha256),
        networksAdvanced: networksAdvanced(engine, replayNetworks(args.plan, site)),
        capabilities: DEFAULT_CAPABILITIES,
        envs: [
          envEntry(REPLAY_SERVER_ENV.config, JSON.stringify(replayServerServiceConfig(replay))),
          envEntry(REPLAY_SERVER_ENV.token, token),
        ],
        restart: RESTART,
        // The plan's limit, swap included: a server past it restarts (and goes on with its episode) rather than
        // taking the engine's memory from the env's other containers.
        memory: replay.memoryMiB,
        memorySwap: replay.memoryMiB,
        labels: containerLabels(engine, { [LABELS.role]: ROLES.replay, [LABELS.site]: site.name }),
      },
      { parent: this, ...containerOptions(engine), additionalSecretOutputs: ["envs"] },
    );
    this.registerOutputs({ containerName: this.container.name });
  }
}
