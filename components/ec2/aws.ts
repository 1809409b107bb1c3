// The AWS SDK, loaded on first use: it is the largest package the program has (seconds of module loading), and
// only the ec2 target's components need it, so a docker deploy never loads it.
import type * as awsSdk from "@pulumi/aws";

let loaded: typeof awsSdk | undefined;

export function aws(): typeof awsSdk {
  loaded ??= require("@pulumi/aws") as typeof awsSdk;
  return loaded;
}
