// The gateway on the kubernetes target: one pod, its runner listener on the pod's loopback (reached by a
// port-forward through the API server alone), its browse listener on the pod's address for the computers'
// proxies, ready only when its /healthz answers 200 (every site ready, every capture writing), so the deploy
// waits for a healthy env and fails when it is not.
import * as pulumi from "@pulumi/pulumi";
import * as k8s from "@pulumi/kubernetes";
import type { GatewayServiceConfig, Plan } from "../../src/plan";
import { gatewayReadyCommand, type PlannedPod } from "../../src/plan/targets/kubernetes";
import { GATEWAY_START_SECONDS } from "../../src/plan/wiring";
import { ENV_VARS } from "../../src/protocol/env";
import { portForwardUrl, type GatewayPortForward } from "../../src/protocol/port-forward";
import type { KubernetesTarget } from "./target";
import { podBasics, podMetadata, restricted, scratch, secretEnv } from "./pods";

export interface KubernetesGatewayArgs {
  /** The plan: the gateway's port, and the pods it dials (websites, computers, capture). */
  plan: Pick<Plan, "stack" | "gateway" | "capture" | "websites" | "computers">;
  /** The cluster and namespace. */
  target: KubernetesTarget;
  /** The gateway's pod, as the plan places it. */
  pod: PlannedPod;
  /** `MULTIENV_GATEWAY_CONFIG`, from `kubernetesGatewayConfig(plan)`. */
  serviceConfig: GatewayServiceConfig;
  /** The control token (a secret). */
  controlToken: pulumi.Output<string>;
  /** Pods the gateway's health depends on (the website pods): created first. */
  dependsOn: pulumi.Resource[];
}

/** The env's gateway pod, and how the runner reaches it. */
export class KubernetesGateway extends pulumi.ComponentResource {
  readonly pod: k8s.core.v1.Pod;
  /** `kubernetes://<namespace>/gateway:<port>`: names the pod; the runner forwards a local port to it. */
  readonly url: pulumi.Output<string>;
  /** The stack output `gatewayPortForward`. */
  readonly portForward: pulumi.Output<GatewayPortForward>;

  constructor(name: string, args: KubernetesGatewayArgs, opts?: pulumi.ComponentResourceOptions) {
    super("multienv:kubernetes:KubernetesGateway", name, {}, opts);
    const { plan, target } = args;
    const { pod } = args;
    if (args.serviceConfig.listen.host !== "127.0.0.1")
      throw new pulumi.ResourceError(
        `KubernetesGateway ${name}: the runner listener must be bound to the pod's loopback (127.0.0.1), not ${args.serviceConfig.listen.host}: a port-forward is the runner's only way in`,
        this,
      );
    const secret = new k8s.core.v1.Secret(
      `${name}-env`,
      {
        metadata: { name: "gateway-env", namespace: target.namespaceName, labels: { ...pod.labels } },
        type: "Opaque",
        stringData: { controlToken: pulumi.secret(args.controlToken) },
      },
      { parent: this, provider: target.provider },
    );
    const tmp = scratch("tmp", "/tmp");
    const options = target.podOptions(this);
    this.pod = new k8s.core.v1.Pod(
      name,
      {
        metadata: podMetadata(target, pod),
        spec: {
          ...podBasics(target, pod),
          containers: [
            {
              name: pod.container,
              image: target.image("gateway"),
              imagePullPolicy: target.cluster.imagePullPolicy,
              env: [
                { name: ENV_VARS.gatewayConfig, value: JSON.stringify(args.serviceConfig) },
                secretEnv(ENV_VARS.controlToken, secret, "controlToken"),
              ],
              ports: pod.ports.map((p) => ({ name: p.name, containerPort: p.port })),
              readinessProbe: {
                exec: { command: gatewayReadyCommand(plan.gateway.port) },
                periodSeconds: 1,
                timeoutSeconds: 5,
                failureThreshold: 3,
              },
              volumeMounts: [tmp.mount],
              securityContext: restricted(true),
            },
          ],
          volumes: [tmp.volume],
        },
      },
      {
        ...options,
        dependsOn: [...(options.dependsOn as pulumi.Resource[]), ...args.dependsOn],
        customTimeouts: {
          create: `${GATEWAY_START_SECONDS}s`,
          update: `${GATEWAY_START_SECONDS}s`,
        },
      },
    );
    const forward = {
      namespace: target.namespaceName,
      pod: this.pod.metadata.name,
      port: plan.gateway.port,
      ...(target.cluster.kubeconfig !== undefined ? { kubeconfig: target.cluster.kubeconfig } : {}),
      ...(target.cluster.context !== undefined ? { context: target.cluster.context } : {}),
    };
    this.portForward = pulumi.output(forward);
    this.url = this.portForward.apply(portForwardUrl);
    this.registerOutputs({ url: this.url, portForward: this.portForward });
  }
}
