// `multienv release <id>`: ends a claim: the episode collected, the env reset and ready again.
import type { Command } from "commander";
import { type CommonOptions, note, runAction, say, withProjectDir } from "./common";

interface ReleaseOptions extends CommonOptions {
  collect: boolean;
  store?: string;
}

export function register(program: Command): void {
  withProjectDir(
    program
      .command("release")
      .description(
        "release a claim: collect its episode into artifacts/<task>/episodes/<episode>/, reset the env, and return it to the pool ready (an env whose reset fails is replaced, never handed out)",
      )
      .argument("<id>", "the claim's id")
      .option("--no-collect", "skip collecting the episode's evidence")
      .option(
        "--store <postgres-url>",
        "the lease store shared by many machines (default: MULTIENV_POOL_STORE, else the embedded one)",
      ),
  ).action((id: string, options: ReleaseOptions) =>
    runAction("release", async () => {
      const { releaseEnv } = require("../pools") as typeof import("../pools");
      const released = await releaseEnv(id, {
        projectDir: options.projectDir,
        store: options.store,
        collect: options.collect,
        log: note,
      });
      say(
        released.ready
          ? `claim ${id}: released; ${released.stack} is ready again (episode ${released.episode})`
          : `claim ${id}: released; ${released.stack} failed its reset and will be replaced (episode ${released.episode})`,
      );
    }),
  );
}
