// The hosts target: existing Docker hosts reached over SSH (on-premises machines, another cloud's VMs), one for
// the env and one per computer, each named in the config with its address, user and host key. Everything done on
// them is RemoteEngines', as for the VMs the ec2 target creates; what guards their ports is the hosts' own
// firewall (the ec2 target's security groups say what it must allow).
import * as pulumi from "@pulumi/pulumi";
import type { HostConfig } from "../../src/plan/types";
import type { EnvTargetArgs } from "../engine/envTarget";
import type { RemoteHost } from "./remoteEngines";
import { RemoteTarget } from "./remote";

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

/** A multi env on existing Docker hosts reached over SSH, named in the config. */
export class HostsTarget extends RemoteTarget {
  constructor(name: string, args: EnvTargetArgs, opts?: pulumi.ComponentResourceOptions) {
    super("multienv:hosts:HostsTarget", name, {}, opts);
    const hosts = args.plan.hosts;
    if (hosts === undefined)
      throw new pulumi.ResourceError(
        "multienv:hosts: target is hosts and the hosts are missing; set multienv:hosts (env, computers.<name>)",
        this,
      );
    const computers = Object.fromEntries(args.plan.computers.map((c) => [c.name, remoteHost(hosts.computers[c.name])]));
    this.handOver(name, args, remoteHost(hosts.env), computers);
    this.registerOutputs({});
  }
}
