// A stack on the kubernetes target as its state records it: the program's Kubernetes resources (bare pods labelled
// with their role, site or computer; the stack's namespace; the provider naming the kubeconfig and context) and the
// cluster they are on. Pure reading of the state, without the cluster's client: what tells a kubernetes stack from a
// docker one costs nothing on the docker target.
import { LABELS } from "../../../protocol/labels";
import type { GatewayPortForward } from "../../../protocol/port-forward";
import type { StateResource } from "../../../engines/docker";
import type { ClusterTarget } from "../../../engines/kubernetes";

/** The type tokens of the program's Kubernetes resources that the runner reads in a state. */
export const KUBERNETES_TYPES = {
  pod: "kubernetes:core/v1:Pod",
  namespace: "kubernetes:core/v1:Namespace",
  provider: "pulumi:providers:kubernetes",
} as const;

/** A pod of the stack, as its state records it. */
export interface StackPod {
  name: string;
  namespace: string;
  role?: string;
  site?: string;
  computer?: string;
}

interface Metadata {
  name?: unknown;
  namespace?: unknown;
  labels?: Record<string, string>;
}

/** Every pod of a stack's state, with its labels' role, site and computer. */
export function stackPods(resources: StateResource[]): StackPod[] {
  return resources
    .filter((r) => r.type === KUBERNETES_TYPES.pod)
    .flatMap((r) => {
      const metadata = ((r.outputs?.metadata ?? r.inputs?.metadata) as Metadata | undefined) ?? {};
      if (typeof metadata.name !== "string" || typeof metadata.namespace !== "string") return [];
      const labels = metadata.labels ?? {};
      return [
        {
          name: metadata.name,
          namespace: metadata.namespace,
          ...(labels[LABELS.role] ? { role: labels[LABELS.role] } : {}),
          ...(labels[LABELS.site] ? { site: labels[LABELS.site] } : {}),
          ...(labels[LABELS.computer] ? { computer: labels[LABELS.computer] } : {}),
        },
      ];
    });
}

/** The namespaces of a stack's state (its Namespace resources' names). */
export function stackNamespaces(resources: StateResource[]): string[] {
  return resources
    .filter((r) => r.type === KUBERNETES_TYPES.namespace)
    .map((r) => ((r.outputs?.metadata ?? r.inputs?.metadata) as Metadata | undefined)?.name)
    .filter((name): name is string => typeof name === "string");
}

/** A path as the state may hold a provider's kubeconfig input (which may also be the file's text, or a secret). */
function asPath(value: unknown): string | undefined {
  return typeof value === "string" && value !== "" && !value.includes("\n") ? value : undefined;
}

/**
 * The cluster a stack is on: the kubeconfig and context of its `gatewayPortForward` output, else its kubernetes
 * provider's inputs (a path, not a kubeconfig's text), else kubectl's defaults.
 */
export function clusterTargetOf(resources: StateResource[], outputs: Record<string, unknown> = {}): ClusterTarget {
  const forward = outputs.gatewayPortForward as Partial<GatewayPortForward> | undefined;
  if (forward !== null && typeof forward === "object")
    return {
      ...(asPath(forward.kubeconfig) ? { kubeconfig: forward.kubeconfig } : {}),
      ...(typeof forward.context === "string" && forward.context ? { context: forward.context } : {}),
    };
  const inputs = resources.find((r) => r.type === KUBERNETES_TYPES.provider)?.inputs ?? {};
  const kubeconfig = asPath(inputs.kubeconfig);
  const context = typeof inputs.context === "string" && inputs.context !== "" ? inputs.context : undefined;
  return { ...(kubeconfig ? { kubeconfig } : {}), ...(context ? { context } : {}) };
}

/** True when the state holds the program's Kubernetes resources. */
export function isKubernetesState(resources: StateResource[]): boolean {
  return resources.some((r) => r.type === KUBERNETES_TYPES.pod || r.type === KUBERNETES_TYPES.namespace);
}
