// `multienv accounts <pool>`: the pool's accounts and the stacks holding them; `--release` frees one by hand.
import type { Command } from "commander";
import { runAction, say, withProjectDir, type CommonOptions } from "./common";

interface AccountsOptions extends CommonOptions {
  json?: boolean;
  release?: string;
}

export function register(program: Command): void {
  withProjectDir(
    program
      .command("accounts")
      .description(
        "list an account pool's accounts (stacks/Pulumi.<pool>.yaml): the stack holding each, since and until when",
      )
      .argument("<pool>", "the pool's stack name")
      .option("--json", 'print {"pool", "accounts": [{"name", "heldBy", "since", "until"}]}')
      .option("--release <account>", "free the account by hand (its stack is gone), saying which stack held it"),
  ).action((pool: string, options: AccountsOptions) =>
    runAction("accounts", async () => {
      const { poolAccounts, releaseAccount } = require("../operator/accounts") as typeof import("../operator/accounts");
      if (options.release !== undefined) {
        const holder = await releaseAccount(pool, options.release, { projectDir: options.projectDir });
        say(`account ${options.release} of pool ${pool} is free; stack ${holder} held it`);
        return;
      }
      const list = await poolAccounts(pool, { projectDir: options.projectDir });
      if (options.json) return say(JSON.stringify(list, null, 2));
      const { table } = require("../operator/format") as typeof import("../operator/format");
      say(
        table([
          ["ACCOUNT", "HELD BY", "SINCE", "UNTIL"],
          ...list.accounts.map((a) => [a.name, a.heldBy ?? "-", a.since ?? "-", a.until ?? "-"]),
        ]).join("\n"),
      );
    }),
  );
}
