// `multienv up <stack>`: deploy a task stack, showing progress as resources complete and the outputs after.
import type { Command } from "commander";
import { checkFirst, type CommonOptions, note, runAction, say, withProjectDir } from "./common";

interface UpOptions extends CommonOptions {
  showSecrets?: boolean;
  preview?: boolean;
  json?: boolean;
  selfTest: boolean;
  accountWait?: string;
}

/** A duration as `--account-wait` takes it: 90s, 10m, 1h, or a number of seconds. */
export function parseDuration(text: string): number | undefined {
  const match = /^(\d+(?:\.\d+)?)(s|m|min|h)?$/.exec(text.trim());
  if (!match) return undefined;
  const unit = { s: 1, m: 60, min: 60, h: 3600 }[match[2] ?? "s"] ?? 1;
  return Number(match[1]) * unit;
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
      .option(
        "--preview",
        "preview first (several seconds more): a provider's refusal stops the deploy before anything changes",
      )
      .option("--no-preview", "deploy without a preview (the default; accepted for scripts that pass it)")
      .option("--json", "print the outputs as one JSON object")
      .option(
        "--account-wait <duration>",
        "how long to wait for a free account of a live site's pool (90s, 10m, 1h) before failing; default 10m",
      )
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
      const { ACCOUNT_WAIT_ENV } = require("../../accounts/lease") as typeof import("../../accounts/lease");
      const { RunnerError } = require("../errors") as typeof import("../errors");
      const waitSeconds = options.accountWait === undefined ? undefined : parseDuration(options.accountWait);
      if (options.accountWait !== undefined && waitSeconds === undefined)
        throw new RunnerError(`--account-wait ${options.accountWait}: write a duration such as 90s, 10m or 1h`);
      const result = await deployStack(stack, {
        ...(waitSeconds === undefined ? {} : { programEnv: { [ACCOUNT_WAIT_ENV]: String(waitSeconds) } }),
        projectDir: options.projectDir,
        preview: options.preview,
        showSecrets: options.showSecrets,
        selfTest: options.selfTest,
        log: note,
      });
      const shown = result.displayed;
      // A pool's stack deploys nothing: what it holds is all there is to say.
      if (Array.isArray(shown.accountNames)) {
        if (options.json) return say(JSON.stringify(shown, null, 2));
        return say(
          `pool ${stack} is up: accounts ${shown.accountNames.join(", ")}. A task's live site leases one with websites.<site>.accountPool: ${stack}; \`multienv accounts ${stack}\` shows who holds them.`,
        );
      }
      // With --json stdout holds the JSON alone; the next steps go to stderr.
      if (options.json) say(JSON.stringify(shown, null, 2));
      else say(`stack ${stack} is up. Outputs:\n${formatDisplayed(shown)}`);
      (options.json ? note : say)(nextSteps(stack, result.outputs).join("\n"));
    }),
  );
}
