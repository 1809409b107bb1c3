// A website on the kubernetes target: a pod per website container (its server, and a synthetic site's frontend),
// each with its capture when the env captures traffic. The capture is two native sidecars of that pod (init
// containers that keep running), started before the site's container, so the capture records from its first
// packet, and sharing the pod's network namespace, which outlives any restart of the site's container:
//   - `capture`: tcpdump, the only container of the env holding NET_RAW and NET_ADMIN, writing the rotating
//     files into an emptyDir of the pod;
//   - `capture-server`: hands those files (read-only) to the gateway alone, over the pod network, since the
//     gateway may be on another node and no volume spans nodes. It requires its own token (derived from the
//     control token and the container's name), which only it and the gateway hold.
import * as pulumi from "@pulumi/pulumi";
import * as k8s from "@pulumi/kubernetes";
import type { Plan, PlannedWebsite } from "../../src/plan";
import { configPath, formatProblem, siteServerUrl } from "../../src/plan";
import {
  capturedContainer,
  captureStartedCommand,
  kubernetesNames,
  type PlannedPod,
} from "../../src/plan/targets/kubernetes";
import { CAPTURE_IMAGE_ROLE } from "../../src/plan/images";
import { CAPTURES_DIR } from "../../src/plan/topology";
import { CAPTURE_SERVER_PORT } from "../../src/protocol/traffic";
import { CAPTURE_SERVER_ENV } from "../../src/protocol/gateway-config";
import { CAPTURE_POD_IP_ENV, captureCommand, websiteSettingsJson } from "../../src/plan/wiring";
import { secretReferenceProblems, siteSecretReferences } from "../../src/config/secrets";
import { captureServerToken } from "../../src/protocol/auth";
import { ENV_VARS } from "../../src/protocol/env";
import { LABELS } from "../../src/protocol/labels";
import type { KubernetesTarget } from "./target";
import { podBasics, podMetadata, restricted, scratch, secretEnv } from "./pods";

export interface KubernetesWebsiteArgs {
  /** The plan: the stack, its websites and computers (the pods' names), capture. */
  plan: Pick<Plan, "stack" | "capture" | "websites" | "computers">;
  /** The planned site. */
  site: PlannedWebsite;
  /** The cluster and namespace the site's pods run in. */
  target: KubernetesTarget;
  /** Its server's pod and its frontend's, as the plan places them. */
  pods: PlannedPod[];
  /** The stack's secret config values by key: each key the site's `secretSettings` names must be here. */
  secrets: Record<string, pulumi.Output<string>>;
  /** A pooled live site: the leased account's settings (a secret), put over the site's own. */
  account?: pulumi.Output<Record<string, unknown>>;
  /** The env's control token (a secret): each capture server gets its own token derived from it. */
  controlToken: pulumi.Output<string>;
}

/** A website of the env on a cluster: a pod for its server, one for its frontend, each with its capture. */
export class KubernetesWebsite extends pulumi.ComponentResource {
  readonly pods: k8s.core.v1.Pod[] = [];

  constructor(name: string, args: KubernetesWebsiteArgs, opts?: pulumi.ComponentResourceOptions) {
    super("multienv:kubernetes:KubernetesWebsite", name, {}, opts);
    const { plan, site, target } = args;
    const refs = siteSecretReferences(site.name, site.secretSettings);
    const unresolved = secretReferenceProblems(refs, (key) => (args.secrets[key] === undefined ? "unset" : "secret"));
    if (unresolved.length > 0)
      throw new pulumi.ResourceError(`KubernetesWebsite ${name}: ${unresolved.map(formatProblem).join("; ")}`, this);
    const secretValues = pulumi.all(Object.fromEntries(refs.map((ref) => [ref.setting, args.secrets[ref.key]])));
    for (const pod of args.pods) {
      const role = pod.siteRole ?? "server";
      const container = role === "server" ? site.server : site.frontend;
      if (container?.image === undefined) {
        const path = configPath(["websites", site.name, role, "image"]);
        throw new pulumi.ResourceError(
          formatProblem({
            path,
            message: `a website's ${role} needs an image (the task's own site image); set ${path}`,
          }),
          this,
        );
      }
      // The settings (secret values merged in) and the capture server's token, by reference from the pod.
      const secretData: Record<string, pulumi.Input<string>> = {};
      if (role === "server")
        secretData.settings =
          args.account === undefined
            ? secretValues.apply((values) => websiteSettingsJson(site.settings, values))
            : args.account.apply((settings) => websiteSettingsJson({ ...site.settings, ...settings }, {}));
      if (pod.capture !== undefined) {
        const captured = capturedContainer(pod.capture);
        secretData.captureToken = args.controlToken.apply((token) => captureServerToken(token, captured));
      }
      const secret = new k8s.core.v1.Secret(
        `${name}-${role}-env`,
        {
          metadata: { name: `${pod.name}-env`, namespace: target.namespaceName, labels: { ...pod.labels } },
          type: "Opaque",
          stringData: pulumi.secret(secretData),
        },
        { parent: this, provider: target.provider },
      );
      const env: k8s.types.input.core.v1.EnvVar[] = [
        { name: ENV_VARS.websiteDomains, value: JSON.stringify(site.domains) },
        ...(role === "server"
          ? [secretEnv(ENV_VARS.websiteSettings, secret, "settings")]
          : [{ name: ENV_VARS.websiteServer, value: siteServerUrl(site) }]),
      ];
      const captures = scratch("captures", CAPTURES_DIR);
      this.pods.push(
        new k8s.core.v1.Pod(
          `${name}-${role}`,
          {
            metadata: {
              ...podMetadata(target, pod),
              // Names only, never values; an annotation, since a setting's name need not be a label value.
              ...(role === "server" && (Object.keys(site.secretSettings).length > 0 || site.accountPool !== undefined)
                ? {
                    annotations: {
                      ...(Object.keys(site.secretSettings).length > 0
                        ? { [LABELS.secretSettings]: Object.keys(site.secretSettings).sort().join(",") }
                        : {}),
                      ...(site.accountPool !== undefined ? { [LABELS.accountPool]: site.accountPool } : {}),
                    },
                  }
                : {}),
            },
            spec: {
              ...podBasics(target, pod),
              ...(pod.capture !== undefined
                ? { initContainers: captureContainers(plan, pod, target, secret), volumes: [captures.volume] }
                : {}),
              containers: [
                {
                  name: role,
                  image: container.image,
                  imagePullPolicy: target.cluster.imagePullPolicy,
                  env,
                  ports: [{ name: "http", containerPort: container.port }],
                  // A site image is the task's own: it may write where it likes and bind a port below 1024, no more.
                  securityContext: restricted(false, ["NET_BIND_SERVICE"]),
                },
              ],
            },
          },
          target.podOptions(this),
        ),
      );
    }
    this.registerOutputs({ pods: this.pods.map((p) => p.metadata.name) });
  }
}

/** The capture's two native sidecars (see the file's header); a replay server's pod has them too. */
export function captureContainers(
  plan: Pick<Plan, "capture">,
  pod: PlannedPod,
  target: KubernetesTarget,
  secret: k8s.core.v1.Secret,
): k8s.types.input.core.v1.Container[] {
  const capture = pod.capture;
  if (capture === undefined) return [];
  const image = target.image(CAPTURE_IMAGE_ROLE);
  const mount = { name: "captures", mountPath: CAPTURES_DIR };
  return [
    {
      name: kubernetesNames.captureContainer,
      image,
      imagePullPolicy: target.cluster.imagePullPolicy,
      // Its own capture server's connections are left out by the pod's address and that port alone.
      command: captureCommand(plan, capture, CAPTURE_SERVER_PORT),
      env: [{ name: CAPTURE_POD_IP_ENV, valueFrom: { fieldRef: { fieldPath: "status.podIP" } } }],
      restartPolicy: "Always",
      volumeMounts: [mount],
      securityContext: restricted(true, ["NET_RAW", "NET_ADMIN", "SETGID"]),
      startupProbe: {
        exec: { command: captureStartedCommand(capture.filePrefix) },
        periodSeconds: 1,
        failureThreshold: 60,
      },
    },
    {
      name: kubernetesNames.captureServerContainer,
      image,
      imagePullPolicy: target.cluster.imagePullPolicy,
      command: ["node", "/opt/multienv/capture-server.js"],
      restartPolicy: "Always",
      env: [
        {
          name: CAPTURE_SERVER_ENV.config,
          value: JSON.stringify({
            listen: { host: pod.name, port: CAPTURE_SERVER_PORT },
            capturesDir: CAPTURES_DIR,
            container: capturedContainer(capture),
          }),
        },
        secretEnv(CAPTURE_SERVER_ENV.token, secret, "captureToken"),
      ],
      ports: [{ name: "captures", containerPort: CAPTURE_SERVER_PORT }],
      volumeMounts: [{ ...mount, readOnly: true }],
      securityContext: restricted(true),
      startupProbe: { tcpSocket: { port: CAPTURE_SERVER_PORT }, periodSeconds: 1, failureThreshold: 60 },
    },
  ];
}
