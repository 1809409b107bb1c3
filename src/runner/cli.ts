// The `multienv` CLI (bin/multienv.js). Each subcommand lives in its own module under commands/ and registers
// itself with `register(program)`; adding one is adding its module to COMMANDS.
import { Command } from "commander";
import { failureText } from "./commands/common";
import * as accounts from "./commands/accounts";
import * as check from "./commands/check";
import * as claim from "./commands/claim";
import * as collect from "./commands/collect";
import * as down from "./commands/down";
import * as ls from "./commands/ls";
import * as outputs from "./commands/outputs";
import * as release from "./commands/release";
import * as reset from "./commands/reset";
import * as screenshot from "./commands/screenshot";
import * as serve from "./commands/serve";
import * as signIn from "./commands/sign-in";
import * as status from "./commands/status";
import * as sweep from "./commands/sweep";
import * as up from "./commands/up";
import * as warm from "./commands/warm";
import * as watch from "./commands/watch";

/** The subcommands, in the order `--help` lists them. */
export const COMMANDS: { register(program: Command): void }[] = [
  check,
  up,
  ls,
  status,
  outputs,
  screenshot,
  watch,
  collect,
  signIn,
  reset,
  down,
  sweep,
  accounts,
  warm,
  serve,
  claim,
  release,
];

export function buildCli(): Command {
  const program = new Command("multienv")
    .description("Deploys the multi envs AI agents are evaluated in: one Pulumi stack per task.")
    .showHelpAfterError()
    .configureOutput({ outputError: (message, write) => write(message) });
  for (const command of COMMANDS) command.register(program);
  return program;
}

buildCli()
  .parseAsync(process.argv)
  .catch((error: unknown) => {
    process.stderr.write(failureText(undefined, error));
    process.exitCode = 1;
  });
