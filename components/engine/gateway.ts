// The gateway container: the env's one way in. On the env network (to reach the sites) and the ingress network
// (the only one its port is published on), the captures volume read-only, and a health check on /healthz that
// the deploy waits for, so an env whose site or capture is not running fails to deploy. It is created beside the
// websites' containers, not after them: its health waits for them, and its own start then overlaps theirs.
import * as pulumi from "@pulumi/pulumi";
import type { GatewayServiceConfig, Plan } from "../../src/plan";
import {
  DEFAULT_CAPABILITIES,
  GATEWAY_START_SECONDS,
  gatewayHealthcheck,
  gatewayMounts,
  gatewayNetworks,
  gatewayPublish,
} from "../../src/plan/wiring";
import { ENV_VARS } from "../../src/protocol/env";
import { gatewayUrl } from "../../src/plan/urls";
import { LABELS, ROLES } from "../../src/protocol/labels";
import * as docker from "@pulumi/docker";
import { containerLabels, containerOptions, envEntry, networksAdvanced, RESTART, volumeMounts } from "./containers";
import type { DockerEngine } from "./engine";

export interface GatewayArgs {
  /** The plan: the gateway's name and port, the target, the networks and computers it joins, capture. */
  plan: Pick<Plan, "gateway" | "target" | "networks" | "computers" | "capture">;
  /** The engine the gateway runs on. */
  engine: DockerEngine;
  /** `MULTIENV_GATEWAY_CONFIG`, from `gatewayServiceConfig(plan)` (ec2: with the computers' VM addresses). */
  serviceConfig: pulumi.Input<GatewayServiceConfig>;
  /** The control token (a secret). */
  controlToken: pulumi.Output<string>;
  /**
   * The URL the runner reaches the gateway at on a remote host (ec2, hosts): the local end of the SSH tunnel to
   * the host's loopback, where the runner's listener is published. Unset on docker: published on this loopback.
   */
  reachedAt?: pulumi.Input<string>;
}

/** The env's gateway container, published on loopback (docker) or its VM (ec2), healthy before the deploy goes on. */
export class Gateway extends pulumi.ComponentResource {
  readonly container: docker.Container;
  /** `http://<address>:<published port>` */
  readonly url: pulumi.Output<string>;

  constructor(name: string, args: GatewayArgs, opts?: pulumi.ComponentResourceOptions) {
    super("multienv:gateway:Gateway", name, {}, opts);
    const { plan, engine } = args;
    const ports = gatewayPublish(plan);
    const published = ports[0];
    if (plan.target !== "docker" && args.reachedAt === undefined) {
      throw new pulumi.ResourceError(
        `Gateway ${name}: on target ${plan.target} the gateway is published on its host's loopback; give reachedAt, the local URL of the SSH tunnel to it`,
        this,
      );
    }
    const configJson = pulumi.output(args.serviceConfig).apply((c) => JSON.stringify(c));
    this.container = new docker.Container(
      name,
      {
        name: plan.gateway.containerName,
        image: engine.image(undefined, "gateway"),
        networksAdvanced: networksAdvanced(engine, gatewayNetworks(plan)),
        ports,
        mounts: volumeMounts(engine, gatewayMounts(plan)),
        capabilities: DEFAULT_CAPABILITIES,
        envs: [envEntry(ENV_VARS.gatewayConfig, configJson), envEntry(ENV_VARS.controlToken, args.controlToken)],
        healthcheck: gatewayHealthcheck(plan),
        wait: true,
        waitTimeout: GATEWAY_START_SECONDS,
        restart: RESTART,
        labels: containerLabels(engine, { [LABELS.role]: ROLES.gateway }),
      },
      // The control token is in envs: the engine keeps envs secret even if a wrapper were lost (policy
      // secrets-stay-secret).
      { parent: this, ...containerOptions(engine), additionalSecretOutputs: ["envs"] },
    );
    const address = published.ip;
    const port =
      published.external ??
      this.container.ports.apply((bound) => bound?.find((p) => p.internal === published.internal)?.external ?? 0);
    this.url =
      args.reachedAt !== undefined
        ? pulumi.all([args.reachedAt, this.container.id]).apply(([url]) => url)
        : pulumi.all([address, port]).apply(([a, p]) => gatewayUrl(a, p));
    this.registerOutputs({ url: this.url });
  }
}
