// The stack's lifecycle lock between processes (src/runner/stack/lifecycle-lock.ts), held by real node processes
// racing on one stack's run.json as resets do: one at a time, none of their writes lost, run.json whole; a holder
// killed with SIGKILL leaves the stack to the next at once; one that outlasts the wait gets one line naming it.
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { resetStack } from "../../src/runner";
import { cleanup, spawnService, tempDir, type ServiceProcess } from "../helpers/processes";
import { until } from "../helpers/until";

function artifacts(): string {
  const dir = join(tempDir("multienv-lifecycle-lock-"), "artifacts", "shop");
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, "run.json"), JSON.stringify({ episode: 1, resets: [] }));
  return dir;
}

function holder(artifactsDir: string, holdMs: number, waitMs?: number): ServiceProcess {
  const env = { LOCK_HOLDER: JSON.stringify({ artifactsDir, stack: "shop", doing: "resetting", holdMs, waitMs }) };
  return spawnService(["--import", "tsx", "test/runner/lifecycle-lock-holder.ts"], env);
}

const event = (name: string) => (line: Record<string, unknown>) => line.event === name;

afterEach(cleanup);

describe("a stack's lifecycle lock between processes", () => {
  it("lets racing processes reset one at a time: every one's run.json write kept, the file whole", async () => {
    const dir = artifacts();
    const racers = Array.from({ length: 4 }, () => holder(dir, 300));
    try {
      for (const racer of racers) await racer.waitForLog(event("done"), 60_000);
    } finally {
      await Promise.all(racers.map((r) => r.stop()));
    }
    const record = JSON.parse(readFileSync(join(dir, "run.json"), "utf8")) as {
      episode: number;
      resets: { pid: number; started: number; ended: number }[];
    };
    expect(record.episode).toBe(5);
    expect(record.resets.map((r) => r.pid).sort()).toEqual(racers.map((r) => r.process.pid).sort());
    const held = [...record.resets].sort((a, b) => a.started - b.started);
    for (let i = 1; i < held.length; i++) expect(held[i].started).toBeGreaterThanOrEqual(held[i - 1].ended);
  }, 90_000);

  it("leaves nothing locked when its holder is killed with SIGKILL: the next takes the stack without waiting it out", async () => {
    const dir = artifacts();
    const first = holder(dir, 600_000);
    await first.waitForLog(event("held"), 30_000);
    first.process.kill("SIGKILL");
    await new Promise((resolve) => first.process.once("exit", resolve));
    // Its wait is far shorter than the killed holder's hold: it takes the lock only because the holder is gone.
    const next = holder(dir, 10, 20_000);
    try {
      await next.waitForLog(event("done"), 30_000);
    } finally {
      await next.stop();
    }
    expect(JSON.parse(readFileSync(join(dir, "run.json"), "utf8")).episode).toBe(2);
  }, 60_000);

  it("refuses a second process after its wait with one line naming the holder, what it does and since when", async () => {
    const dir = artifacts();
    const first = holder(dir, 600_000);
    try {
      const held = await first.waitForLog(event("held"), 30_000);
      const second = holder(dir, 10, 1_000);
      const refused = await second.waitForLog(event("refused"), 30_000);
      expect(refused.message).toMatch(
        new RegExp(
          `^stack shop: not resetting: process ${held.pid} \\(resetting it since \\d{4}-\\d\\d-\\d\\dT[\\d:.]+Z\\) still holds it after 1 s; run this again once it is done$`,
        ),
      );
      expect(second.logs.filter(event("log")).map((l) => l.line)).toEqual([
        expect.stringMatching(new RegExp(`^stack shop: waiting for process ${held.pid} \\(resetting it since `)),
      ]);
      await second.stop();
    } finally {
      await first.stop();
    }
    expect(JSON.parse(readFileSync(join(dir, "run.json"), "utf8")).episode).toBe(1);
  }, 60_000);

  it("holds a library reset until another process's operation on the stack ends", async () => {
    const dir = artifacts();
    const first = holder(dir, 600_000);
    const held = await first.waitForLog(event("held"), 30_000);
    const lines: string[] = [];
    // A state with nothing deployed: once it holds the lock, the reset refuses it, which is all it does here.
    const reset = resetStack("shop", {
      artifactsDir: dir,
      state: { outputs: {}, exported: { deployment: {} } },
      log: (line) => lines.push(line),
    });
    const outcome = reset.then(
      () => "reset",
      (error: Error) => error.message,
    );
    await until("the reset waiting", () => lines.find((l) => l.includes(`waiting for process ${held.pid}`)));
    expect(await Promise.race([outcome, new Promise((r) => setTimeout(() => r("waiting"), 500))])).toBe("waiting");
    first.process.kill("SIGKILL");
    expect(await outcome).toBe("stack shop: nothing is deployed; deploy it first with `multienv up shop`");
    expect(JSON.parse(readFileSync(join(dir, "run.json"), "utf8")).episode).toBe(1);
  }, 60_000);
});
