// The multienv Pulumi program: stack config -> plan -> MultiEnv -> stack outputs. `index.ts` (Pulumi.yaml
// `main`) exports it for `pulumi up`; `multienv check` runs the same function under Pulumi's mocks.
// Bad config, a refused plan or inputs a component refuses stop the run with one line per problem and no stack
// trace (pulumi.RunError).
import * as path from "node:path";
import * as pulumi from "@pulumi/pulumi";
import { MultiEnv, type MultiEnvOutputs } from "../components";
import { ConfigError, loadStackConfig } from "./config";
import { formatProblem, plan } from "./plan";
import { DEFAULT_BASE_IMAGE } from "./plan/layout";

/** The repository root: the build context of the project's images. */
const REPO_ROOT = path.resolve(__dirname, "..");

export async function multienvProgram(): Promise<MultiEnvOutputs> {
  const stack = pulumi.getStack();
  let loaded;
  try {
    loaded = loadStackConfig();
  } catch (error) {
    if (error instanceof ConfigError) throw new pulumi.RunError(error.message);
    throw error;
  }
  const result = plan(loaded.config, { stack });
  for (const warning of result.warnings) pulumi.log.warn(warning);
  if (!result.ok) throw new pulumi.RunError(result.problems.map(formatProblem).join("\n"));

  try {
    const env = new MultiEnv(stack, {
      plan: result.plan,
      secrets: loaded.secrets,
      buildContext: path.relative(process.cwd(), REPO_ROOT) || ".",
      baseImage: process.env.MULTIENV_BASE_IMAGE || DEFAULT_BASE_IMAGE,
    });
    return env.outputs;
  } catch (error) {
    // Components refuse inputs the plan let through with a message naming the config key; show just that.
    throw new pulumi.RunError(error instanceof Error ? error.message : String(error));
  }
}
