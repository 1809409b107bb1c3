// Where the Pulumi project is: a module of its own, with no import of ours, so the CLI's every command can name the
// default without loading the Automation API.
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";

/**
 * The directory holding Pulumi.yaml above this module: the checkout, or the installed package's directory when the
 * runner is its build (`dist/src/runner/stack/`).
 */
function projectDirAbove(dir: string): string {
  for (let candidate = dir; ; candidate = dirname(candidate)) {
    if (existsSync(join(candidate, "Pulumi.yaml"))) return candidate;
    if (dirname(candidate) === candidate) return join(dir, "..", "..", "..");
  }
}

/** The multienv checkout (the directory holding Pulumi.yaml): the default project directory. */
export const DEFAULT_PROJECT_DIR = projectDirAbove(__dirname);
