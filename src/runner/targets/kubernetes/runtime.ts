// The kubernetes target's runtime (../env-runtime.ts): the stack's pods, found in its state (state.ts), asked
// of the cluster through its API server; a site or a capture starts over as its pod recreated (the captures live in
// an emptyDir of the website pod, so they go with it); after a destroy, the stack's namespace must be gone.
import type { StateResource } from "../../../engines/docker";
import type { ContainerState, EnvRuntime } from "../env-runtime";
import { errorMessage } from "../../errors";
import { coreApi, loadKubeConfig, type LoadedKubeConfig } from "../../../engines/kubernetes";
import { namespaceGone } from "./namespaces";
import { forceDeleteStuckPods, podStates, recreatePod, type PodState } from "./pods";
import { clusterTargetOf, stackNamespaces, stackPods, type StackPod } from "./state";

/** How often a destroy looks for pods that will not finish terminating on their own. */
const FORCE_SWEEP_MS = 3_000;

const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms));

/** A pod's state in the shape `status` and `ls` show every target's containers in. */
export function asContainerState(pod: PodState, context: string): ContainerState {
  return {
    name: pod.name,
    kind: "pod",
    ...(pod.role ? { role: pod.role } : {}),
    ...(pod.site ? { site: pod.site } : {}),
    ...(pod.computer ? { computer: pod.computer } : {}),
    engine: `${context}/${pod.namespace}`,
    state: pod.phase.toLowerCase(),
    ...(pod.phase === "Missing" || pod.error !== undefined ? {} : { health: pod.ready ? "ready" : "not ready" }),
    restarts: pod.restarts,
    ...(pod.reason ? { reason: pod.reason } : {}),
    ...(pod.error !== undefined ? { error: pod.error } : {}),
    ...(pod.node !== undefined ? { node: pod.node } : {}),
    ...(pod.nodeNotReady !== undefined ? { nodeNotReady: pod.nodeNotReady } : {}),
    ...(pod.captures ? { captures: true } : {}),
  };
}

/**
 * The website pods that start over: each named site's server, and with `captures` every website pod (a replay
 * server's among them: its captures are in its pod's emptyDir).
 */
export function podsToStartOver(pods: StackPod[], servers: string[], captures: boolean): StackPod[] {
  const missing = servers.filter((site) => !pods.some((p) => p.role === "server" && p.site === site));
  if (missing.length > 0)
    throw new Error(
      `site ${missing.join(", ")} declares no reset operation and its server pod is not in the stack's state`,
    );
  return pods.filter(
    (p) =>
      (p.role === "server" && p.site !== undefined && servers.includes(p.site)) ||
      (captures && (p.role === "server" || p.role === "frontend" || p.role === "replay")),
  );
}

export function kubernetesRuntime(
  resources: StateResource[],
  outputs: Record<string, unknown> = {},
  env: NodeJS.ProcessEnv = process.env,
): EnvRuntime {
  const target = clusterTargetOf(resources, outputs);
  const pods = stackPods(resources);
  const namespaces = stackNamespaces(resources);
  let loaded: LoadedKubeConfig | undefined;
  const cluster = () => (loaded ??= loadKubeConfig(target, env));
  return {
    kind: "kubernetes",
    // A website pod is recreated with its capture (its emptyDir holds the files).
    capturesStartSitesOver: true,
    async states() {
      if (pods.length === 0) return [];
      let current: LoadedKubeConfig;
      try {
        current = cluster();
      } catch (error) {
        const line = errorMessage(error).split("\n")[0];
        return pods.map((p) =>
          asContainerState({ ...p, phase: "Unknown", ready: false, restarts: 0, error: line }, target.context ?? "?"),
        );
      }
      return (await podStates(coreApi(current), pods)).map((p) => asContainerState(p, current.context));
    },
    async startOver({ servers, captures }) {
      const chosen = podsToStartOver(pods, servers, captures);
      if (chosen.length === 0) return;
      const core = coreApi(cluster());
      await Promise.all(chosen.map((p) => recreatePod(core, p.namespace, p.name)));
    },
    async destroying(destroy, log) {
      if (namespaces.length === 0) return destroy();
      const core = coreApi(cluster());
      const forced = new Set<string>();
      let destroyed = false;
      // Swept every few seconds while the destroy waits for its pods and namespace to go: a sweep that fails (the
      // API server busy) is tried again, and the destroy's own error is the one that counts.
      const sweeping = (async () => {
        while (!destroyed) {
          try {
            for (const line of await forceDeleteStuckPods(core, namespaces, { skip: forced })) log(line);
          } catch (error) {
            log(`warning: terminating pods not checked this time: ${errorMessage(error).split("\n")[0]}`);
          }
          for (let waited = 0; waited < FORCE_SWEEP_MS && !destroyed; waited += 250) await sleep(250);
        }
      })();
      try {
        return await destroy();
      } finally {
        destroyed = true;
        await sweeping;
      }
    },
    async checkDestroyed() {
      const gone: string[] = [];
      const left: string[] = [];
      if (namespaces.length === 0) return { gone, left };
      const current = cluster();
      const core = coreApi(current);
      for (const name of namespaces) {
        const phase = await namespaceGone(core, name);
        if (phase === undefined) gone.push(`namespace ${name}`);
        else
          left.push(
            `namespace ${name} is still there (${phase}); \`kubectl --context ${current.context} delete namespace ${name}\` removes it`,
          );
      }
      return { gone, left };
    },
  };
}
