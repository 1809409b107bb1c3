// Many stacks' operations from one runner, at most so many under way at once: each deploy of an env is a Pulumi
// engine, a provider and (on a cluster) its API requests and pods starting together, and too many at once on a small
// machine or cluster make every one of them slow, or the cluster refuse them.

/**
 * Deploys under way at once by default, wherever the runner deploys many (deployStacks, a warm pool's keeper): a
 * deploy takes about a core while its env's processes start. Four at once on 2 cores, the test cluster's daemons and
 * other work beside them, had three deploys of four miss the gateway's 240 s start at load 50 to 70 (bench:kubernetes).
 */
export const DEFAULT_DEPLOY_CONCURRENCY = 2;

/** How one item's operation ended: its time from its own start and from the whole run's, and its error's message. */
export interface Settled {
  ok: boolean;
  /** From its operation's start (its wait for a slot left out), ms. */
  ms: number;
  /** From settleWithLimit's start, ms. */
  sinceStartMs: number;
  error?: string;
}

/**
 * Runs `operation` on every item, at most `limit` under way at once, in the items' order as room frees; every
 * item's outcome is kept in its place (one failing stops none of the others), and told to `onSettled` as it ends.
 */
export async function settleWithLimit<T, R>(
  items: readonly T[],
  limit: number,
  operation: (item: T, index: number) => Promise<R>,
  options: { onSettled?: (item: T, outcome: Settled) => void } = {},
): Promise<PromiseSettledResult<R>[]> {
  if (!Number.isInteger(limit) || limit < 1)
    throw new RangeError(`concurrency ${limit}: give a whole number of 1 or more`);
  const results: PromiseSettledResult<R>[] = new Array(items.length);
  const began = Date.now();
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const index = next++;
      const started = Date.now();
      const told = (error?: unknown) =>
        options.onSettled?.(items[index], {
          ok: error === undefined,
          ms: Date.now() - started,
          sinceStartMs: Date.now() - began,
          ...(error === undefined ? {} : { error: error instanceof Error ? error.message : String(error) }),
        });
      try {
        results[index] = { status: "fulfilled", value: await operation(items[index], index) };
        told();
      } catch (reason) {
        results[index] = { status: "rejected", reason };
        told(reason);
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return results;
}
