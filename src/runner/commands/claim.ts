// `multienv claim <task>`: takes a ready env of the task's warm pool; `multienv release <id>` gives it back.
import type { Command } from "commander";
import { type CommonOptions, note, runAction, say, withProjectDir } from "./common";

interface ClaimOptions extends CommonOptions {
  ttl: string;
  wait: string;
  json?: boolean;
  store?: string;
}

export function register(program: Command): void {
  withProjectDir(
    program
      .command("claim")
      .description(
        "claim a ready env of the task's warm pool (in arrival order when none is ready): its id, episode, stack, expiry, and each computer's cdpUrl, agent token and start tabs; never the control token",
      )
      .argument("<task>", "the task whose pool to claim from")
      .option("--ttl <seconds>", "how long the claim lasts unless renewed", "600")
      .option("--wait <seconds>", "how long to wait for a ready env", "0")
      .option("--json", "print the claim as JSON (the agent token included)")
      .option(
        "--store <postgres-url>",
        "the lease store shared by many machines (default: MULTIENV_POOL_STORE, else the embedded one)",
      ),
  ).action((task: string, options: ClaimOptions) =>
    runAction("claim", async () => {
      for (const [flag, value] of [
        ["--ttl", options.ttl],
        ["--wait", options.wait],
      ] as const)
        if (!/^\d+$/.test(value)) throw new Error(`${flag} ${value}: not a whole number of seconds; pass one`);
      const { claimEnv } = require("../pools") as typeof import("../pools");
      const claim = await claimEnv(
        { task, ttlSeconds: Number(options.ttl), waitSeconds: Number(options.wait) },
        { projectDir: options.projectDir, store: options.store, log: note },
      );
      if (options.json) process.stdout.write(JSON.stringify(claim) + "\n");
      else
        say(
          `claim ${claim.id}: stack ${claim.stack}, episode ${claim.episode}, until ${claim.expiresAt}; computers: ${Object.keys(claim.computers).join(", ")} (--json for their cdpUrl and agent token)`,
        );
    }),
  );
}
