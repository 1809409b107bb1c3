// examples/runner/episodes.ts as a user runs it: a child process on the real engine, three episodes of the demo
// task on one deploy, each episode starting from the state `up` left (no cart, one order: the episode's own).
import { execFile } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { afterAll, expect, it } from "vitest";
import { engineClient } from "../../src/engines/docker";
import { e2eStack, REPO, stackFileOf, sweepStack } from "./helpers/env";

const STACK = e2eStack("e2e-ex");
const ARTIFACTS = path.join(REPO, "artifacts", STACK);
const api = engineClient();

afterAll(async () => {
  await sweepStack(api, STACK).catch(() => undefined);
  fs.rmSync(stackFileOf(STACK), { force: true });
  fs.rmSync(ARTIFACTS, { recursive: true, force: true });
});

it("runs three episodes of the demo task on one env, each from a clean state, and stores each one's evidence", async () => {
  // The self-test is off: it checks the live github.com, and this test starts no stand-in for it (demo.test does).
  const run = await new Promise<{ code: number; stdout: string; stderr: string }>((resolve) =>
    execFile(
      process.execPath,
      ["--require", "tsx/cjs", path.join(REPO, "examples/runner/episodes.ts"), STACK, "--no-self-test"],
      { cwd: REPO, env: process.env, timeout: 600_000, maxBuffer: 16 * 1024 * 1024 },
      (error, stdout, stderr) =>
        resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    ),
  );
  console.log(run.stdout);
  expect(run.code, run.stderr + run.stdout).toBe(0);
  const episodes = run.stdout.split("\n").filter((l) => /^episode \d: start tabs/.test(l));
  expect(episodes).toHaveLength(3);
  // Its github.com tab shows an error page here (no stand-in for the live site); the shop's is its start tab. Each
  // episode starts with no order (the reset emptied the last one's); the first two orders pass the grade, the last
  // (the mug alone) fails it.
  episodes.forEach((line, i) =>
    expect(line).toMatch(
      new RegExp(
        `start tabs \\[.*"https://shop\\.test/".*\\], orders before 0, order-1 placed, ${i < 2 ? "passed" : "failed"}: `,
      ),
    ),
  );
  // The request log's grade of each episode, from its HAR alone, agrees with the data plane's.
  const fromHar = run.stdout.split("\n").filter((l) => /^episode \d from its request log: /.test(l));
  expect(fromHar).toHaveLength(3);
  fromHar.forEach((line, i) => expect(line).toMatch(i < 2 ? /: passed: .*; agrees/ : /: failed: .*; agrees/));
  for (const n of [1, 2, 3]) {
    expect(fs.readdirSync(path.join(ARTIFACTS, "episodes", String(n), "proxy-logs"))).toContain("desktop.jsonl");
    expect(fs.readdirSync(path.join(ARTIFACTS, "episodes", String(n), "requests"))).toContain("desktop.har");
  }
  const record = JSON.parse(fs.readFileSync(path.join(ARTIFACTS, "run.json"), "utf8"));
  expect(record.episode).toBe(4);
  expect(record.episodes.map((e: { episode: number }) => e.episode)).toEqual([1, 2, 3]);
  expect(await api.listContainers({ all: true, filters: { label: [`multienv.stack=${STACK}`] } })).toEqual([]);
});
