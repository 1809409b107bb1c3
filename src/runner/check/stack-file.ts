// The checks of a stack file that need neither Pulumi's SDK nor its CLI, and take milliseconds: the file read and its
// config validated (src/config), then planned (src/plan). `multienv check` runs them before rendering the resource
// graph; every other command on a stack runs them before any Pulumi call (preflight.ts).
import { existsSync } from "node:fs";
import { isAbsolute, join, resolve } from "node:path";
import { ConfigError } from "../../config/errors";
import { readStackFile, stackNameOfFile, StackFileError, type StackFile } from "../../config/stack-file";
import { readRecordings } from "../../config/recordings";
import { plan } from "../../plan";
import { formatProblem } from "../../plan/problems";
import type { Plan } from "../../plan/types";

/**
 * A stack name (`stacks/Pulumi.<stack>.yaml` under the project directory) or a path to a stack file.
 * An argument with a slash or a .yaml/.yml ending is a path.
 */
export function resolveStackFile(
  stackOrPath: string,
  projectDir: string = process.cwd(),
): { file: string; stack: string } {
  const looksLikePath = stackOrPath.includes("/") || /\.ya?ml$/.test(stackOrPath);
  if (looksLikePath) {
    const file = isAbsolute(stackOrPath) ? stackOrPath : resolve(process.cwd(), stackOrPath);
    return { file, stack: stackNameOfFile(file) };
  }
  const inStacks = join(projectDir, "stacks", `Pulumi.${stackOrPath}.yaml`);
  const file = existsSync(inStacks) ? inStacks : join(projectDir, `Pulumi.${stackOrPath}.yaml`);
  return { file: existsSync(file) ? file : inStacks, stack: stackOrPath };
}

export interface StackFileCheck {
  ok: boolean;
  stack: string;
  file: string;
  /**
   * False when the file is not a stack file at all (unreadable, not YAML, not a mapping): Pulumi cannot read it
   * either. True when it is one, whatever its config's problems.
   */
  readable: boolean;
  /** One line each, `multienv:<path>: ...`. */
  problems: string[];
  warnings: string[];
  /** When the config is valid. */
  stackFile?: StackFile;
  /** When the config is valid and plans. */
  plan?: Plan;
}

/** Reads, validates and plans the stack file `stackOrPath` names (see resolveStackFile). */
export async function checkStackFile(stackOrPath: string, projectDir?: string): Promise<StackFileCheck> {
  const { file, stack } = resolveStackFile(stackOrPath, projectDir);
  let stackFile: StackFile;
  try {
    stackFile = readStackFile(file, stack);
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    const readable = !(error instanceof StackFileError);
    return { ok: false, stack, file, readable, problems: error.problems.map(formatProblem), warnings: [] };
  }
  // A task stack describes something to deploy. The plan takes an empty one (tests build envs up from it); a stack
  // file with nothing in it would deploy a gateway with nothing behind it.
  const { websites, computers } = stackFile.config;
  if (Object.keys(websites).length === 0 && Object.keys(computers).length === 0)
    return {
      ok: false,
      stack,
      file,
      readable: true,
      problems: [
        formatProblem({
          path: "",
          message:
            "the stack has no website and no computer, so it would deploy a gateway with nothing behind it; add a website (websites.<name>) or a computer (computers.<name>), as stacks/Pulumi.demo.yaml does",
        }),
      ],
      warnings: [],
      stackFile,
    };
  // The replayed sites' recordings, as the deploy reads them: a missing or broken one is refused here, naming it.
  const recordings = await readRecordings(stackFile.config, projectDir ?? process.cwd());
  const planned = plan(stackFile.config, { stack, recordings: recordings.recordings });
  const recordingWarnings = recordings.warnings.map(formatProblem);
  const unread = new Set(recordings.problems.map((p) => p.path));
  if (recordings.problems.length > 0)
    return {
      ok: false,
      stack,
      file,
      readable: true,
      problems: [
        ...recordings.problems.map(formatProblem),
        // The plan's own word on those sites (their recording was not read) says nothing more.
        ...(planned.ok ? [] : planned.problems.filter((p) => !unread.has(p.path)).map(formatProblem)),
      ],
      warnings: [...planned.warnings, ...recordingWarnings],
      stackFile,
    };
  if (!planned.ok)
    return {
      ok: false,
      stack,
      file,
      readable: true,
      problems: planned.problems.map(formatProblem),
      warnings: [...planned.warnings, ...recordingWarnings],
      stackFile,
    };
  return {
    ok: true,
    stack,
    file,
    readable: true,
    problems: [],
    warnings: [...planned.warnings, ...recordingWarnings],
    stackFile,
    plan: planned.plan,
  };
}
