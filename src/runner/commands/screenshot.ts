// `multienv screenshot <stack>`: a PNG of each computer's visible tab, through the gateway.
import type { Command } from "commander";
import { checkFirst, type CommonOptions, runAction, say, withProjectDir } from "./common";

interface ScreenshotOptions extends CommonOptions {
  computer?: string;
  out?: string;
}

export function register(program: Command): void {
  withProjectDir(
    program
      .command("screenshot")
      .description(
        "save a PNG of each computer's visible tab (over DevTools through the gateway); prints each file's path and size",
      )
      .argument("<stack>", "the stack (task) name")
      .option("--computer <computer>", "only this computer (default: every computer)")
      .option("--out <dir>", "where the PNGs go (default: artifacts/<stack>/screenshots)"),
  ).action((stack: string, options: ScreenshotOptions) =>
    runAction("screenshot", async () => {
      await checkFirst(stack, options, "deployed");
      const { screenshotStack } = require("../index") as typeof import("../index");
      const { formatScreenshots } = require("../operator/format") as typeof import("../operator/format");
      const shots = await screenshotStack(stack, {
        projectDir: options.projectDir,
        computer: options.computer,
        outDir: options.out,
      });
      say(formatScreenshots(shots));
    }),
  );
}
