// A computer on the kubernetes target: its site proxy and its browser, each in a pod of its own, so the
// browser's only way out is its proxy (a pod's containers share one network namespace: one pod would give the
// browser the proxy's egress). The browser trusts the proxy's CA: an init container fetches the certificate
// from the proxy's forward port (it is public; the key never leaves the proxy's pod). Both pods take the
// config's runtimeClassName (a sandboxed runtime such as gVisor, where the cluster offers one).
import * as pulumi from "@pulumi/pulumi";
import * as k8s from "@pulumi/kubernetes";
import type { BrowserServiceConfig, PlannedComputer, SiteProxyServiceConfig } from "../../src/plan";
import { fetchCaCommand, type PlannedPod } from "../../src/plan/targets/kubernetes";
import { CA_CERT_PATH, CA_DIR, CA_KEY_PATH, SITE_PROXY_LOG_PATH } from "../../src/plan/topology";
import { SITE_PROXY_CA_PATH } from "../../src/protocol/site-proxy";
import { computerControlToken } from "../../src/protocol/auth";
import { ENV_VARS } from "../../src/protocol/env";
import type { KubernetesTarget } from "./target";
import { podBasics, podMetadata, restricted, scratch, secretEnv } from "./pods";
import * as path from "node:path";

export interface KubernetesComputerArgs {
  /** The planned computer. */
  computer: PlannedComputer;
  /** The cluster and namespace. */
  target: KubernetesTarget;
  /** Its site proxy's pod and its browser's, as the plan places them. */
  pods: { proxy: PlannedPod; browser: PlannedPod };
  /** `MULTIENV_SITE_PROXY_CONFIG`, from `kubernetesSiteProxyConfig(plan, computer)`. */
  proxyConfig: SiteProxyServiceConfig;
  /** `MULTIENV_BROWSER_CONFIG`, from `kubernetesBrowserConfig(plan, computer)`. */
  browserConfig: BrowserServiceConfig;
  /** The env's control token (a secret): the proxy gets this computer's own token derived from it. */
  controlToken: pulumi.Output<string>;
  /** Resources the proxy needs before it starts (the gateway it forwards synthetic names to). */
  dependsOn?: pulumi.Resource[];
}

/** A computer on a cluster: its site proxy's pod and its browser's pod. */
export class KubernetesComputer extends pulumi.ComponentResource {
  readonly proxy: k8s.core.v1.Pod;
  readonly browser: k8s.core.v1.Pod;

  constructor(name: string, args: KubernetesComputerArgs, opts?: pulumi.ComponentResourceOptions) {
    super("multienv:kubernetes:KubernetesComputer", name, {}, opts);
    const { computer, target } = args;
    const { proxy: proxyPod, browser: browserPod } = args.pods;
    const runtime =
      target.cluster.runtimeClassName !== undefined ? { runtimeClassName: target.cluster.runtimeClassName } : {};

    const secret = new k8s.core.v1.Secret(
      `${name}-proxy-env`,
      {
        metadata: { name: `${proxyPod.name}-env`, namespace: target.namespaceName, labels: { ...proxyPod.labels } },
        type: "Opaque",
        stringData: {
          token: pulumi.secret(args.controlToken.apply((token) => computerControlToken(token, computer.name))),
        },
      },
      { parent: this, provider: target.provider },
    );
    const ca = scratch("ca", CA_DIR);
    const caKey = scratch("ca-private", path.dirname(CA_KEY_PATH));
    const logs = scratch("log", path.dirname(SITE_PROXY_LOG_PATH));
    const tmp = scratch("tmp", "/tmp");
    const proxyOptions = target.podOptions(this);
    this.proxy = new k8s.core.v1.Pod(
      `${name}-proxy`,
      {
        metadata: podMetadata(target, proxyPod),
        spec: {
          ...podBasics(target, proxyPod),
          ...runtime,
          containers: [
            {
              name: proxyPod.container,
              image: target.image("site-proxy"),
              imagePullPolicy: target.cluster.imagePullPolicy,
              env: [
                { name: ENV_VARS.siteProxyConfig, value: JSON.stringify(args.proxyConfig) },
                secretEnv(ENV_VARS.siteProxyToken, secret, "token"),
              ],
              ports: proxyPod.ports.map((p) => ({ name: p.name, containerPort: p.port })),
              volumeMounts: [ca.mount, caKey.mount, logs.mount, tmp.mount],
              securityContext: restricted(true),
            },
          ],
          volumes: [ca.volume, caKey.volume, logs.volume, tmp.volume],
        },
      },
      { ...proxyOptions, dependsOn: [...(proxyOptions.dependsOn as pulumi.Resource[]), ...(args.dependsOn ?? [])] },
    );

    const home = scratch("home", "/root");
    const shm = scratch("shm", "/dev/shm", "Memory", "512Mi");
    const browserOptions = target.podOptions(this);
    const image = computer.image ?? target.image("browser");
    this.browser = new k8s.core.v1.Pod(
      `${name}-browser`,
      {
        metadata: podMetadata(target, browserPod),
        spec: {
          ...podBasics(target, browserPod),
          ...runtime,
          // The pod's sandbox as PID 1 reaps the processes a Chromium ended at each reset leaves behind: the launcher
          // (Node) does not, a warm env resets thousands of times, and a pod has no init of Docker's kind. The pod's
          // only other container (fetch-ca) has ended before the browser starts, so nothing else shares its PIDs.
          shareProcessNamespace: true,
          initContainers: [
            {
              name: "fetch-ca",
              image,
              imagePullPolicy: target.cluster.imagePullPolicy,
              command: fetchCaCommand(CA_CERT_PATH, args.browserConfig.proxy, SITE_PROXY_CA_PATH),
              volumeMounts: [ca.mount],
              securityContext: restricted(true),
            },
          ],
          containers: [
            {
              name: browserPod.container,
              image,
              imagePullPolicy: target.cluster.imagePullPolicy,
              env: [{ name: ENV_VARS.browserConfig, value: JSON.stringify(args.browserConfig) }],
              ports: browserPod.ports.map((p) => ({ name: p.name, containerPort: p.port })),
              volumeMounts: [{ ...ca.mount, readOnly: true }, home.mount, shm.mount, tmp.mount],
              // The project's browser writes only to the folders mounted here; an image of the computer's own may not.
              securityContext: restricted(computer.image === undefined),
            },
          ],
          volumes: [ca.volume, home.volume, shm.volume, tmp.volume],
        },
      },
      { ...browserOptions, dependsOn: [...(browserOptions.dependsOn as pulumi.Resource[]), this.proxy] },
    );
    this.registerOutputs({ proxy: this.proxy.metadata.name, browser: this.browser.metadata.name });
  }
}
