// `multienv warm <task> --size N`: sets the task's warm pool to N envs and returns once they are ready (0 drains it).
import type { Command } from "commander";
import { type CommonOptions, note, runAction, say, withProjectDir } from "./common";

interface WarmOptions extends CommonOptions {
  size: string;
  store?: string;
}

export function register(program: Command): void {
  withProjectDir(
    program
      .command("warm")
      .description(
        "keep a warm pool of the task's envs: deploy what is missing (each env a stack <task>-w<n> of the task's stack file) and return once N are ready; --size 0 collects and destroys each; `multienv serve` then keeps the pool at its size",
      )
      .argument("<task>", "the task (its stacks/Pulumi.<task>.yaml)")
      .requiredOption("--size <n>", "how many envs the pool keeps ready")
      .option(
        "--store <postgres-url>",
        "the lease store shared by many machines (default: MULTIENV_POOL_STORE, else the embedded one)",
      ),
  ).action((task: string, options: WarmOptions) =>
    runAction("warm", async () => {
      if (!/^\d+$/.test(options.size)) throw new Error(`--size ${options.size}: not a whole number; pass 0 or more`);
      const { warmPool } = require("../pools") as typeof import("../pools");
      const state = await warmPool(task, Number(options.size), {
        projectDir: options.projectDir,
        store: options.store,
        log: note,
      });
      say(
        `pool ${task}: ${state.ready} ready of ${state.size}${state.admits === null ? "" : ` (admission allows ${state.admits})`}`,
      );
    }),
  );
}
