// The runner's errors: a first line naming the stack and what to do, and, where one line cannot hold them, the facts
// behind it on lines of their own (a failed self-test's checks, one each).
// The Automation API throws CommandErrors carrying the whole Pulumi CLI transcript; a user at a terminal
// (or a test runner's log) needs the facts that matter, so they are translated here, in one place.

import { errorMessage, RunnerError } from "../errors";

// Defined below the runner: the engine clients of src/engines throw them too.
export { errorMessage, RunnerError };

/** The stack is not in the state backend: never deployed, or removed. */
export class StackNotInStateError extends RunnerError {
  override name = "StackNotInStateError";
}

/**
 * A deploy that failed on the engine's `engineError` (a resource's error, as the engine reported it): its first line
 * with the next step, then each further line of it, such as a self-test's failing checks.
 */
export function deployFailure(stack: string, engineError: string): RunnerError {
  const [first = "unknown error", ...rest] = engineError
    .split("\n")
    .map((line) => line.trim())
    .filter((line) => line !== "");
  return new RunnerError(
    [
      `stack ${stack}: deploying failed: ${first.replace(/:$/, "")}; fix it and run \`multienv up ${stack}\` again`,
      ...rest,
    ].join("\n"),
  );
}

export const PULUMI_INSTALL_HINT =
  "install it with `curl -fsSL https://get.pulumi.com | sh` and make sure `pulumi` is on PATH, or build it with `bash scripts/pulumi-toolchain.sh`";

/** True when the Automation API failed because it could not start the `pulumi` binary. */
export function isPulumiMissing(error: unknown): boolean {
  const text = error instanceof Error ? error.message : String(error);
  return /spawn \S*pulumi ENOENT|ENOENT: pulumi version|Command failed with ENOENT: \S*pulumi/.test(text);
}

/** The message of `error` without Pulumi's transcript: the most telling single line. */
function essence(error: unknown): string {
  const text = errorMessage(error);
  const stderr = /stderr: ([\s\S]*?)(?:\n err\?:|$)/.exec(text)?.[1] ?? text;
  const lines = stderr
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l !== "" && !/^(code|stdout|stderr|err\?):/.test(l));
  const errorLine = lines.find((l) => /^error:/i.test(l)) ?? lines[lines.length - 1] ?? "unknown error";
  return errorLine.replace(/^error:\s*/i, "");
}

/**
 * A RunnerError for `error` raised while `doing` (e.g. "deploying") stack `stack`: one line, naming the
 * stack and the next step. RunnerErrors pass through unchanged.
 */
export function explain(error: unknown, stack: string, doing: string): RunnerError {
  if (error instanceof RunnerError) return error;
  if (isPulumiMissing(error)) {
    return new RunnerError(
      `stack ${stack}: ${doing} needs the Pulumi CLI, which is not installed; ${PULUMI_INSTALL_HINT}`,
    );
  }
  // Required here, not at the top: the CLI loads this module for every command, and the Automation API is slow to load.
  const { ConcurrentUpdateError, StackNotFoundError } =
    require("@pulumi/pulumi/automation") as typeof import("@pulumi/pulumi/automation");
  if (error instanceof ConcurrentUpdateError) {
    return new RunnerError(
      `stack ${stack}: another update holds Pulumi's lock on this stack; wait for it to finish, or if that process died, run \`pulumi cancel --stack ${stack}\``,
    );
  }
  if (error instanceof StackNotFoundError) {
    return new StackNotInStateError(
      `stack ${stack}: no such stack in the state backend; deploy it first with \`multienv up ${stack}\``,
    );
  }
  const line = essence(error);
  if (/passphrase/i.test(line)) {
    return new RunnerError(
      `stack ${stack}: ${doing} needs the stack's secrets passphrase; set PULUMI_CONFIG_PASSPHRASE (or PULUMI_CONFIG_PASSPHRASE_FILE) to the passphrase the stack was created with`,
    );
  }
  const next = doing === "deploying" ? `; \`multienv check ${stack}\` shows the stack's problems offline` : "";
  return new RunnerError(`stack ${stack}: ${doing} failed: ${line}${next}`);
}
