// What every lifecycle command shares: the project-directory option, and ending with one line on failure.
// A user sees `multienv <command>: stack <name>: <what happened>; <what to do>`, never a stack trace.
import type { Command } from "commander";
import { RunnerError } from "../errors";
import { DEFAULT_PROJECT_DIR } from "../artifacts";

export interface CommonOptions {
  projectDir: string;
}

/** Adds --project-dir to a command. */
export function withProjectDir(command: Command): Command {
  return command.option(
    "--project-dir <dir>",
    "the multienv project (the directory holding Pulumi.yaml)",
    DEFAULT_PROJECT_DIR,
  );
}

/** Prints a line to stdout. */
export function say(line: string): void {
  process.stdout.write(`${line}\n`);
}

/** Prints a warning or progress line to stderr, keeping stdout for results. */
export function note(line: string): void {
  process.stderr.write(`${line}\n`);
}

/** Runs a command's action; any failure ends the process with one line on stderr and exit code 1. */
export async function runAction(command: string, action: () => Promise<void>): Promise<void> {
  try {
    await action();
  } catch (error) {
    const message = error instanceof RunnerError || error instanceof Error ? error.message : String(error);
    // Only the first line: an unexpected error's message can carry a transcript.
    process.stderr.write(`multienv ${command}: ${message.split("\n")[0]}\n`);
    process.exitCode = 1;
  }
}
