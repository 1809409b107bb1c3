// Admission: what an env of the task costs (its containers' memory when idle, measured once on a ready member and kept
// with the pool) against what the machine has free (MemAvailable), so a pool never grows into an out-of-memory
// failure halfway through a deploy.
import { readFile } from "node:fs/promises";
import { freemem } from "node:os";
import { engineClient } from "../../engines/docker";
import { LABELS } from "../../protocol/labels";

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
