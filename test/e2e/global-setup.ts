// Once per e2e run: when the run includes the kubernetes files, their prerequisites (the kubernetes plugin and the
// test cluster's binaries, minutes to build on a new machine) start building in the background at the lowest CPU
// priority, so the build uses what the Docker tier leaves idle; the kubernetes files run last and wait for it
// (test/e2e/helpers/kubernetes.ts). On a machine that built them once this finds them built in seconds.
import { spawn, type ChildProcess } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { machineCacheDir } from "../../src/runner/stack/toolchain";

const REPO = path.resolve(__dirname, "../..");

/** True unless the command line names test files and none of them is a kubernetes one. */
function runIncludesKubernetes(argv: string[]): boolean {
  const valued = new Set([
    "--project",
    "--config",
    "-c",
    "--root",
    "-r",
    "--reporter",
    "--shard",
    "-t",
    "--testNamePattern",
  ]);
  const filters: string[] = [];
  const start = argv.findIndex((arg) => arg === "run" || arg.endsWith("vitest.mjs") || arg.endsWith("vitest"));
  for (let i = start + 1; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === "run") continue;
    if (valued.has(arg)) i++;
    else if (!arg.startsWith("-")) filters.push(arg);
  }
  return filters.length === 0 || filters.some((filter) => filter.includes("kubernetes"));
}

export default function setup(): (() => void) | undefined {
  if (!runIncludesKubernetes(process.argv)) return undefined;
  const logs = path.join(machineCacheDir(), "logs");
  fs.mkdirSync(logs, { recursive: true });
  const out = fs.openSync(path.join(logs, "kubernetes-prereqs.log"), "w");
  const build: ChildProcess = spawn("nice", ["-n", "19", "bash", "scripts/kubernetes-prereqs.sh"], {
    cwd: REPO,
    stdio: ["ignore", out, out],
  });
  fs.closeSync(out);
  build.on("error", () => undefined);
  return () => {
    if (build.exitCode === null) build.kill();
  };
}
