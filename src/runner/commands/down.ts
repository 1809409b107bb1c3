// `multienv down <stack>`: collect whatever is not collected yet, then destroy the stack.
import type { Command } from "commander";
import { checkFirst, type CommonOptions, note, runAction, say, withProjectDir } from "./common";

interface DownOptions extends CommonOptions {
  failOnCaptureError?: boolean;
  remove?: boolean;
}

export function register(program: Command): void {
  withProjectDir(
    program
      .command("down")
      .description(
        "collect the run's captures and evidence (whatever is not collected yet), then destroy the task stack",
      )
      .argument("<stack>", "the stack (task) name")
      .option("--fail-on-capture-error", "do not destroy when a capture cannot be collected (exit 1, the env stays up)")
      .option("--remove", "also remove the stack from the state backend once destroyed"),
  ).action((stack: string, options: DownOptions) =>
    runAction("down", async () => {
      await checkFirst(stack, options, options.remove ? "stack" : "resources");
      const { destroyStack } = require("../index") as typeof import("../index");
      const result = await destroyStack(stack, {
        projectDir: options.projectDir,
        failOnCaptureError: options.failOnCaptureError,
        remove: options.remove,
        log: note,
      });
      const collected = result.collected ? `; ${result.collected.downloaded.length} capture(s) collected first` : "";
      const gone = result.gone ? `; ${result.gone.join(", ")} checked gone` : "";
      say(`stack ${stack} destroyed${collected}${gone}`);
    }),
  );
}
