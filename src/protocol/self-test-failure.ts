// A failed self-test as its error carries it: the deploy's error, thrown by the self-test's dynamic provider, shown by
// a plain `pulumi up` and read back by the runner for `multienv up` and run.json. Its first line stands alone (a
// one-line view of the error, such as Pulumi's progress row, still says how many checks failed and where); each
// failing check follows on a line of its own, naming the computer, the check and what was seen; the way to skip the
// self-test comes last.
import type { SelfTestCheckResult, SelfTestResults } from "./self-test";

const SELF_TEST_SKIP_HINT = "(skip it with `multienv up --no-self-test`, or selfTest: false in the stack config)";

const HEADER = /^the self-test failed \d+ of \d+ checks?, on computers? /;
const FAILURE = /^computer \S+: /;

/** The error's text for `results` (one with a failed check). */
export function formatSelfTestFailure(results: SelfTestResults): string {
  const failures: string[] = [];
  const computers = new Set<string>();
  let checks = 0;
  for (const byComputer of [results.computers, results.startTabs]) {
    for (const [computer, results] of Object.entries(byComputer) as [string, SelfTestCheckResult[]][]) {
      checks += results.length;
      for (const r of results.filter((c) => !c.ok)) {
        computers.add(computer);
        // A detail is what a browser or a proxy said: one line of it, whatever it held.
        failures.push(`computer ${computer}: ${r.check}: ${r.detail.trim().replace(/\s*\n\s*/g, " ")}`);
      }
    }
  }
  const names = [...computers].sort();
  const header = `the self-test failed ${failures.length} of ${checks} check${checks === 1 ? "" : "s"}, on computer${names.length === 1 ? "" : "s"} ${names.join(", ")}:`;
  return [header, ...failures, SELF_TEST_SKIP_HINT].join("\n");
}

/** The failing checks' lines in an error's text, when it is a failed self-test's; otherwise undefined. */
export function parseSelfTestFailure(text: string): { summary: string; failures: string[] } | undefined {
  const lines = text.split("\n").map((l) => l.trim());
  const start = lines.findIndex((l) => HEADER.test(l));
  if (start === -1) return undefined;
  const failures: string[] = [];
  for (const line of lines.slice(start + 1)) {
    if (!FAILURE.test(line)) break;
    failures.push(line);
  }
  return { summary: lines[start].replace(/:$/, ""), failures };
}
