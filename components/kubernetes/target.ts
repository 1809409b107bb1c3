// The kubernetes target: the cluster the kubeconfig names (one explicit provider), the task's namespace, a
// ClusterIP Service in front of every pod the plan places, and the NetworkPolicies that are the env's walls.
// The pods themselves are the website, gateway and computer components' (website.ts,
// gateway.ts, computer.ts); each is created after every policy, so no pod runs unwalled.
import * as os from "node:os";
import * as pulumi from "@pulumi/pulumi";
import * as k8s from "@pulumi/kubernetes";
import type { Plan, PlannedKubernetes } from "../../src/plan";
import { kubernetesImage, kubernetesNetworkPolicies, type PlannedPod } from "../../src/plan/targets/kubernetes";
import { PROJECT_IMAGES, type ProjectImageRole } from "../../src/plan/images";
import { LABELS } from "../../src/protocol/labels";

export interface KubernetesTargetArgs {
  /** The stack, the pods the plan places (websites, computers, capture) and the cluster section. */
  plan: Pick<Plan, "stack" | "capture" | "websites" | "computers" | "kubernetes">;
  /** Every pod the plan places: a Service goes in front of each that has ports. */
  pods: PlannedPod[];
}

/** A multi env's namespace on a Kubernetes cluster, its Services and its NetworkPolicies. */
export class KubernetesTarget extends pulumi.ComponentResource {
  readonly provider: k8s.Provider;
  readonly namespace: k8s.core.v1.Namespace;
  /** The namespace's name, known once it exists (pods are created in it after it). */
  readonly namespaceName: pulumi.Output<string>;
  readonly cluster: PlannedKubernetes;
  readonly policies: k8s.networking.v1.NetworkPolicy[];
  private readonly services = new Map<string, k8s.core.v1.Service>();

  constructor(name: string, args: KubernetesTargetArgs, opts?: pulumi.ComponentResourceOptions) {
    super("multienv:kubernetes:KubernetesTarget", name, {}, opts);
    const { plan } = args;
    if (plan.kubernetes === undefined)
      throw new pulumi.ResourceError(`KubernetesTarget ${name}: the plan's target is not kubernetes`, this);
    this.cluster = plan.kubernetes;
    const k = plan.kubernetes;
    this.provider = new k8s.Provider(
      `${name}-cluster`,
      {
        ...(k.kubeconfig !== undefined ? { kubeconfig: expandHome(k.kubeconfig) } : {}),
        ...(k.context !== undefined ? { context: k.context } : {}),
        // Resources of a cluster that is gone are dropped from the state on destroy rather than failing it forever.
        deleteUnreachable: true,
      },
      { parent: this },
    );
    const children = { parent: this, provider: this.provider };
    this.namespace = new k8s.core.v1.Namespace(
      `${name}-namespace`,
      {
        metadata: {
          name: k.namespace,
          labels: {
            [LABELS.stack]: plan.stack,
            // Capture containers hold NET_RAW and NET_ADMIN, beyond the baseline profile; without capture the
            // cluster itself refuses any pod of this namespace that asks for more than baseline allows.
            ...(plan.capture.enabled ? {} : { "pod-security.kubernetes.io/enforce": "baseline" }),
          },
        },
      },
      children,
    );
    this.namespaceName = this.namespace.metadata.name;
    this.policies = kubernetesNetworkPolicies(plan).map(
      (policy) =>
        new k8s.networking.v1.NetworkPolicy(
          `${name}-${policy.name}`,
          {
            metadata: { name: policy.name, namespace: this.namespaceName, labels: { [LABELS.stack]: plan.stack } },
            spec: policy.spec,
          },
          children,
        ),
    );
    for (const pod of args.pods) {
      if (pod.ports.length === 0) continue;
      this.services.set(
        pod.name,
        new k8s.core.v1.Service(
          `${name}-${pod.name}`,
          {
            metadata: { name: pod.name, namespace: this.namespaceName, labels: { ...pod.labels } },
            spec: {
              type: "ClusterIP",
              selector: { ...pod.labels },
              ports: pod.ports.map((p) => ({ name: p.name, port: p.port, targetPort: p.port, protocol: "TCP" })),
            },
          },
          children,
        ),
      );
    }
    this.registerOutputs({ namespace: this.namespaceName });
  }

  /**
   * The ClusterIP of the Service in front of pod `name`; unknown while that Service is only previewed. A new
   * Service's preview has no address (the API server's dry run allocates none), and pods whose hostAliases lacked
   * the address for several Services were refused in their own dry run (duplicate entries for the key ip ""); an
   * unknown address makes the provider skip a pod's dry run until the Service exists.
   */
  clusterIp(name: string): pulumi.Output<string> {
    const service = this.services.get(name);
    if (service === undefined) throw new Error(`no Service ${name} in the plan's pods`);
    return service.spec.clusterIP.apply((ip) =>
      !ip && pulumi.runtime.isDryRun() ? (pulumi.unknown as unknown as string) : ip,
    );
  }

  /** Options for a pod of this target: on its cluster, after every NetworkPolicy. */
  podOptions(parent: pulumi.Resource): pulumi.CustomResourceOptions {
    return {
      parent,
      provider: this.provider,
      dependsOn: [...this.policies, ...this.services.values()],
      // A pod spec's fields are immutable: a change is a new pod, and the old one goes first (its name is taken).
      deleteBeforeReplace: true,
    };
  }

  /** A project image's reference on this cluster. */
  image(role: ProjectImageRole): string {
    return kubernetesImage(this.cluster, PROJECT_IMAGES[role].imageName);
  }
}

function expandHome(file: string): string {
  return file === "~" || file.startsWith("~/") ? os.homedir() + file.slice(1) : file;
}
