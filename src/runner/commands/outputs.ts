// `multienv outputs <stack>`: a deployed stack's outputs, read again without deploying.
import type { Command } from "commander";
import { checkFirst, type CommonOptions, runAction, say, withProjectDir } from "./common";

interface OutputsOptions extends CommonOptions {
  showSecrets?: boolean;
  json?: boolean;
}

export function register(program: Command): void {
  withProjectDir(
    program
      .command("outputs")
      .description(
        "print a deployed stack's outputs without deploying again; secrets as [secret] (read from the state, no passphrase needed) unless --show-secrets",
      )
      .argument("<stack>", "the stack (task) name")
      .option(
        "--show-secrets",
        "print secret outputs (the control token) in plain text (needs the stack's passphrase and the Pulumi CLI)",
      )
      .option("--json", "print the outputs as one JSON object"),
  ).action((stack: string, options: OutputsOptions) =>
    runAction("outputs", async () => {
      await checkFirst(stack, options, "deployed");
      const { stackOutputs } = require("../index") as typeof import("../index");
      const { formatDisplayed } = require("../stack/outputs") as typeof import("../stack/outputs");
      const shown = await stackOutputs(stack, { projectDir: options.projectDir, showSecrets: options.showSecrets });
      say(options.json ? JSON.stringify(shown, null, 2) : `stack ${stack} outputs:\n${formatDisplayed(shown)}`);
    }),
  );
}
