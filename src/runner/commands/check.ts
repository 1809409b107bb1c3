// `multienv check <stack> [--json]`: validate a task stack offline (config, plan, the resource graph under
// Pulumi's mocks, the graph checks). Exit 0 when valid, 1 otherwise.
import type { Command } from "commander";
import { runAction, withProjectDir, type CommonOptions } from "./common";

interface CheckOptions extends CommonOptions {
  json?: boolean;
}

export function register(program: Command): void {
  withProjectDir(
    program
      .command("check")
      .description(
        "validate a task stack offline, with no Pulumi CLI, cloud or Docker: its config, its plan and the resources `pulumi up` would create (secrets masked)",
      )
      .argument("<stack>", "a stack name (stacks/Pulumi.<stack>.yaml) or the path of a stack file")
      .option("--json", "print {ok, problems, warnings, resources, outputs} as JSON, secrets as [secret]"),
  ).action((stack: string, options: CheckOptions) =>
    runAction("check", async () => {
      // Loaded when run, not when registered: the program and Pulumi's SDK take seconds to load,
      // and `--help` or another subcommand should not pay for them.
      const { checkJson, checkStack, checkText } = require("../check/check") as typeof import("../check/check");
      const result = await checkStack(stack, { projectDir: options.projectDir }).catch((error: unknown) => {
        // With --json, stdout is JSON whatever happened: a failure the check did not foresee is its one problem.
        if (!options.json) throw error;
        const message = (error instanceof Error ? error.message : String(error)).split("\n")[0];
        return { ok: false, stack, file: stack, problems: [message], warnings: [], resources: [], outputs: {} };
      });
      if (options.json) {
        process.stdout.write(`${checkJson(result)}\n`);
      } else {
        const text = checkText(result);
        process.stdout.write(text.stdout);
        process.stderr.write(text.stderr);
      }
      if (!result.ok) process.exitCode = 1;
    }),
  );
}
