// A stack of one's own named as a member of a task's warm pool (`<task>-w<n>` beside stacks/Pulumi.<task>.yaml) is
// refused by check (and so by up): `multienv warm <task>` would take it for a member and deploy over it.
import { copyFileSync, mkdirSync, writeFileSync } from "node:fs";
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { checkStack } from "../../src/runner/check/check";
import { cleanup, ROOT, tempDir } from "../helpers/processes";

afterEach(cleanup);

function projectWith(stacks: string[]): string {
  const dir = tempDir("multienv-pool-names-");
  writeFileSync(path.join(dir, "Pulumi.yaml"), "name: multienv\nruntime: nodejs\n");
  mkdirSync(path.join(dir, "stacks"));
  for (const stack of stacks)
    copyFileSync(
      path.join(ROOT, "test/e2e/fixtures/Pulumi.pool-shop.yaml"),
      path.join(dir, "stacks", `Pulumi.${stack}.yaml`),
    );
  return dir;
}

describe("check of a stack named as a warm pool's member", () => {
  it("refuses <task>-w<n> beside the task's stack file, in one line naming the task and the fix", async () => {
    const projectDir = projectWith(["shop", "shop-w2"]);
    const result = await checkStack("shop-w2", { projectDir });
    expect(result.ok).toBe(false);
    expect(result.problems).toEqual([
      "stack shop-w2: the name of a member of task shop's warm pool (<task>-w<n>, beside stacks/Pulumi.shop.yaml): `multienv warm shop` would deploy over it; give the stack a name without the -w<n> suffix",
    ]);
  });

  it("takes the same name with no such task, and names a pool would never give (w0, a w with no number)", async () => {
    const projectDir = projectWith(["shop", "mall-w2", "shop-w0", "shop-w"]);
    for (const stack of ["mall-w2", "shop-w0", "shop-w"])
      expect((await checkStack(stack, { projectDir })).problems.join("\n"), stack).not.toMatch(/warm pool/);
  });
});
