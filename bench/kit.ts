// What the benches share beyond their loopback processes (loopback.ts): the median of their rounds, and a Pulumi of
// their own for the benches that deploy (the CLI this checkout built when none is on PATH, a file state backend in
// a temp dir, no update check, no plugin download).
import { existsSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { builtToolchainDir } from "../src/runner/stack/toolchain";

/** The median of `values` (the mean of the middle two for an even count). */
export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

/**
 * Sets this process's environment (which the Automation API runs the CLI with) for a bench's own Pulumi: the built
 * CLI on PATH unless one is there, and a fresh file state backend, whose directory it returns (the bench removes it).
 */
export function useBenchPulumi(): string {
  const built = path.join(builtToolchainDir(), "bin");
  if (
    !(process.env.PATH ?? "").split(":").some((d) => existsSync(path.join(d, "pulumi"))) &&
    existsSync(path.join(built, "pulumi"))
  ) {
    process.env.PATH = `${built}:${process.env.PATH}`;
  }
  const state = mkdtempSync(path.join(tmpdir(), "multienv-bench-state-"));
  Object.assign(process.env, {
    PULUMI_BACKEND_URL: `file://${state}`,
    PULUMI_CONFIG_PASSPHRASE: "bench",
    PULUMI_SKIP_UPDATE_CHECK: "true",
    PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION: "true",
  });
  return state;
}
