// What every lifecycle command shares: the project-directory option, and how a failure ends it.
// A user sees `multienv <command>: stack <name>: <what happened>; <what to do>`, then any fact behind it on a line of
// its own (a failed self-test's checks), never a stack trace.
import type { Command } from "commander";
import { RunnerError } from "../errors";
import { DEFAULT_PROJECT_DIR } from "../stack/project-dir";
import type { StateNeed } from "../check/preflight";
import { printable, printableLines } from "../terminal-text";

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

/** Prints a line to stdout, any control character in it written out (../terminal-text.ts). */
export function say(line: string): void {
  process.stdout.write(`${printableLines(line)}\n`);
}

/** Prints a warning or progress line to stderr, keeping stdout for results; control characters written out. */
export function note(line: string): void {
  process.stderr.write(`${printableLines(line)}\n`);
}

/**
 * What the CLI prints for a failure: `multienv <command>: ` and the message's first line, then each further line of a
 * RunnerError (one fact each), indented. Another error's further lines are left out: they can be a transcript.
 */
export function failureText(command: string | undefined, error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  const [first, ...rest] = message.split("\n");
  const facts = error instanceof RunnerError ? rest.map((l) => l.trim()).filter((l) => l !== "") : [];
  return (
    [`multienv${command === undefined ? "" : ` ${command}`}: ${first}`, ...facts.map((l) => `  ${l}`)]
      .map(printable)
      .join("\n") + "\n"
  );
}

/**
 * The checks a command on a stack runs before any Pulumi call or passphrase prompt (../check/preflight.ts): its stack
 * file offline, then whether the state holds what the command `needs`. Loaded when run, like every command's work.
 */
export async function checkFirst(stack: string, options: CommonOptions, needs: StateNeed): Promise<void> {
  const { preflight } = require("../check/preflight") as typeof import("../check/preflight");
  await preflight(stack, { projectDir: options.projectDir, need: needs, log: note });
}

/** Runs a command's action; any failure ends the process with its lines on stderr (failureText) and exit code 1. */
export async function runAction(command: string, action: () => Promise<void>): Promise<void> {
  try {
    await action();
  } catch (error) {
    process.stderr.write(failureText(command, error));
    process.exitCode = 1;
  }
}
