// The runtime of a deployed stack (env-runtime.ts), chosen from its state: the program's Kubernetes resources make it
// the kubernetes target's, anything else the docker target's (docker, ec2, hosts: every one runs containers on Docker
// engines). The cluster's client (@kubernetes/client-node) is loaded only once a cluster is reached
// (src/engines/kubernetes.ts).
import { dockerRuntime } from "./docker/runtime";
import type { StateResource } from "../../engines/docker";
import type { EnvRuntime } from "./env-runtime";
import { kubernetesRuntime } from "./kubernetes/runtime";
import { isKubernetesState } from "./kubernetes/state";

export type { EnvRuntime } from "./env-runtime";

/** The runtime of a stack whose state holds `resources` (and, when known, its outputs). */
export function runtimeOf(
  resources: StateResource[],
  outputs: Record<string, unknown> = {},
  env: NodeJS.ProcessEnv = process.env,
): EnvRuntime {
  return isKubernetesState(resources) ? kubernetesRuntime(resources, outputs, env) : dockerRuntime(resources);
}
