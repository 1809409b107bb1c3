// The capture collector: a local command that exists only to be deleted. Its delete step runs
// `multienv collect --from-env`, the same collection `multienv collect` does, so a plain `pulumi destroy` stores
// the captures (and the computers' site-proxy logs) before they are gone. MultiEnv declares it depending on the
// gateway and the computers, so the engine deletes it first, while the gateway, the captures volume behind it
// and the site proxies still exist. What it runs and with which environment is decided in src/runner.
import * as pulumi from "@pulumi/pulumi";
import type { Plan } from "../src/plan";
import type { GatewayTunnel } from "../src/plan/targets/ssh";
import type { GatewayPortForward } from "../src/protocol/port-forward";
import { LocalCommand } from "../src/providers/resources";
import { captureCollectorCommands, captureCollectorEnvironment, collectorContext } from "../src/plan/collector";

export interface CaptureCollectorArgs {
  /** The plan: the stack, and what collection reads (computers, sites, capture). */
  plan: Pick<Plan, "stack" | "computers" | "websites" | "live" | "liveReasons" | "liveWebsites" | "capture">;
  /** The gateway's URL for the runner. */
  gatewayUrl: pulumi.Input<string>;
  /** The control token (a secret; the environment holding it stays secret in the state). */
  controlToken: pulumi.Input<string>;
  /** Remote hosts: the SSH tunnel `gatewayUrl` is the local end of; the delete step brings it up first. */
  gatewayTunnel?: pulumi.Input<GatewayTunnel>;
  /** Kubernetes: the gateway's pod (`gatewayUrl` names it); the delete step opens a port-forward to it first. */
  gatewayPortForward?: pulumi.Input<GatewayPortForward>;
}

/** Stores the env's captures and proxy logs when it is deleted, before the gateway and the computers go. */
export class CaptureCollector extends pulumi.ComponentResource {
  readonly command: LocalCommand;

  constructor(name: string, args: CaptureCollectorArgs, opts?: pulumi.ComponentResourceOptions) {
    super("multienv:index:CaptureCollector", name, {}, opts);
    const commands = captureCollectorCommands();
    const environment = pulumi
      .all([args.gatewayUrl, args.controlToken, args.gatewayTunnel, args.gatewayPortForward])
      .apply(([gatewayUrl, controlToken, gatewayTunnel, gatewayPortForward]) =>
        captureCollectorEnvironment({
          stack: args.plan.stack,
          gatewayUrl,
          controlToken,
          context: collectorContext(args.plan),
          ...(gatewayTunnel === undefined ? {} : { gatewayTunnel }),
          ...(gatewayPortForward === undefined ? {} : { gatewayPortForward }),
        }),
      );
    this.command = new LocalCommand(
      `${name}-delete-step`,
      {
        create: commands.create,
        delete: commands.delete,
        // Keep the token encrypted in the state even if the token's Output lost its secret mark on the way.
        environment: pulumi.secret(environment),
      },
      // A changed environment (the gateway moved) is an update in place, so the delete step always has the latest.
      { parent: this, additionalSecretOutputs: ["environment"] },
    );
    this.registerOutputs({});
  }
}
