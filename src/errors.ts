// The error the user reads as it is, and an error's message as the user should see it: shared by the runner and by
// what it builds on (src/engines), so a cluster or engine client below the runner speaks to the user the same way.

/**
 * An error whose message is already what the user needs: its first line a complete instruction, any further line one
 * fact behind it. Every line of it is shown (`multienv` prints them all).
 */
export class RunnerError extends Error {
  override name = "RunnerError";
}

/** An error's message, with the network cause that node's fetch hides behind "fetch failed". */
export function errorMessage(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const cause = error.cause as { code?: string; message?: string } | undefined;
  if (error.message === "fetch failed" && cause?.message)
    return `cannot reach the gateway (${cause.code ?? cause.message})`;
  return error.message;
}
