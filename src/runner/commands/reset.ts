// `multienv reset <stack>`: put the deployed env back to the state right after `up` for the next episode.
import type { Command } from "commander";
import { checkFirst, type CommonOptions, note, runAction, say, withProjectDir } from "./common";

interface ResetOptions extends CommonOptions {
  collect?: boolean;
  failOnCaptureError?: boolean;
}

export function register(program: Command): void {
  withProjectDir(
    program
      .command("reset")
      .description(
        "start the next episode on the deployed env: empty every site's data, start every browser on a fresh profile at its start tabs, start the captures and proxy logs over",
      )
      .argument("<stack>", "the stack (task) name")
      .option(
        "--collect",
        "collect the finished episode first (captures, proxy logs, run.json) into artifacts/<stack>/episodes/<n>/",
      )
      .option(
        "--fail-on-capture-error",
        "with --collect: stop, leaving the env as it is, when a capture cannot be collected",
      ),
  ).action((stack: string, options: ResetOptions) =>
    runAction("reset", async () => {
      await checkFirst(stack, options, "deployed");
      const { resetStack } = require("../index") as typeof import("../index");
      const result = await resetStack(stack, {
        projectDir: options.projectDir,
        collect: options.collect,
        failOnCaptureError: options.failOnCaptureError,
        log: note,
      });
      const how = Object.entries(result.sites)
        .map(([site, way]) => `${site} ${way}`)
        .join(", ");
      say(`stack ${stack}: episode ${result.episode} begins (sites: ${how || "none"}; ${result.seconds.toFixed(1)} s)`);
    }),
  );
}
