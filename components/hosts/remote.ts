// What the hosts and ec2 targets share once they know their hosts: the hand-over to RemoteEngines, which does
// everything on them, and the EnvTarget answers read back from it. A subclass finds or creates the hosts and calls
// `handOver` once, in its constructor.
import * as pulumi from "@pulumi/pulumi";
import type { PlannedComputer } from "../../src/plan";
import type { GatewayTunnel as GatewayTunnelSpec } from "../../src/plan/targets/ssh";
import type { DockerEngine } from "../engine/engine";
import type { EnvTarget, EnvTargetArgs } from "../engine/envTarget";
import { RemoteEngines, type RemoteHost } from "./remoteEngines";

/** A target whose env and computers are Docker hosts reached over SSH. */
export abstract class RemoteTarget extends pulumi.ComponentResource implements EnvTarget {
  private remote?: RemoteEngines;

  /**
   * Puts the env on `env` and each computer on its host, through RemoteEngines. It takes this target's name (its
   * type tells them apart), so what it creates is named `<name>-env-engine`, not `<name>-remote-env-engine`.
   */
  protected handOver(name: string, args: EnvTargetArgs, env: RemoteHost, computers: Record<string, RemoteHost>): void {
    this.remote = new RemoteEngines(
      name,
      { ...args, env, computers },
      { parent: this, aliases: [{ name: `${name}-remote` }] },
    );
  }

  private get engines(): RemoteEngines {
    if (this.remote === undefined)
      throw new pulumi.ResourceError(`${this.constructor.name}: the hosts were never handed over`, this);
    return this.remote;
  }

  get env(): DockerEngine {
    return this.engines.env;
  }

  get gatewayPrivateAddress(): pulumi.Input<string> {
    return this.engines.gatewayPrivateAddress;
  }

  get gatewayReachedAt(): pulumi.Input<string> {
    return this.engines.gatewayReachedAt;
  }

  get gatewayTunnel(): pulumi.Input<GatewayTunnelSpec> {
    return this.engines.gatewayTunnel;
  }

  computer(computer: PlannedComputer): DockerEngine {
    return this.engines.computer(computer);
  }

  computerAddress(computer: PlannedComputer): pulumi.Input<string> {
    return this.engines.computerAddress(computer);
  }
}
