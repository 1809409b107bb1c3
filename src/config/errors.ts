// The one error bad input raises: every problem at once, one line each, no stack trace for users.
import { formatProblem } from "../plan/problems";
import type { Problem } from "../plan/types";

export class ConfigError extends Error {
  readonly problems: Problem[];

  constructor(problems: Problem[]) {
    super(problems.map(formatProblem).join("\n"));
    this.name = "ConfigError";
    this.problems = problems;
  }
}
