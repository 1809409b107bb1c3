// Many stacks' deploys from one runner, so many at once: never more under way than the limit, every one run, each
// outcome in its place, one failing stopping none of the others.
import { describe, expect, it } from "vitest";
import { deployStacks, RunnerError } from "../../src/runner";
import { settleWithLimit } from "../../src/runner/stack/concurrency";

const tick = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("operations with a concurrency limit", () => {
  it("never has more than the limit under way, and runs every item, each outcome in its place", async () => {
    let underWay = 0;
    let most = 0;
    const started: number[] = [];
    const results = await settleWithLimit(
      Array.from({ length: 9 }, (_, i) => i),
      3,
      async (item) => {
        started.push(item);
        most = Math.max(most, ++underWay);
        // Uneven lengths: a slot freed early is taken by the next item at once.
        await tick(item % 2 === 0 ? 30 : 5);
        underWay--;
        if (item === 4) throw new Error("item 4 failed");
        return item * 10;
      },
    );
    expect(most).toBe(3);
    expect(started).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8]);
    expect(results.map((r) => (r.status === "fulfilled" ? r.value : (r.reason as Error).message))).toEqual([
      0,
      10,
      20,
      30,
      "item 4 failed",
      50,
      60,
      70,
      80,
    ]);
  });

  it("starts every item at once when the limit is above their number", async () => {
    let underWay = 0;
    let most = 0;
    await settleWithLimit([1, 2, 3], 10, async () => {
      most = Math.max(most, ++underWay);
      await tick(10);
      underWay--;
    });
    expect(most).toBe(3);
  });

  it("refuses a limit that is not a whole number of 1 or more", async () => {
    for (const limit of [0, -1, 1.5, Number.NaN])
      await expect(settleWithLimit([1], limit, async () => 1)).rejects.toThrow(
        /concurrency .*whole number of 1 or more/,
      );
  });
});

describe("deployStacks", () => {
  it("keeps each stack's own one-line refusal in its place and tells each outcome, the others deploying on", async () => {
    const told: string[] = [];
    const results = await deployStacks(["Bad Name", { name: "also bad!", config: {} }], {
      concurrency: 1,
      onSettled: (stack, outcome) => told.push(`${stack} ${outcome.ok} ${outcome.error?.includes(stack)}`),
    });
    expect(told).toEqual(["Bad Name false true", "also bad! false true"]);
    for (const [i, result] of results.entries()) {
      expect(result.status).toBe("rejected");
      const reason = (result as PromiseRejectedResult).reason as Error;
      expect(reason).toBeInstanceOf(RunnerError);
      expect(reason.message).toContain(["Bad Name", "also bad!"][i]);
      expect(reason.message.split("\n")).toHaveLength(1);
    }
  });
});
