// Where the Pulumi project is: a module of its own, with no imports, so the CLI's every command can name the default
// without loading the Automation API.
import { resolve } from "node:path";

/** The multienv checkout (the directory holding Pulumi.yaml): the default project directory. */
export const DEFAULT_PROJECT_DIR = resolve(__dirname, "..", "..", "..");
