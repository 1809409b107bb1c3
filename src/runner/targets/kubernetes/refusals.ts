// What a cluster refuses a deploy, said in one line while the deploy is under way. A bare pod the cluster cannot run
// stays Pending, and the provider waits for it to be Ready until its timeout (10 minutes): a pod no node takes (the
// scheduler's Unschedulable: node selector, taints, max pods, memory or CPU requests) or one the node's CNI gives no
// address (its pod range used up: FailedCreatePodSandBox). The runner watches the stack's namespace while it deploys
// and, once such a condition has held a while (the scheduler and the kubelet retry, and a node can come back), ends
// the deploy with what ran out and what to do. What the API server refuses outright (a ResourceQuota exceeded, too
// many requests) comes back as the engine's error: engineRefusal turns that into the same kind of line.
import type { CoreV1Api, CoreV1Event, V1Pod } from "@kubernetes/client-node";
import { coreApi, loadKubeConfig, type ClusterTarget } from "../../../engines/kubernetes";
import { RunnerError } from "../../errors";

/** A condition that keeps a pod from running, as the watch sees it on one look. */
export interface PodBlock {
  pod: string;
  /** What it is about (one kind of block per pod at a time): `unschedulable` or `no-address`. */
  kind: "unschedulable" | "no-address";
  /** The refusal, one line, without the stack's name. */
  line: string;
}

/** The scheduler's message without its preemption half (which repeats the first in other words) and its dot. */
function schedulerReason(message: string): string {
  return message
    .split(/\s*preemption:/)[0]
    .trim()
    .replace(/\.$/, "");
}

/** What to do about the scheduler's refusal, by what its message says ran out or did not match. */
function schedulingAdvice(message: string, stack: string): string {
  if (/Too many pods/i.test(message))
    return "every node runs its most pods already: deploy fewer envs at once, take others down, or add nodes";
  if (/Insufficient (memory|cpu|ephemeral-storage)/i.test(message))
    return "the nodes have no room left for its requests: take other envs down, deploy fewer at once, or add nodes";
  if (/node affinity|node selector|didn't match/i.test(message))
    return "no node has the labels its nodeSelector asks for: fix kubernetes.nodeSelector or placement, or label a node";
  if (/taint/i.test(message))
    return "the nodes carry taints it does not tolerate (or are not ready): add kubernetes.tolerations, or bring the nodes back";
  return `\`kubectl -n ${stack} describe pod\` says more`;
}

/** The CNI's words for an address range with no address left (host-local IPAM, as kube-router and the bridge use). */
const NO_ADDRESS = /no IP addresses available|failed to allocate for range|range is full|no available IP/i;

/**
 * The blocks of the namespace's pods on one look: each Pending pod the scheduler marked Unschedulable, and each
 * Pending pod with a sandbox the CNI gave no address (from the namespace's Warning events). Pure.
 */
export function podBlocks(pods: V1Pod[], events: CoreV1Event[], stack: string): PodBlock[] {
  const blocks: PodBlock[] = [];
  for (const pod of pods) {
    const name = pod.metadata?.name ?? "";
    if (pod.status?.phase !== "Pending" || pod.metadata?.deletionTimestamp) continue;
    const unscheduled = (pod.status.conditions ?? []).find(
      (c) => c.type === "PodScheduled" && c.status === "False" && c.reason === "Unschedulable",
    );
    if (unscheduled) {
      const reason = schedulerReason(unscheduled.message ?? "no node fits");
      blocks.push({
        pod: name,
        kind: "unschedulable",
        line: `pod ${name} fits on no node of the cluster (${reason}): ${schedulingAdvice(reason, stack)}`,
      });
      continue;
    }
    const sandbox = events.find(
      (e) =>
        e.type === "Warning" &&
        e.reason === "FailedCreatePodSandBox" &&
        e.involvedObject?.name === name &&
        NO_ADDRESS.test(e.message ?? ""),
    );
    if (sandbox) {
      const node = pod.spec?.nodeName ?? sandbox.source?.host ?? "its node";
      const range = /range set: (\S+)/.exec(sandbox.message ?? "")?.[1];
      blocks.push({
        pod: name,
        kind: "no-address",
        line: `pod ${name} gets no address: the pod range of node ${node}${range ? ` (${range})` : ""} is used up; deploy fewer envs at once, take others down, or give the nodes larger pod CIDRs`,
      });
    }
  }
  return blocks;
}

/**
 * The one line for an engine error that is the API server refusing the deploy outright, undefined for any other.
 * Pure; `error` is the engine's error text (the resource it is about first).
 */
export function engineRefusal(error: string, stack: string): string | undefined {
  const quota = /exceeded quota: ([^,\s]+), requested: ([^,]+(?:,[^,:]+=[^,]+)*), used: (\S+?), limited: (\S+)/.exec(
    error,
  );
  if (quota) {
    const pod = /pods \\?"([^"\\]+)\\?" is forbidden/.exec(error)?.[1];
    return `stack ${stack}: the cluster's ResourceQuota ${quota[1]} in namespace ${stack} refuses ${pod ? `pod ${pod}` : "the deploy"} (requested ${quota[2]}, used ${quota[3]}, limited to ${quota[4]}): raise the quota (\`kubectl -n ${stack} edit resourcequota ${quota[1]}\`) or deploy a smaller env`;
  }
  if (/forbidden: status unknown for quota: ([^,\s]+)/.test(error)) {
    const name = /status unknown for quota: ([^,\s]+)/.exec(error)![1];
    return `stack ${stack}: the cluster's ResourceQuota ${name} in namespace ${stack} is not counted yet, so the API server refuses pods; deploy again in a moment`;
  }
  if (/\b429\b|Too Many Requests|too many requests/i.test(error))
    return `stack ${stack}: the cluster's API server refused requests as too many (429 Too Many Requests): deploy fewer envs at once (deployStacks' concurrency), or raise the API server's limits`;
  return undefined;
}

/** The first of a deploy's engine errors that is the API server refusing it outright, as its one line. */
export function firstEngineRefusal(errors: string[], stack: string): string | undefined {
  return errors.map((error) => engineRefusal(error, stack)).find((line) => line !== undefined);
}

export interface RefusalWatchOptions {
  /** Between two looks at the namespace (default 5 s: two requests a look). */
  pollMs?: number;
  /** How long a block must hold before it is the deploy's refusal (default 30 s: the scheduler and kubelet retry). */
  holdMs?: number;
}

/**
 * Watches the namespace `stack` while its deploy is under way: calls `refused` once, with the stack's one-line
 * refusal, when a pod has been blocked the same way for `holdMs`. A namespace not there yet, or a look the API server
 * did not answer, is no block. Returns the stop.
 */
export function watchRefusals(
  core: CoreV1Api,
  stack: string,
  refused: (line: string) => void,
  options: RefusalWatchOptions = {},
): () => void {
  const pollMs = options.pollMs ?? 5_000;
  const holdMs = options.holdMs ?? 30_000;
  const since = new Map<string, number>();
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  const look = async () => {
    try {
      const [pods, events] = await Promise.all([
        core.listNamespacedPod({ namespace: stack }),
        core.listNamespacedEvent({ namespace: stack, fieldSelector: "type=Warning" }),
      ]);
      const blocks = podBlocks(pods.items, events.items, stack);
      const now = Date.now();
      const seen = new Set(blocks.map((b) => `${b.pod}|${b.kind}`));
      for (const key of [...since.keys()]) if (!seen.has(key)) since.delete(key);
      for (const block of blocks) {
        const key = `${block.pod}|${block.kind}`;
        const first = since.get(key) ?? now;
        since.set(key, first);
        if (now - first >= holdMs && !stopped) {
          stopped = true;
          refused(`stack ${stack}: ${block.line}`);
          return;
        }
      }
    } catch {
      // No namespace yet, or no answer this time: the next look asks again.
    }
    if (!stopped) timer = setTimeout(() => void look(), pollMs);
  };
  timer = setTimeout(() => void look(), pollMs);
  return () => {
    stopped = true;
    if (timer) clearTimeout(timer);
  };
}

/** What the cluster refused a deploy, as the watch of its namespace found it, and the signal the deploy stops by. */
export interface DeployRefusalWatch {
  signal: AbortSignal;
  line?: string;
  stop: () => void;
}

/**
 * A watch of the deploying stack's namespace whose signal aborts once a pod is blocked for good, logging the line;
 * none (a signal never aborted) without a cluster (another target's deploy). A cluster the kubeconfig does not name
 * is the program's to report: the watch is then none too.
 */
export function watchDeployRefusals(
  cluster: ClusterTarget | undefined,
  stack: string,
  log: (line: string) => void,
): DeployRefusalWatch {
  const abort = new AbortController();
  const watch: DeployRefusalWatch = { signal: abort.signal, stop: () => undefined };
  let core: CoreV1Api;
  try {
    if (cluster === undefined) return watch;
    core = coreApi(loadKubeConfig(cluster));
  } catch {
    return watch;
  }
  watch.stop = watchRefusals(core, stack, (line) => {
    watch.line = line;
    log(`${line}; cancelling the deploy`);
    abort.abort();
  });
  return watch;
}

/** A deploy the cluster refused: its line, and what is left of it. */
export function refusedDeploy(stack: string, line: string): RunnerError {
  return new RunnerError(
    `${line}. What was created is in the state: \`multienv down ${stack}\` removes it, \`multienv up ${stack}\` tries again`,
  );
}
