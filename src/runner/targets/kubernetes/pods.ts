// The pods of a stack on the kubernetes target at run time (the stack's state names them: state.ts):
// their state asked of the API server, and one recreated when reset starts it over (a bare pod has no controller to
// restart it: it is read, deleted, and created again from its own spec, less what the cluster set on it).
import type { CoreV1Api, V1Node, V1Pod } from "@kubernetes/client-node";
import { RunnerError } from "../../errors";
import { apiErrorText, isNotFound } from "../../../engines/kubernetes";
import type { StackPod } from "./state";

/** A pod's state as the API server reports it. */
export interface PodState extends StackPod {
  /** Its phase (`Running`, `Pending`, `Failed`, ...), `Missing` when the cluster has no such pod. */
  phase: string;
  /** Its Ready condition. */
  ready: boolean;
  /** Restarts of its containers (sidecars included). */
  restarts: number;
  /** Why a container is waiting or ended (`CrashLoopBackOff`, `ErrImageNeverPull`), when one is. */
  reason?: string;
  /** Why the cluster could not be asked. */
  error?: string;
  /** The node the pod was scheduled on. */
  node?: string;
  /**
   * Why its node is not Ready (`Ready is Unknown since ...: Kubelet stopped posting node status.`), when it is not: the
   * pod is lost with it, whatever its own status still says (the node's kubelet is what would update it).
   */
  nodeNotReady?: string;
  /** Whether the pod runs a capture sidecar (a website pod of an env that captures). */
  captures?: boolean;
}

/** The name of the capture sidecar in a website pod (components/kubernetes). */
const CAPTURE_CONTAINER = "capture";

/** Why a node is not Ready, in one line; undefined when it is Ready. */
export function nodeNotReady(node: V1Node | undefined): string | undefined {
  if (node === undefined) return "it is no longer in the cluster";
  const ready = (node.status?.conditions ?? []).find((c) => c.type === "Ready");
  if (ready === undefined) return "it has reported no Ready condition";
  if (ready.status === "True") return undefined;
  const since = ready.lastTransitionTime ? ` since ${new Date(ready.lastTransitionTime).toISOString()}` : "";
  const why = [ready.reason, ready.message].filter((s) => s !== undefined && s !== "").join(": ");
  return `Ready is ${ready.status}${since}${why ? ` (${why})` : ""}`;
}

/**
 * A pod's state from what the API server said of it and, given `nodes` (the cluster's, by name), of its node: a pod
 * on a node that is not Ready is marked so (`nodeNotReady`).
 */
export function podStateOf(pod: StackPod, live: V1Pod | undefined, nodes?: Map<string, V1Node>): PodState {
  if (live === undefined) return { ...pod, phase: "Missing", ready: false, restarts: 0 };
  const node = live.spec?.nodeName;
  const lost = node !== undefined && nodes !== undefined ? nodeNotReady(nodes.get(node)) : undefined;
  const captures = (live.spec?.initContainers ?? []).some((c) => c.name === CAPTURE_CONTAINER);
  const statuses = [...(live.status?.initContainerStatuses ?? []), ...(live.status?.containerStatuses ?? [])];
  const ready = (live.status?.conditions ?? []).some((c) => c.type === "Ready" && c.status === "True");
  const reason = statuses
    .map((s) => s.state?.waiting?.reason ?? (s.state?.terminated?.exitCode ? s.state.terminated.reason : undefined))
    .find((r) => r !== undefined && r !== "PodInitializing" && r !== "ContainerCreating");
  return {
    ...pod,
    phase: live.status?.phase ?? "Unknown",
    ready,
    restarts: statuses.reduce((sum, s) => sum + (s.restartCount ?? 0), 0),
    ...(reason ? { reason } : {}),
    ...(node !== undefined ? { node } : {}),
    ...(lost !== undefined ? { nodeNotReady: lost } : {}),
    ...(captures ? { captures } : {}),
  };
}

/** How long `status` waits for one answer of the API server before naming what did not answer. */
export const API_ANSWER_MS = 15_000;

/** `call`, or an error naming `what` once `ms` have passed without its answer. */
export async function answerWithin<T>(call: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms / 1000} s`)), ms);
  });
  try {
    return await Promise.race([call, late]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Each pod's state, one listing per namespace, and the nodes they are on; a namespace the cluster could not be asked
 * (or did not answer within `timeoutMs`) marks its pods alone, and nodes that cannot be listed leave the pods
 * without their node's verdict.
 */
export async function podStates(
  core: CoreV1Api,
  pods: StackPod[],
  options: { timeoutMs?: number } = {},
): Promise<PodState[]> {
  const timeoutMs = options.timeoutMs ?? API_ANSWER_MS;
  const namespaces = [...new Set(pods.map((p) => p.namespace))];
  const listed = new Map<string, Map<string, V1Pod> | { error: string }>();
  const [nodes] = await Promise.all([
    answerWithin(core.listNode(), timeoutMs, "listing the cluster's nodes").then(
      (list) => new Map(list.items.map((n) => [n.metadata?.name ?? "", n])),
      () => undefined,
    ),
    ...namespaces.map(async (namespace) => {
      try {
        const list = await answerWithin(
          core.listNamespacedPod({ namespace }),
          timeoutMs,
          `listing the pods of namespace ${namespace}`,
        );
        listed.set(namespace, new Map(list.items.map((p) => [p.metadata?.name ?? "", p])));
      } catch (error) {
        listed.set(namespace, { error: apiErrorText(error) });
      }
    }),
  ]);
  return pods.map((pod) => {
    const found = listed.get(pod.namespace)!;
    if (found instanceof Map) return podStateOf(pod, found.get(pod.name), nodes);
    return { ...pod, phase: "Unknown", ready: false, restarts: 0, error: found.error };
  });
}

/** Metadata the API server sets on a pod, which a create must not carry. */
const SERVER_SET_METADATA = [
  "uid",
  "resourceVersion",
  "creationTimestamp",
  "deletionTimestamp",
  "deletionGracePeriodSeconds",
  "generation",
  "managedFields",
  "selfLink",
] as const;

/** The service-account token volume admission adds to a pod; it is added again to the new one. */
const TOKEN_VOLUME = /^kube-api-access-[a-z0-9]+$/;

/**
 * The pod to create in place of `pod`: its own spec and metadata, less what the cluster set (its identity and
 * timestamps, its status, the node the scheduler chose, the priority admission computed, the token volume admission
 * added), so the cluster takes it as it took the first. Pure; `pod` is not changed.
 */
export function recreateSpec(pod: V1Pod): V1Pod {
  const copy = structuredClone(pod);
  const metadata = { ...copy.metadata };
  for (const key of SERVER_SET_METADATA) delete metadata[key];
  const spec = { ...copy.spec! };
  delete spec.nodeName;
  delete spec.priority;
  delete spec.preemptionPolicy;
  delete spec.ephemeralContainers;
  const tokenVolumes = new Set(
    (spec.volumes ?? []).filter((v) => TOKEN_VOLUME.test(v.name) && v.projected !== undefined).map((v) => v.name),
  );
  if (tokenVolumes.size > 0) {
    spec.volumes = spec.volumes!.filter((v) => !tokenVolumes.has(v.name));
    const withoutToken = <T extends { volumeMounts?: { name: string }[] }>(container: T): T => ({
      ...container,
      volumeMounts: container.volumeMounts?.filter((m) => !tokenVolumes.has(m.name)),
    });
    spec.containers = spec.containers.map(withoutToken);
    if (spec.initContainers) spec.initContainers = spec.initContainers.map(withoutToken);
  }
  return { apiVersion: copy.apiVersion ?? "v1", kind: copy.kind ?? "Pod", metadata, spec };
}

export interface WaitOptions {
  timeoutMs?: number;
  pollMs?: number;
}

const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms));

/** Waits until the pod is gone (its name free again); a RunnerError naming it past the timeout. */
export async function waitPodGone(
  core: CoreV1Api,
  namespace: string,
  name: string,
  options: WaitOptions = {},
): Promise<void> {
  const timeoutMs = options.timeoutMs ?? 120_000;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      await core.readNamespacedPod({ name, namespace });
    } catch (error) {
      if (isNotFound(error)) return;
      throw error;
    }
    if (Date.now() > deadline)
      throw new RunnerError(
        `pod ${name} in namespace ${namespace} was deleted but is still there after ${timeoutMs / 1000} s; \`kubectl -n ${namespace} describe pod ${name}\` says why`,
      );
    await sleep(options.pollMs ?? 250);
  }
}

/** Waits until the pod is Ready; a RunnerError naming it and why it is not (a failed phase ends the wait at once). */
export async function waitPodReady(
  core: CoreV1Api,
  namespace: string,
  name: string,
  options: WaitOptions = {},
): Promise<void> {
  const timeoutMs = options.timeoutMs ?? 180_000;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const state = podStateOf({ name, namespace }, await core.readNamespacedPod({ name, namespace }));
    if (state.ready) return;
    const stuck = state.reason !== undefined && /BackOff|Err|Invalid/.test(state.reason);
    if (state.phase === "Failed" || state.phase === "Succeeded" || stuck || Date.now() > deadline)
      throw new RunnerError(
        `pod ${name} in namespace ${namespace} is not ready (${state.phase}${state.reason ? `, ${state.reason}` : ""}${Date.now() > deadline ? `, after ${timeoutMs / 1000} s` : ""}); \`kubectl -n ${namespace} describe pod ${name}\` says why`,
      );
    await sleep(options.pollMs ?? 250);
  }
}

/**
 * Recreates a bare pod: reads it, deletes it (1 s grace, as reset's docker restarts give), waits until it is gone,
 * creates it again from its own spec (recreateSpec) and waits until it is Ready. Everything of the old pod goes with
 * it, its emptyDir volumes (captures) included.
 */
export async function recreatePod(
  core: CoreV1Api,
  namespace: string,
  name: string,
  options: WaitOptions & { readyTimeoutMs?: number } = {},
): Promise<void> {
  let pod: V1Pod;
  try {
    pod = await core.readNamespacedPod({ name, namespace });
  } catch (error) {
    if (isNotFound(error))
      throw new RunnerError(
        `pod ${name} is not in namespace ${namespace}, so it cannot be started over; \`multienv up ${namespace}\` deploys it again`,
        { cause: error },
      );
    throw error;
  }
  const body = recreateSpec(pod);
  await core.deleteNamespacedPod({ name, namespace, gracePeriodSeconds: 1 }).catch((error: unknown) => {
    if (!isNotFound(error)) throw error;
  });
  await waitPodGone(core, namespace, name, options);
  await core.createNamespacedPod({ namespace, body });
  await waitPodReady(core, namespace, name, { ...options, timeoutMs: options.readyTimeoutMs });
}

/**
 * How long past its deletion's deadline (its grace period) a terminating pod on a Ready node is waited for before it
 * is force-deleted: a node lost only moments ago is still Ready to the API server (until its node-monitor grace
 * period has passed), and its pods would wait for it as long.
 */
export const FORCE_DELETE_OVERDUE_MS = 30_000;

/** A terminating pod that will not finish on its own, and why. */
export interface StuckPod {
  namespace: string;
  name: string;
  node?: string;
  why: string;
}

/**
 * The terminating pods to force-delete: each on a node that is not Ready (its kubelet, which alone would confirm its
 * containers stopped, does not answer, so the pod stays Terminating for ever), and each still there `overdueMs` past
 * its deletion's deadline. Pure.
 */
export function stuckPods(
  pods: V1Pod[],
  nodes: Map<string, V1Node> | undefined,
  now: number,
  overdueMs = FORCE_DELETE_OVERDUE_MS,
): StuckPod[] {
  return pods.flatMap((pod): StuckPod[] => {
    const deadline = pod.metadata?.deletionTimestamp;
    if (deadline === undefined) return [];
    const namespace = pod.metadata?.namespace ?? "";
    const name = pod.metadata?.name ?? "";
    const node = pod.spec?.nodeName;
    const at = node !== undefined ? { node } : {};
    const lost = node !== undefined && nodes !== undefined ? nodeNotReady(nodes.get(node)) : undefined;
    if (lost !== undefined) return [{ namespace, name, ...at, why: `its node ${node} is not Ready: ${lost}` }];
    const overdue = now - new Date(deadline).getTime();
    if (overdue >= overdueMs)
      return [
        {
          namespace,
          name,
          ...at,
          why: `it was still terminating ${Math.round(overdue / 1000)} s past its grace period${node ? ` on node ${node}` : ""}`,
        },
      ];
    return [];
  });
}

/**
 * Force-deletes (grace 0) the terminating pods of `namespaces` that will not finish on their own (stuckPods); a line
 * for each, naming it and why. Its containers, if its node still runs them, are ended by that node's kubelet when it
 * comes back and finds the pod gone.
 */
export async function forceDeleteStuckPods(
  core: CoreV1Api,
  namespaces: string[],
  options: { overdueMs?: number; timeoutMs?: number; skip?: Set<string> } = {},
): Promise<string[]> {
  const timeoutMs = options.timeoutMs ?? API_ANSWER_MS;
  const listed = await Promise.all(
    namespaces.map((namespace) =>
      answerWithin(core.listNamespacedPod({ namespace }), timeoutMs, `listing the pods of namespace ${namespace}`),
    ),
  );
  const terminating = listed.flatMap((list) => list.items).filter((p) => p.metadata?.deletionTimestamp !== undefined);
  if (terminating.length === 0) return [];
  const nodes = await answerWithin(core.listNode(), timeoutMs, "listing the cluster's nodes").then(
    (list) => new Map(list.items.map((n) => [n.metadata?.name ?? "", n])),
    () => undefined,
  );
  const lines: string[] = [];
  for (const stuck of stuckPods(terminating, nodes, Date.now(), options.overdueMs)) {
    const key = `${stuck.namespace}/${stuck.name}`;
    if (options.skip?.has(key)) continue;
    await answerWithin(
      core.deleteNamespacedPod({ name: stuck.name, namespace: stuck.namespace, gracePeriodSeconds: 0 }),
      timeoutMs,
      `force-deleting pod ${stuck.name}`,
    ).catch((error: unknown) => {
      if (!isNotFound(error)) throw error;
    });
    options.skip?.add(key);
    lines.push(
      `pod ${stuck.name} in namespace ${stuck.namespace} force-deleted (grace 0), since ${stuck.why}; its containers there end when that node's kubelet is back`,
    );
  }
  return lines;
}
