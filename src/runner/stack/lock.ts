// In-process serialisation of operations on one stack.
// A test runner may drive many tasks at once from one process; each task has its own stack, and separate
// stacks are independent in the file backend. Two operations on the *same* stack from one process (say a
// `collect` racing a `destroy`) would otherwise meet Pulumi's own stack lock and fail with
// ConcurrentUpdateError; queueing them here makes them run one after the other instead. Pulumi's lock still
// guards against other processes.

const tails = new Map<string, Promise<unknown>>();

/** Runs `operation` once every earlier operation queued for `key` has settled; operations on other keys run freely. */
export async function withStackLock<T>(key: string, operation: () => Promise<T>): Promise<T> {
  const previous = tails.get(key) ?? Promise.resolve();
  const run = previous.then(operation, operation);
  const tail = run.catch(() => undefined);
  tails.set(key, tail);
  try {
    return await run;
  } finally {
    // Forget the key once nothing is queued behind this operation, so the map does not grow per task.
    if (tails.get(key) === tail) tails.delete(key);
  }
}
