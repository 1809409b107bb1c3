// How the runner reaches a gateway on a Kubernetes cluster: a port-forward through the cluster's API server to
// the gateway's pod, opened for each command and closed with it. The gateway's runner listener is bound to the
// pod's loopback, which a port-forward reaches and no pod, Service or node does. Plain data: the stack output
// `gatewayPortForward`, read by the runner and by the program's own dynamic resources (self-test, collector).

/** The stack output `gatewayPortForward`: where the gateway's runner listener is, and how the cluster is reached. */
export interface GatewayPortForward {
  /** The kubeconfig file; unset: `KUBECONFIG`, else `~/.kube/config`, as kubectl does. */
  kubeconfig?: string;
  /** The kubeconfig context; unset: its current context. */
  context?: string;
  /** The task's namespace. */
  namespace: string;
  /** The gateway's pod. */
  pod: string;
  /** The runner listener's port inside the pod, on its loopback. */
  port: number;
}

/** The scheme of `gatewayUrl` on the kubernetes target: it names the pod; the runner forwards a local port to it. */
export const PORT_FORWARD_SCHEME = "kubernetes:";

/** `gatewayUrl` on the kubernetes target: `kubernetes://<namespace>/<pod>:<port>`, never dialled as it is. */
export function portForwardUrl(forward: Pick<GatewayPortForward, "namespace" | "pod" | "port">): string {
  return `kubernetes://${forward.namespace}/${forward.pod}:${forward.port}`;
}
