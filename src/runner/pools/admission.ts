// Admission: what an env of the task costs (its containers' memory when idle, measured once on a ready member and kept
// with the pool) against what the machine has free (MemAvailable), so a pool never grows into an out-of-memory
// failure halfway through a deploy.
import { readFile } from "node:fs/promises";
import { freemem } from "node:os";
import { engineClient } from "../../engines/docker";
import { coreApi, loadKubeConfig } from "../../engines/kubernetes";
import { LABELS } from "../../protocol/labels";
import type { GatewayPortForward } from "../../protocol/port-forward";

/** Memory left to the machine's other work, never counted as room for an env. */
export const MEMORY_RESERVE_BYTES = 512 * 1024 * 1024;

/** The machine's available memory: /proc/meminfo's MemAvailable (page cache it can drop counted), else os.freemem. */
export async function availableMemory(): Promise<number> {
  const meminfo = await readFile("/proc/meminfo", "utf8").catch(() => "");
  const kib = /^MemAvailable:\s+(\d+) kB/m.exec(meminfo)?.[1];
  return kib === undefined ? freemem() : Number(kib) * 1024;
}

/**
 * An idle stack's memory: the sum over its containers (label multienv.stack) of what `docker stats` shows, usage less
 * the page cache the kernel can drop (inactive_file).
 */
export async function stackMemory(stack: string): Promise<number> {
  const docker = engineClient();
  const containers = await docker.listContainers({ filters: { label: [`${LABELS.stack}=${stack}`] } });
  const usages = await Promise.all(
    containers.map(async (c) => {
      const stats = (await docker.getContainer(c.Id).stats({ stream: false })) as {
        memory_stats?: { usage?: number; stats?: { inactive_file?: number; cache?: number } };
      };
      const memory = stats.memory_stats ?? {};
      return Math.max(0, (memory.usage ?? 0) - (memory.stats?.inactive_file ?? memory.stats?.cache ?? 0));
    }),
  );
  return usages.reduce((a, b) => a + b, 0);
}

/** The cluster a kubernetes pool's members are on: the kubeconfig and context of a member's port-forward. */
export type PoolCluster = Pick<GatewayPortForward, "kubeconfig" | "context">;

interface NodeSummary {
  node: { memory?: { workingSetBytes?: number } };
  pods?: { podRef: { namespace: string }; memory?: { workingSetBytes?: number } }[];
}

/** Each ready node's kubelet summary (stats/summary through the API server) and allocatable memory. */
async function nodeSummaries(
  cluster: PoolCluster,
  env: NodeJS.ProcessEnv,
): Promise<{ allocatable: number; summary: NodeSummary }[]> {
  const core = coreApi(loadKubeConfig(cluster, env));
  const nodes = (await core.listNode()).items.filter((n) =>
    (n.status?.conditions ?? []).some((c) => c.type === "Ready" && c.status === "True"),
  );
  return Promise.all(
    nodes.map(async (node) => {
      const text = (await core.connectGetNodeProxyWithPath({
        name: node.metadata!.name!,
        path: "stats/summary",
      })) as unknown;
      const summary = (typeof text === "string" ? JSON.parse(text) : text) as NodeSummary;
      return { allocatable: quantityBytes(node.status?.allocatable?.memory ?? "0"), summary };
    }),
  );
}

const SUFFIXES: Record<string, number> = {
  Ki: 1024,
  Mi: 1024 ** 2,
  Gi: 1024 ** 3,
  Ti: 1024 ** 4,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  "": 1,
};

/** A Kubernetes memory quantity ("24581348Ki", "2Gi", "1e9") in bytes. */
export function quantityBytes(quantity: string): number {
  const m = /^(\d+(?:\.\d+)?(?:e\d+)?)(Ki|Mi|Gi|Ti|k|M|G|T)?$/.exec(quantity.trim());
  return m === null ? 0 : Number(m[1]) * SUFFIXES[m[2] ?? ""];
}

/**
 * What a cluster has for more envs: over its ready nodes, the allocatable memory (what the kubelet lets pods have)
 * less what the node's workloads use now (the kubelet's working set), as a pod's scheduling and eviction see it.
 */
export async function clusterAvailableMemory(cluster: PoolCluster, env: NodeJS.ProcessEnv = process.env) {
  const nodes = await nodeSummaries(cluster, env);
  return nodes.reduce((sum, n) => sum + Math.max(0, n.allocatable - (n.summary.node.memory?.workingSetBytes ?? 0)), 0);
}

/** An idle member's memory on a cluster: the working set of the pods of its namespace (the kubelet's summary). */
export async function namespaceMemory(
  cluster: PoolCluster,
  namespace: string,
  env: NodeJS.ProcessEnv = process.env,
): Promise<number> {
  const nodes = await nodeSummaries(cluster, env);
  return nodes
    .flatMap((n) => n.summary.pods ?? [])
    .filter((p) => p.podRef.namespace === namespace)
    .reduce((sum, p) => sum + (p.memory?.workingSetBytes ?? 0), 0);
}

export interface Admission {
  /** How many envs of the task fit: those deployed and the free memory's worth (null until measured). */
  admits: number | null;
  /** Why, in words: the figures behind `admits`. */
  why: string;
}

const gib = (bytes: number) => `${(bytes / 1024 ** 3).toFixed(2)} GiB`;

/**
 * How many envs fit: the `settled` ones (deployed; their memory is already taken) and as many more as the free memory
 * less the reserve holds at `idleBytes` each, less those being deployed (not yet taking theirs).
 */
export function admission(
  idleBytes: number | undefined,
  available: number,
  settled: number,
  deploying: number,
): Admission {
  if (idleBytes === undefined || idleBytes <= 0)
    return { admits: null, why: "an idle env's memory is not measured yet (it is, once one env is ready)" };
  const more = Math.max(0, Math.floor((available - MEMORY_RESERVE_BYTES) / idleBytes) - deploying);
  return {
    admits: settled + deploying + more,
    why: `an idle env takes ${gib(idleBytes)}; ${gib(available)} is free, ${gib(MEMORY_RESERVE_BYTES)} of it kept for the machine, beside ${settled + deploying} env(s) already there`,
  };
}
