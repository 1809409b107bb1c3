// What every pod of the kubernetes target shares: its metadata, its placement on the cluster's nodes, the names it
// dials as /etc/hosts entries (the ClusterIPs of the Services behind them), and the security context of its
// containers. Not a component: the kubernetes components build their pod specs from these.
import * as pulumi from "@pulumi/pulumi";
import type * as k8s from "@pulumi/kubernetes";
import type { PlannedKubernetes } from "../../src/plan";
import { podPlacement, type PlannedPod } from "../../src/plan/targets/kubernetes";
import type { KubernetesTarget } from "./target";

type PodSpec = k8s.types.input.core.v1.PodSpec;
type SecurityContext = k8s.types.input.core.v1.SecurityContext;

/** A pod's metadata: its name in the task's namespace and the `multienv.*` labels the Docker containers carry. */
export function podMetadata(target: KubernetesTarget, pod: PlannedPod): k8s.types.input.meta.v1.ObjectMeta {
  return { name: pod.name, namespace: target.namespaceName, labels: { ...pod.labels } };
}

/**
 * The part of a pod spec every pod has: no service account token (a pod never speaks to the API server), no
 * Service environment variables (they would list the namespace's addresses), no host namespaces, restarts in
 * place, the default seccomp profile, its group's node selector and tolerations (the plan's), and the names it dials.
 */
export function podBasics(target: KubernetesTarget, pod: PlannedPod): Omit<PodSpec, "containers"> {
  const k: PlannedKubernetes = target.cluster;
  const placed = podPlacement(k, pod);
  return {
    automountServiceAccountToken: false,
    enableServiceLinks: false,
    hostNetwork: false,
    hostPID: false,
    hostIPC: false,
    restartPolicy: "Always",
    terminationGracePeriodSeconds: 5,
    securityContext: { seccompProfile: { type: "RuntimeDefault" } },
    ...(Object.keys(placed.nodeSelector).length > 0 ? { nodeSelector: { ...placed.nodeSelector } } : {}),
    ...(placed.tolerations.length > 0 ? { tolerations: placed.tolerations.map((t) => ({ ...t })) } : {}),
    hostAliases: hostAliases(target, pod),
  };
}

/** The pod's hostAliases: each name it dials at the ClusterIP of the Service of the pod behind it. */
function hostAliases(target: KubernetesTarget, pod: PlannedPod): pulumi.Input<k8s.types.input.core.v1.HostAlias[]> {
  const byService = new Map<string, string[]>();
  for (const [alias, service] of Object.entries(pod.hostAliases))
    byService.set(service, [...(byService.get(service) ?? []), alias]);
  return pulumi.all(
    [...byService.entries()].map(([service, hostnames]) =>
      target.clusterIp(service).apply((ip) => ({ ip, hostnames: hostnames.sort() })),
    ),
  );
}

/**
 * A container that needs no capability: every one dropped, no privilege escalation, a read-only root where the
 * image writes only to the folders the pod mounts.
 */
export function restricted(readOnlyRoot: boolean, add: string[] = []): SecurityContext {
  return {
    allowPrivilegeEscalation: false,
    privileged: false,
    readOnlyRootFilesystem: readOnlyRoot,
    capabilities: { drop: ["ALL"], ...(add.length > 0 ? { add } : {}) },
  };
}

/** An environment variable read from a key of a Secret: the value never appears in the pod spec. */
export function secretEnv(name: string, secret: k8s.core.v1.Secret, key: string): k8s.types.input.core.v1.EnvVar {
  return { name, valueFrom: { secretKeyRef: { name: secret.metadata.name, key } } };
}

/** An emptyDir volume and where a container mounts it. */
export function scratch(name: string, mountPath: string, medium?: "Memory", sizeLimit?: string) {
  return {
    volume: { name, emptyDir: { ...(medium ? { medium } : {}), ...(sizeLimit ? { sizeLimit } : {}) } },
    mount: { name, mountPath },
  };
}
