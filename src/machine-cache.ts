// The machine's own folder, one per machine and not per checkout: what the project builds once per machine (the
// Pulumi toolchain, the test cluster's binaries) and what every stack of the machine shares (the default lease store
// of account pools). Below the runner, so the program and the providers find it the same way it does.
import { homedir } from "node:os";
import { join } from "node:path";

/**
 * MULTIENV_CACHE, else $XDG_CACHE_HOME/multienv, else ~/.cache/multienv. scripts/lib/machine-cache.sh names the same
 * folder for the scripts.
 */
export function machineCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  return env.MULTIENV_CACHE || join(env.XDG_CACHE_HOME || join(homedir(), ".cache"), "multienv");
}
