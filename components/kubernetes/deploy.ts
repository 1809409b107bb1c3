// The kubernetes family deployed: the target (namespace, Services, NetworkPolicies), then the websites' pods (a
// replayed site's replay server among them), the gateway's and the computers', each part handed its own pods by the
// plan; what MultiEnv needs of them handed back.
import { kubernetesPodsByPart } from "../../src/plan/targets/kubernetes";
import {
  kubernetesBrowserConfig,
  kubernetesGatewayConfig,
  kubernetesSiteProxyConfig,
} from "../../src/plan/targets/kubernetes-services";
import type { DeployArgs, Deployed } from "../deployed";
import { KubernetesComputer } from "./computer";
import { KubernetesGateway } from "./gateway";
import { KubernetesReplayServer } from "./replayServer";
import { KubernetesTarget } from "./target";
import { KubernetesWebsite } from "./website";

/** The env on a Kubernetes cluster: a namespace of pods walled by NetworkPolicies, each part handed its own pods. */
export function deployOnCluster(owner: string, args: DeployArgs): Deployed {
  const { plan, parent } = args;
  const pods = kubernetesPodsByPart(plan);
  const target = new KubernetesTarget(owner, { plan, pods: pods.all }, { parent });
  const websites = plan.websites.map(
    (site) =>
      new KubernetesWebsite(
        `${owner}-${site.name}`,
        {
          plan,
          site,
          target,
          pods: pods.sites[site.name],
          secrets: args.secrets,
          account: args.accounts?.[site.name],
          controlToken: args.controlToken,
        },
        { parent },
      ),
  );
  const replays = plan.websites.flatMap((site) =>
    site.replay
      ? [
          new KubernetesReplayServer(
            `${owner}-${site.name}-replay`,
            { plan, site, target, pod: pods.replays[site.name], controlToken: args.controlToken },
            { parent },
          ),
        ]
      : [],
  );
  const gateway = new KubernetesGateway(
    `${owner}-gateway`,
    {
      plan,
      target,
      pod: pods.gateway,
      serviceConfig: kubernetesGatewayConfig(plan),
      controlToken: args.controlToken,
      dependsOn: [...websites.flatMap((w) => w.pods), ...replays.map((r) => r.pod)],
    },
    { parent },
  );
  const computers = plan.computers.map(
    (computer) =>
      new KubernetesComputer(
        `${owner}-${computer.name}`,
        {
          computer,
          target,
          pods: pods.computers[computer.name],
          proxyConfig: kubernetesSiteProxyConfig(plan, computer),
          browserConfig: kubernetesBrowserConfig(plan, computer),
          controlToken: args.controlToken,
          dependsOn: [gateway],
        },
        { parent },
      ),
  );
  const underTest = [gateway.pod, ...computers.flatMap((c) => [c.proxy, c.browser])];
  return {
    gatewayUrl: gateway.url,
    underTest,
    // A pod's id is its namespace and name, the same after a replacement: its uid tells them apart.
    deployed: underTest.map((pod) => pod.metadata.uid),
    collectedFrom: [gateway, ...computers],
    gatewayPortForward: gateway.portForward,
  };
}
