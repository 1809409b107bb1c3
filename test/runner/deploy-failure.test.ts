// A failed self-test, from the dynamic provider's error to the user's terminal and run.json: its first line stands
// alone (what a one-line view shows: Pulumi's progress row), every failing check has a line of its own naming the
// computer and the check, and none is lost on the way (the engine reports the provider's error whole, the runner
// makes it a RunnerError, the CLI prints every line of one).
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { selfTestFailure } from "../../src/providers/self-test";
import type { SelfTestResults } from "../../src/plan/stack-outputs";
import { parseSelfTestFailure } from "../../src/protocol/self-test-failure";
import { RunnerError } from "../../src/runner/errors";
import * as errors from "../../src/runner/errors";
import * as runRecord from "../../src/runner/evidence/run-record";
import { ROOT, tempDir } from "../helpers/processes";

const check = (check: string, ok: boolean, detail: string) => ({ check, url: "https://x.test/", ok, detail });

const RESULTS: SelfTestResults = {
  passed: false,
  finishedAt: "2026-12-01T00:00:00.000Z",
  seconds: 4,
  computers: {
    desktop: [
      check("synthetic shop.test loads over HTTPS with the env CA", true, "the host answered 200 over HTTPS"),
      check("the address 169.254.169.254 is refused", false, "not refused: the host answered 200"),
    ],
    open: [
      check("synthetic gist.github.com loads over HTTPS with the env CA", true, "the host answered 200"),
      check(
        "public example.com is reached",
        false,
        "no answer: page.goto: net::ERR_TIMED_OUT at https://example.com/\n",
      ),
    ],
  },
  startTabs: {
    desktop: [
      {
        check: "start tab https://nowhere.test/ is at a name a site's card declares",
        url: "https://nowhere.test/",
        ok: false,
        detail: "no site's card declares nowhere.test",
      },
    ],
  },
};

const FAILURES = [
  "computer desktop: the address 169.254.169.254 is refused: not refused: the host answered 200",
  "computer open: public example.com is reached: no answer: page.goto: net::ERR_TIMED_OUT at https://example.com/",
  "computer desktop: start tab https://nowhere.test/ is at a name a site's card declares: no site's card declares nowhere.test",
];

const SKIP = "(skip it with `multienv up --no-self-test`, or selfTest: false in the stack config)";

/** The engine's diagnostic for the self-test resource, as the Automation API hands it over: the error, whole. */
const engineDiagnostic = () => selfTestFailure(RESULTS) + "\n";

/** Runs `script` (TypeScript, with the runner's modules at hand) as its own process, as the CLI runs an action. */
function runScript(script: string): Promise<{ code: number; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ["--require", "tsx/cjs", "-e", script],
      { cwd: ROOT, timeout: 30_000 },
      (error, _stdout, stderr) => resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, stderr }),
    );
  });
}

describe("the self-test's error", () => {
  it("says on its first line how many checks failed and on which computers, then one line per failing check", () => {
    const lines = selfTestFailure(RESULTS).split("\n");
    expect(lines[0]).toBe("the self-test failed 3 of 5 checks, on computers desktop, open:");
    expect(lines.slice(1, -1)).toEqual(FAILURES);
    expect(lines.at(-1)).toBe(SKIP);
  });
});

describe("a deploy's failure", () => {
  it("keeps every failing check as a line of the RunnerError, the next step on the first", () => {
    const error = errors.deployFailure("demo", engineDiagnostic());
    expect(error).toBeInstanceOf(RunnerError);
    const lines = error.message.split("\n");
    expect(lines[0]).toBe(
      "stack demo: deploying failed: the self-test failed 3 of 5 checks, on computers desktop, open; fix it and run `multienv up demo` again",
    );
    expect(lines.slice(1)).toEqual([...FAILURES, SKIP]);
  });

  it("is printed whole by the CLI, one line each, a RunnerError's lines all", async () => {
    const message = JSON.stringify(
      [
        "stack demo: deploying failed: the self-test failed 3 of 5 checks, on computers desktop, open; fix it and run `multienv up demo` again",
        ...FAILURES,
        SKIP,
      ].join("\n"),
    );
    const { code, stderr } = await runScript(`
      const { runAction } = require("./src/runner/commands/common");
      const { RunnerError } = require("./src/runner/errors");
      runAction("up", async () => { throw new RunnerError(${message}); });
    `);
    expect(code).toBe(1);
    const lines = stderr.trimEnd().split("\n");
    expect(lines[0]).toMatch(/^multienv up: stack demo: deploying failed: the self-test failed 3 of 5 checks/);
    expect(lines.slice(1)).toEqual([...FAILURES, SKIP].map((l) => `  ${l}`));
  });

  it("prints only the first line of an error that is not a RunnerError: the rest can be a transcript", async () => {
    const { stderr } = await runScript(`
      const { runAction } = require("./src/runner/commands/common");
      runAction("up", async () => { throw new Error("code: 255\\n stdout: a transcript\\n stderr: more of it"); });
    `);
    expect(stderr).toBe("multienv up: code: 255\n");
  });

  it("is kept in run.json, a line per failing check", async () => {
    const dir = join(tempDir(), "demo");
    await runRecord.writeRunRecord(dir, { ...runRecord.emptyRunRecord("demo"), selfTest: { skipped: true } });
    await runRecord.recordFailedSelfTest(dir, "demo", parseSelfTestFailure(engineDiagnostic())!.failures);
    const record = JSON.parse(readFileSync(join(dir, "run.json"), "utf8"));
    expect(record.selfTest).toEqual({ passed: false, failedAt: expect.any(String), failures: FAILURES });
  });
});
