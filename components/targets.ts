// Which target deploys a plan: the one place that names every target. The kubernetes target is a family of parts of
// its own (kubernetes/deploy.ts); the docker, hosts and ec2 targets each give the Docker-engine parts their engines
// (an EnvTarget, engine/envTarget.ts), which engine/deploy.ts deploys on. A new target is a folder beside theirs and
// a case here.
import type * as pulumi from "@pulumi/pulumi";
import type { DeployArgs, Deployed } from "./deployed";
import { DockerTarget } from "./docker/target";
import { Ec2Target } from "./ec2/target";
import { deployOnEngines } from "./engine/deploy";
import type { EnvTarget, EnvTargetArgs } from "./engine/envTarget";
import { HostsTarget } from "./hosts/target";
import { deployOnCluster } from "./kubernetes/deploy";

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

/** The env's parts on the plan's target, children of `args.parent`, and what MultiEnv needs of them. */
export function deployOnTarget(owner: string, args: DeployArgs): Deployed {
  if (args.plan.target === "kubernetes") return deployOnCluster(owner, args);
  const engines = envTargetFor(
    {
      plan: args.plan,
      projectImages: args.projectImages,
      recordingContext: args.recordingContext,
      runnerEngine: {},
    },
    { parent: args.parent },
    owner,
  );
  return deployOnEngines(owner, args, engines);
}
