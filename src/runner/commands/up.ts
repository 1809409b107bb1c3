// `multienv up <stack>`: deploy a task stack, showing progress as resources complete and the outputs after.
import type { Command } from "commander";
import { checkFirst, type CommonOptions, note, runAction, say, withProjectDir } from "./common";

interface UpOptions extends CommonOptions {
  showSecrets?: boolean;
  preview: boolean;
  json?: boolean;
  selfTest: boolean;
}

export function register(program: Command): void {
  withProjectDir(
    program
      .command("up")
      .description(
        "deploy a task stack (stacks/Pulumi.<stack>.yaml) through the Automation API, showing progress, then print its outputs",
      )
      .argument("<stack>", "the stack (task) name")
      .option("--show-secrets", "print secret outputs (the control token) instead of [secret]")
      .option("--no-preview", "skip the preview that counts the resources (progress then shows done/?)")
      .option("--json", "print the outputs as one JSON object")
      .option(
        "--no-self-test",
        "skip the check, once the env is up, that each computer reaches what it should and is refused the rest",
      ),
  ).action((stack: string, options: UpOptions) =>
    runAction("up", async () => {
      await checkFirst(stack, options, "none");
      // Loaded when run, not when registered: `--help` and argument errors stay fast.
      const { deployStack } = require("../index") as typeof import("../index");
      const { formatDisplayed } = require("../stack/outputs") as typeof import("../stack/outputs");
      const { nextSteps } = require("../lifecycle/next-steps") as typeof import("../lifecycle/next-steps");
      const result = await deployStack(stack, {
        projectDir: options.projectDir,
        preview: options.preview,
        showSecrets: options.showSecrets,
        selfTest: options.selfTest,
        log: note,
      });
      const shown = result.displayed;
      // With --json stdout holds the JSON alone; the next steps go to stderr.
      if (options.json) say(JSON.stringify(shown, null, 2));
      else say(`stack ${stack} is up. Outputs:\n${formatDisplayed(shown)}`);
      (options.json ? note : say)(nextSteps(stack, result.outputs).join("\n"));
    }),
  );
}
