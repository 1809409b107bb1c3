// The services' configs on the kubernetes target: what src/plan/services.ts writes for Docker, with each
// listener bound to its pod's own hostname (the pod's address, from the /etc/hosts the kubelet writes) where
// Docker binds it to a name on one network, and the gateway's runner listener on its pod's loopback, which a
// port-forward reaches and nothing else does. The names each service dials stay as they are on Docker; the pod's
// hostAliases (src/plan/targets/kubernetes.ts) map them to the Services behind them.
import { capturedContainer, kubernetesNames, kubernetesPods } from "./kubernetes";
import {
  browserServiceConfig,
  engineMachines,
  gatewayServiceConfig,
  siteProxyConfigOnHosts,
  siteProxyServiceConfig,
  type BrowserServiceConfig,
  type GatewayServiceConfig,
  type SiteProxyServiceConfig,
} from "../services";
import { replayServerServiceConfig } from "../replay";
import { CAPTURE_SERVER_PORT } from "../../protocol/traffic";
import type { ReplayServerConfig } from "../../protocol/replay-server-config";
import type { Plan, PlannedComputer, PlannedWebsite } from "../types";

/** `MULTIENV_GATEWAY_CONFIG` on a cluster: captures read from each website pod's capture server. */
export function kubernetesGatewayConfig(plan: Plan): GatewayServiceConfig {
  const { capturesDir: _, ...config } = gatewayServiceConfig(plan);
  const captureSources: Record<string, string> = {};
  for (const pod of kubernetesPods(plan))
    if (pod.capture !== undefined)
      captureSources[capturedContainer(pod.capture)] = `http://${pod.name}:${CAPTURE_SERVER_PORT}`;
  return {
    ...config,
    listen: { host: "127.0.0.1", port: plan.gateway.port },
    ...(config.browse ? { browse: { ...config.browse, hosts: [kubernetesNames.gateway] } } : {}),
    ...(plan.capture.enabled ? { captureSources } : {}),
  };
}

/** `MULTIENV_SITE_PROXY_CONFIG` on a cluster: its deny list every non-public range (the cluster's own among them). */
export function kubernetesSiteProxyConfig(plan: Plan, computer: PlannedComputer): SiteProxyServiceConfig {
  const own = kubernetesNames.proxy(computer.name);
  const config = siteProxyConfigOnHosts(siteProxyServiceConfig(plan, computer), {
    subnets: [],
    envHost: undefined,
    computerHosts: [],
    machines: engineMachines(plan, undefined),
  });
  return { ...config, listen: { ...config.listen, host: own }, control: { ...config.control, host: own } };
}

/** `MULTIENV_BROWSER_CONFIG` on a cluster: the DevTools relay on the browser pod's own address. */
export function kubernetesBrowserConfig(plan: Plan, computer: PlannedComputer): BrowserServiceConfig {
  return { ...browserServiceConfig(plan, computer), cdpHost: kubernetesNames.browser(computer.name) };
}

/** `MULTIENV_REPLAY_SERVER_CONFIG` on a cluster: both listeners on the replay pod's own address. */
export function kubernetesReplayServerConfig(site: PlannedWebsite): ReplayServerConfig {
  if (site.replay === undefined) throw new Error(`site ${site.name} is not replayed`);
  const config = replayServerServiceConfig(site.replay);
  const own = kubernetesNames.replay(site.name);
  return { ...config, listen: { ...config.listen, host: own }, control: { ...config.control, host: own } };
}
