// `multienv ls`: every task stack in the state, deployed or not, with its containers and episodes.
import type { Command } from "commander";
import { runAction, say, withProjectDir, type CommonOptions } from "./common";

interface LsOptions extends CommonOptions {
  json?: boolean;
}

export function register(program: Command): void {
  withProjectDir(
    program
      .command("ls")
      .description(
        "list every task stack in the state: its target, whether it is deployed, its last update, its containers running and healthy (asked of their engines), its episodes, whether the env is reproducible (and, when it is live, why: each live site and each computer reaching the public web) each live site's account leased from a pool, and (PERSON) each computer a person holds or whose agent asks for one, as its gateway says",
      )
      .option(
        "--json",
        "print {stacks: [{stack, target, deployed, lastUpdated, containers, episodes, accounts, live, reproducible, liveReasons, persons}]}",
      ),
  ).action((options: LsOptions) =>
    runAction("ls", async () => {
      const { listStacks } = require("../index") as typeof import("../index");
      const { formatStackList } = require("../operator/format") as typeof import("../operator/format");
      const list = await listStacks({ projectDir: options.projectDir });
      say(options.json ? JSON.stringify(list, null, 2) : formatStackList(list));
    }),
  );
}
