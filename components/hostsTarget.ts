// The hosts target: existing Docker hosts reached over SSH (on-premises machines, another cloud's VMs), one for
// the env and one per computer, each named in the config with its address, user and host key. Everything done on
// them is RemoteEngines', as for the VMs the ec2 target creates; what guards their ports is the hosts' own
// firewall (the ec2 target's security groups say what it must allow).
import * as pulumi from "@pulumi/pulumi";
import type { PlannedComputer } from "../src/plan";
import type { HostConfig } from "../src/plan/types";
import type { DockerEngine } from "./dockerEngine";
import type { EnvTarget, EnvTargetArgs } from "./envTarget";
import type { GatewayTunnel as GatewayTunnelSpec } from "../src/plan/ssh";
import { RemoteEngines, type RemoteHost } from "./remoteEngines";

function remoteHost(host: HostConfig): RemoteHost {
  return {
    ssh: {
      host: host.address,
      user: host.user,
      hostKey: host.hostKey,
      ...(host.port ? { port: host.port } : {}),
      ...(host.identityFile ? { identityFile: host.identityFile } : {}),
    },
    privateAddress: host.privateAddress ?? host.address,
    booted: false,
  };
}

export class HostsTarget extends pulumi.ComponentResource implements EnvTarget {
  readonly env: DockerEngine;
  readonly gatewayPrivateAddress: pulumi.Input<string>;
  readonly gatewayReachedAt: pulumi.Input<string>;
  readonly gatewayTunnel: pulumi.Input<GatewayTunnelSpec>;
  private readonly engines: RemoteEngines;

  constructor(name: string, args: EnvTargetArgs, opts?: pulumi.ComponentResourceOptions) {
    super("multienv:hosts:HostsTarget", name, {}, opts);
    const hosts = args.plan.hosts;
    if (hosts === undefined)
      throw new pulumi.ResourceError(
        "multienv:hosts: target is hosts and the hosts are missing; set multienv:hosts (env, computers.<name>)",
        this,
      );
    const computers = Object.fromEntries(args.plan.computers.map((c) => [c.name, remoteHost(hosts.computers[c.name])]));
    this.engines = new RemoteEngines(
      `${args.plan.stack}-remote`,
      { ...args, env: remoteHost(hosts.env), computers },
      { parent: this },
    );
    this.env = this.engines.env;
    this.gatewayPrivateAddress = this.engines.gatewayPrivateAddress;
    this.gatewayReachedAt = this.engines.gatewayReachedAt;
    this.gatewayTunnel = this.engines.gatewayTunnel;
    this.registerOutputs({});
  }

  computer(computer: PlannedComputer): DockerEngine {
    return this.engines.computer(computer);
  }

  computerAddress(computer: PlannedComputer): pulumi.Input<string> {
    return this.engines.computerAddress(computer);
  }
}
