// What the benches share beyond their loopback processes (loopback.ts): the median of their rounds, CPU profiles of
// the services they start (BENCH_CPU_PROF) and the stop of those services, and a Pulumi of their own for the benches
// that deploy (the CLI this checkout built when none is on PATH, a file state backend in a temp dir, no update
// check, no plugin download).
import type { ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { builtToolchainDir } from "../src/runner/stack/toolchain";

/** The median of `values` (the mean of the middle two for an even count). */
export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

/** The nearest-rank `p`th percentile of `values` (p99 of 20 values is the largest). */
export function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
}

/** The directory BENCH_CPU_PROF names for the services' CPU profiles, if any. */
export const CPU_PROFILE_DIR = process.env.BENCH_CPU_PROF;

/** Node's arguments for a service `name` to write its CPU profile into CPU_PROFILE_DIR/<name>; none without it. */
export function cpuProfileArgs(name: string): string[] {
  if (!CPU_PROFILE_DIR) return [];
  mkdirSync(path.join(CPU_PROFILE_DIR, name), { recursive: true });
  return [`--cpu-prof`, `--cpu-prof-dir=${path.join(CPU_PROFILE_DIR, name)}`];
}

/**
 * Stops the services a bench started and gives them the time to end. With CPU profiles they get SIGINT: node writes
 * its --cpu-prof profile as it exits on a signal it handles (the gateway and the site proxy stop on it).
 */
export async function stopServices(children: ChildProcess[]): Promise<void> {
  for (const child of children) child.kill(CPU_PROFILE_DIR ? "SIGINT" : "SIGTERM");
  await new Promise((resolve) => setTimeout(resolve, CPU_PROFILE_DIR ? 2_000 : 300));
}

/** Puts the Pulumi CLI this checkout built on this process's PATH, unless a pulumi is on it already. */
export function useBuiltPulumi(): void {
  const built = path.join(builtToolchainDir(), "bin");
  if (
    !(process.env.PATH ?? "").split(":").some((d) => existsSync(path.join(d, "pulumi"))) &&
    existsSync(path.join(built, "pulumi"))
  ) {
    process.env.PATH = `${built}:${process.env.PATH}`;
  }
}

/**
 * Sets this process's environment (which the Automation API runs the CLI with) for a bench's own Pulumi: the built
 * CLI on PATH unless one is there, and a fresh file state backend, whose directory it returns (the bench removes it).
 */
export function useBenchPulumi(): string {
  useBuiltPulumi();
  const state = mkdtempSync(path.join(tmpdir(), "multienv-bench-state-"));
  Object.assign(process.env, {
    PULUMI_BACKEND_URL: `file://${state}`,
    PULUMI_CONFIG_PASSPHRASE: "bench",
    PULUMI_SKIP_UPDATE_CHECK: "true",
    PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION: "true",
  });
  return state;
}
