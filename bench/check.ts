// npm run bench:check — times `multienv check` (the real bin, a fresh process, as a user runs it; best of three)
// on a generated stack of 100 synthetic sites, 10 live sites and 10 computers, and checks that the resource count
// grows linearly with the number of sites (25, 50, 100 synthetic sites: equal growth per site).
// Fails (exit 1) when the check takes 5 s or more, or the growth is not linear.
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

const ROOT = resolve(__dirname, "..");
const BIN = join(ROOT, "bin", "multienv.js");
const LIMIT_MS = 5_000;

function stackYaml(synthetic: number, live: number, computers: number): string {
  const websites: Record<string, unknown> = {};
  for (let i = 0; i < synthetic; i++) {
    websites[`site${i}`] = {
      domains: [`site${i}.test`, `*.site${i}.test`],
      server: { image: "multienv/sample-shop-server" },
      frontend: { image: "multienv/sample-shop-frontend" },
      settings: { index: i },
    };
  }
  for (let i = 0; i < live; i++) {
    websites[`live${i}`] = {
      live: true,
      domains: [`live${i}.example.com`, `*.live${i}.example.com`],
      allowHosts: [`*.cdn${i}.example.net`],
      server: { image: "multienv/sample-live-server" },
    };
  }
  const machines: Record<string, unknown> = {};
  for (let i = 0; i < computers; i++) {
    const network = i % 3 === 0 ? "allow-all" : i % 3 === 1 ? "none" : [`api${i}.example.org`];
    machines[`pc${i}`] = { network, startTabs: synthetic > 0 ? [`https://site${i % synthetic}.test/`] : [] };
  }
  // JSON is YAML: one line per key keeps the file small and the generator obvious.
  return [
    "config:",
    "  multienv:target: docker",
    "  multienv:captureTraffic: true",
    `  multienv:websites: ${JSON.stringify(websites)}`,
    `  multienv:computers: ${JSON.stringify(machines)}`,
    "",
  ].join("\n");
}

const dir = mkdtempSync(join(tmpdir(), "multienv-bench-"));

/** Runs the bin under bash's `time`, so the CPU the check used is reported beside its wall time. */
function runCheck(
  name: string,
  synthetic: number,
  live: number,
  computers: number,
): { ms: number; cpuMs: number; resources: number } {
  const file = join(dir, `Pulumi.${name}.yaml`);
  const out = join(dir, `${name}.json`);
  writeFileSync(file, stackYaml(synthetic, live, computers));
  const script = `TIMEFORMAT='%R %U %S'; time "$0" "$1" check "$2" --json > "$3"`;
  const run = spawnSync("bash", ["-c", script, process.execPath, BIN, file, out], { cwd: ROOT, encoding: "utf8" });
  const timing = run.stderr.trim().split("\n").pop() ?? "";
  if (run.status !== 0 || !/^[\d.]+ [\d.]+ [\d.]+$/.test(timing))
    throw new Error(`check of ${name} failed (exit ${run.status}):\n${run.stderr}`);
  const [real, user, sys] = timing.split(" ").map(Number);
  const result = JSON.parse(readFileSync(out, "utf8")) as { ok: boolean; problems: string[]; resources: unknown[] };
  if (!result.ok) throw new Error(`bench stack ${name} failed check:\n${result.problems.join("\n")}`);
  return { ms: real * 1000, cpuMs: (user + sys) * 1000, resources: result.resources.length };
}

const failures: string[] = [];
// Warm tsx's transform cache once, so the timed run measures check, not the first compile.
runCheck("warmup", 1, 0, 1);

// Best of three: other processes on the machine only ever make a run slower.
const runs = [1, 2, 3].map(() => runCheck("s100-l10-c10", 100, 10, 10));
const main = runs.reduce((best, run) => (run.ms < best.ms ? run : best));
console.log(`check runs (wall ms): ${runs.map((r) => r.ms.toFixed(0)).join(", ")}`);
console.log(
  `check: 100 synthetic + 10 live sites, 10 computers: ${main.resources} resources in ${main.ms.toFixed(0)} ms wall, ${main.cpuMs.toFixed(0)} ms CPU (limit ${LIMIT_MS} ms)`,
);
if (main.ms >= LIMIT_MS) failures.push(`check took ${main.ms.toFixed(0)} ms, limit ${LIMIT_MS} ms`);

const sizes = [25, 50, 100].map((n) => ({ n, ...runCheck(`s${n}`, n, 10, 10) }));
for (const s of sizes)
  console.log(
    `check: ${s.n} synthetic + 10 live sites, 10 computers: ${s.resources} resources in ${s.ms.toFixed(0)} ms wall, ${s.cpuMs.toFixed(0)} ms CPU`,
  );
const perSite = (a: (typeof sizes)[number], b: (typeof sizes)[number]) => (b.resources - a.resources) / (b.n - a.n);
const [small, medium, large] = sizes;
console.log(`resources per synthetic site: ${perSite(small, medium)} (25->50), ${perSite(medium, large)} (50->100)`);
if (perSite(small, medium) !== perSite(medium, large))
  failures.push(`resource count is not linear in sites: ${sizes.map((s) => `${s.n}: ${s.resources}`).join(", ")}`);
if (large.resources !== main.resources)
  failures.push(`the same stack gave ${large.resources} and ${main.resources} resources`);

if (failures.length > 0) {
  for (const f of failures) console.error(`bench:check FAILED: ${f}`);
  process.exit(1);
}
console.log("bench:check ok");
