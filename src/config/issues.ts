// Turns zod issues into problems a user can act on: `websites.shop.domians: unknown key; did you mean domains?`.
import type { z } from "zod";
import { configPath, problem } from "../plan/problems";
import type { Problem } from "../plan/types";
import { issueMessages } from "../protocol/config-issues";

export { editDistance, friendlyMessage, suggestion } from "../protocol/config-issues";

/** One problem per issue (and per unknown key), paths relative to `prefix`. */
export function issuesToProblems(
  issues: readonly z.core.$ZodIssue[],
  knownKeysAt: (path: readonly PropertyKey[]) => readonly string[],
  prefix: readonly (string | number)[] = [],
): Problem[] {
  return issueMessages(issues, knownKeysAt).map(({ path, message }) =>
    problem(configPath([...prefix, ...path]), message),
  );
}
