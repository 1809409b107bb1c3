// What every command on a stack does first, before any Pulumi call or passphrase prompt, so that a mistake in the
// stack file or a stack that is not deployed gets its own line rather than whatever the Pulumi CLI says about it:
//
// - `up` runs every check `multienv check` runs (config, plan, the graph under mocks and the policy pack: seconds,
//   against a deploy's minutes) and refuses on any problem;
// - the commands on a deployed env check the file offline (config and plan, milliseconds). A file Pulumi cannot
//   read (not YAML) stops them, as it would stop Pulumi; a problem in its config is a warning, since they act on
//   the env as it was deployed and a stack must stay removable whatever its file now says. Then, with a file
//   backend, its state says whether the stack is deployed (read from the files: no CLI, no passphrase).
import { existsSync } from "node:fs";
import { isAbsolute, relative } from "node:path";
import { stackNameProblem } from "../../plan/reserved";
import { RunnerError } from "../errors";
import { checkStackFile, resolveStackFile } from "./stack-file";

/** What a command needs of the stack's state: */
export type StateNeed =
  /** nothing: it deploys (`up`); */
  | "none"
  /** a deployed env: containers or pods, or a gateway in the outputs (status, outputs, reset, collect, ...); */
  | "deployed"
  /** any resource to destroy (`down`); */
  | "resources"
  /** the stack in the state, resources or not (`down --remove`). */
  | "stack";

export interface PreflightOptions {
  projectDir: string;
  need: StateNeed;
  /** Warnings, one line each. */
  log: (line: string) => void;
  env?: NodeJS.ProcessEnv;
}

/** `file` as the user would name it: relative to the project directory when inside it. */
function shown(file: string, projectDir: string): string {
  const rel = relative(projectDir, file);
  return rel.startsWith("..") || isAbsolute(rel) ? file : rel;
}

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? "" : "s"}`;
}

export async function preflight(stack: string, options: PreflightOptions): Promise<void> {
  const nameProblem = stackNameProblem(stack);
  if (nameProblem !== undefined) throw new RunnerError(nameProblem);
  const { file } = resolveStackFile(stack, options.projectDir);
  const hasFile = existsSync(file);
  const name = shown(file, options.projectDir);

  if (options.need === "none") {
    // No stack file: openStack says so, the same for a caller of the library.
    if (!hasFile) return;
    const { checkStack } = require("./check") as typeof import("./check");
    const result = await checkStack(file, { projectDir: options.projectDir });
    if (!result.ok)
      throw new RunnerError(
        [
          `stack ${stack}: ${name} has ${plural(result.problems.length, "problem")}; fix ${result.problems.length === 1 ? "it" : "them"} and run \`multienv up ${stack}\` again (\`multienv check ${stack}\` checks without deploying)`,
          ...result.problems,
        ].join("\n"),
      );
    for (const warning of result.warnings) options.log(`warning: ${warning}`);
    return;
  }

  if (hasFile) {
    const checked = await checkStackFile(file, options.projectDir);
    if (!checked.readable)
      throw new RunnerError(
        [`stack ${stack}: ${name} is not a stack file Pulumi can read; fix it first`, ...checked.problems].join("\n"),
      );
    if (!checked.ok)
      options.log(
        `warning: stack ${stack}: ${name} has ${plural(checked.problems.length, "problem")}, which \`multienv check ${stack}\` lists; the next \`multienv up ${stack}\` refuses it`,
      );
  }
  await stateCheck(stack, { ...options, hasFile });
}

/** With a file backend, the one-line refusal of a stack that is not deployed (nothing is checked with another). */
async function stateCheck(stack: string, options: PreflightOptions & { hasFile: boolean }): Promise<void> {
  const { backendUrlFor } = require("../stack/workspace") as typeof import("../stack/workspace");
  const { fileBackendDir, isDeployed, notDeployed, readStateStacks } =
    require("../stack/state-files") as typeof import("../stack/state-files");
  if (fileBackendDir(backendUrlFor(options.projectDir, options.env ?? process.env)) === undefined) return;
  const state = (await readStateStacks({ projectDir: options.projectDir, env: options.env })).find(
    (s) => s.name === stack,
  );
  const there =
    state !== undefined &&
    (options.need === "stack" || (options.need === "resources" ? state.resources.length > 0 : isDeployed(state)));
  if (there) return;
  if (options.need === "stack")
    throw new RunnerError(`stack ${stack} is not in the state, so there is nothing to destroy or remove`);
  throw notDeployed(stack, {
    so: options.need === "resources" ? "there is nothing to destroy" : undefined,
    noStackFile: !options.hasFile,
  });
}
