// A process doing a stack's lifecycle operation for a test to race and kill: it takes the stack's lifecycle lock as
// the runner's operations do, then does what a reset does to run.json (reads it, works a while, writes the next
// episode), and prints each step as a JSON line. Reads LOCK_HOLDER (JSON: artifactsDir, stack, doing, holdMs, waitMs).
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { withLifecycleLock } from "../../src/runner/stack/lifecycle-lock";

const { artifactsDir, stack, doing, holdMs, waitMs } = JSON.parse(process.env.LOCK_HOLDER ?? "{}") as {
  artifactsDir: string;
  stack: string;
  doing: string;
  holdMs: number;
  waitMs?: number;
};
const print = (line: Record<string, unknown>) => console.log(JSON.stringify({ ...line, pid: process.pid }));
const runJson = join(artifactsDir, "run.json");

withLifecycleLock(artifactsDir, { stack, doing, waitMs, log: (line) => print({ event: "log", line }) }, async () => {
  const started = Date.now();
  print({ event: "held" });
  const record = JSON.parse(readFileSync(runJson, "utf8")) as { episode: number; resets: object[] };
  await new Promise((resolve) => setTimeout(resolve, holdMs));
  record.resets.push({ pid: process.pid, started, ended: Date.now() });
  writeFileSync(runJson, JSON.stringify({ ...record, episode: record.episode + 1 }));
}).then(
  () => print({ event: "done" }),
  (error: Error) => print({ event: "refused", message: error.message }),
);
