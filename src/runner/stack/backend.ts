// Where the runner keeps a stack's state: a module of its own, light (no Pulumi SDK), so `check` can ask it too.
import { join, resolve } from "node:path";

/** Where the default file backend keeps state, under the project directory. */
export const STATE_DIR = join(".multienv", "state");

/** The backend URL to use: the user's PULUMI_BACKEND_URL, or the file backend under the project directory. */
export function backendUrlFor(projectDir: string, env: NodeJS.ProcessEnv = process.env): string {
  const chosen = env.PULUMI_BACKEND_URL?.trim();
  return chosen ? chosen : `file://${join(resolve(projectDir), STATE_DIR)}`;
}
