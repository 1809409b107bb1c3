// Which target component deploys a plan's engines: the one factory of EnvTarget (engine/envTarget.ts), above the
// targets' folders, so the targets implementing it import the interface without importing each other.
import type * as pulumi from "@pulumi/pulumi";
import { DockerTarget } from "./docker/target";
import { Ec2Target } from "./ec2/target";
import type { EnvTarget, EnvTargetArgs } from "./engine/envTarget";
import { HostsTarget } from "./hosts/target";

/**
 * The target component for the plan's target, a child of `opts.parent`. It takes its owner's name (the MultiEnv's;
 * the type tells them apart), so what it creates is named `<env>-engine`, `<env>-env-sg`, not
 * `<env>-docker-engine`: the names stay short, and two envs of different names never share one.
 */
export function envTargetFor(args: EnvTargetArgs, opts: pulumi.ComponentResourceOptions, owner: string): EnvTarget {
  if (args.plan.target === "ec2") return new Ec2Target(owner, args, { ...opts, aliases: [{ name: `${owner}-ec2` }] });
  if (args.plan.target === "hosts")
    return new HostsTarget(owner, args, { ...opts, aliases: [{ name: `${owner}-hosts` }] });
  return new DockerTarget(owner, args, { ...opts, aliases: [{ name: `${owner}-docker` }] });
}
