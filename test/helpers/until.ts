// Waiting in tests: for a condition a probe reads (a log line, a file, a page), never for a fixed time when a
// condition can be read instead.

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * Resolves with the first value `probe` gives that is neither undefined, null nor false, asking every `everyMs`; a
 * probe that throws is asked again. After `ms` it rejects naming `what` (and the probe's last error).
 */
export async function until<T>(
  what: string,
  probe: () => T | undefined | null | false | Promise<T | undefined | null | false>,
  ms = 5_000,
  everyMs = 25,
): Promise<T> {
  const deadline = Date.now() + ms;
  let last: unknown;
  for (;;) {
    try {
      const value = await probe();
      if (value !== undefined && value !== null && value !== false) return value;
    } catch (error) {
      last = error;
    }
    if (Date.now() > deadline)
      throw new Error(
        `timed out after ${ms} ms waiting for ${what}${last ? ` (last error: ${(last as Error).message})` : ""}`,
      );
    await sleep(everyMs);
  }
}
