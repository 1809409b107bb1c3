// The plan of a test's stack config: what the deploy would make of it, or the test fails with the config's problems,
// one a line, as `multienv up` would print them.
import { formatProblem, plan, type Plan, type PlanOptions } from "../../src/plan";
import type { StackConfig } from "../../src/plan/types";

/** The plan of `config` for the stack `options.stack` ("demo" unless given); throws with its problems if none. */
export function planned(config: StackConfig, options: Partial<PlanOptions> = {}): Plan {
  const result = plan(config, { stack: "demo", ...options });
  if (!result.ok) throw new Error(result.problems.map(formatProblem).join("\n"));
  return result.plan;
}
