// A replayed live site's replay server on the kubernetes target: one pod (`<site>-replay`) answering the site's
// pages and calls from its recording, reached by the gateway alone (the plan's NetworkPolicies) and reaching nothing.
// It runs the recording's image, as on Docker: FROM multienv/replay-server, the HAR copied in, tagged by its
// SHA-256; the nodes get it as they get the project's images (`imageRegistry`, else loaded on the nodes), since a
// recording can be tens of MiB, past what a ConfigMap holds. Its episode is kept in an emptyDir across a restart
// of its container, and its capture is the sidecars every captured website pod has.
import * as pulumi from "@pulumi/pulumi";
import * as k8s from "@pulumi/kubernetes";
import type { Plan, PlannedWebsite } from "../../src/plan";
import { capturedContainer, kubernetesImage, type PlannedPod } from "../../src/plan/targets/kubernetes";
import { kubernetesReplayServerConfig } from "../../src/plan/targets/kubernetes-services";
import { CAPTURES_DIR, REPLAY_STATE_DIR } from "../../src/plan/topology";
import { captureServerToken, replayServerToken } from "../../src/protocol/auth";
import { REPLAY_SERVER_ENV } from "../../src/protocol/replay-server-config";
import type { KubernetesTarget } from "./target";
import { podBasics, podMetadata, restricted, scratch, secretEnv } from "./pods";
import { captureContainers } from "./website";

export interface KubernetesReplayServerArgs {
  /** The plan: capture (the replay server's capture, as a website pod's). */
  plan: Pick<Plan, "capture">;
  /** The planned site; it must be a replayed one (`replay` set). */
  site: PlannedWebsite;
  /** The cluster and namespace. */
  target: KubernetesTarget;
  /** Its pod, as the plan places it. */
  pod: PlannedPod;
  /** The env's control token (a secret): the replay server's own token, and its capture server's, derive from it. */
  controlToken: pulumi.Output<string>;
}

/** One replayed site's replay server, a pod of its own. */
export class KubernetesReplayServer extends pulumi.ComponentResource {
  readonly pod: k8s.core.v1.Pod;

  constructor(name: string, args: KubernetesReplayServerArgs, opts?: pulumi.ComponentResourceOptions) {
    super("multienv:kubernetes:KubernetesReplayServer", name, {}, opts);
    const { site, target, pod } = args;
    const replay = site.replay;
    if (replay === undefined)
      throw new pulumi.ResourceError(
        `KubernetesReplayServer ${name}: site ${site.name} is not replayed in this plan`,
        this,
      );
    const secret = new k8s.core.v1.Secret(
      `${name}-env`,
      {
        metadata: { name: `${pod.name}-env`, namespace: target.namespaceName, labels: { ...pod.labels } },
        type: "Opaque",
        stringData: pulumi.secret(
          args.controlToken.apply((token) => ({
            token: replayServerToken(token, site.name),
            ...(pod.capture !== undefined
              ? { captureToken: captureServerToken(token, capturedContainer(pod.capture)) }
              : {}),
          })),
        ),
      },
      { parent: this, provider: target.provider },
    );
    const state = scratch("replay-state", REPLAY_STATE_DIR);
    const tmp = scratch("tmp", "/tmp");
    const captures = pod.capture !== undefined ? captureContainers(args.plan, pod, target, secret) : [];
    this.pod = new k8s.core.v1.Pod(
      name,
      {
        metadata: podMetadata(target, pod),
        spec: {
          ...podBasics(target, pod),
          ...(captures.length > 0 ? { initContainers: captures } : {}),
          containers: [
            {
              name: pod.container,
              image: kubernetesImage(target.cluster, replay.recordingImage),
              imagePullPolicy: target.cluster.imagePullPolicy,
              env: [
                { name: REPLAY_SERVER_ENV.config, value: JSON.stringify(kubernetesReplayServerConfig(site)) },
                secretEnv(REPLAY_SERVER_ENV.token, secret, "token"),
              ],
              ports: pod.ports
                .filter((p) => p.name !== "captures")
                .map((p) => ({ name: p.name, containerPort: p.port })),
              // The plan's limit, as on Docker, and as much requested so the scheduler places it where that fits: past
              // it the container restarts and the server goes on with its episode, kept in its emptyDir, rather than
              // taking the node's memory from the env's other pods.
              resources: { limits: { memory: `${replay.memoryMiB}Mi` }, requests: { memory: `${replay.memoryMiB}Mi` } },
              // Ready once it listens, which it does with its recording indexed: the gateway, created after this
              // pod is ready, and a reset that recreates it find it answering.
              readinessProbe: { tcpSocket: { port: replay.port }, periodSeconds: 1, failureThreshold: 3 },
              volumeMounts: [state.mount, tmp.mount],
              securityContext: restricted(true),
            },
          ],
          volumes: [
            state.volume,
            tmp.volume,
            ...(captures.length > 0 ? [scratch("captures", CAPTURES_DIR).volume] : []),
          ],
        },
      },
      target.podOptions(this),
    );
    this.registerOutputs({ pod: this.pod.metadata.name });
  }
}
