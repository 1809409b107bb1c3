// Draining a warm pool (`warm <task> --size 0`) with a member that failed its deploy or reset: the member goes, it is
// never deployed again for a pool that keeps none. The members are registered by hand with a stack file each and
// nothing deployed, so each destroy is the runner's real down (the Pulumi CLI) of a stack with no resource; a member
// whose destroy fails (no stack file) is failed at once, and the drain stops saying so rather than waiting on it.
import { copyFileSync } from "node:fs";
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { openLeaseStore } from "../../src/accounts";
import { memberName, poolOf, warmPool } from "../../src/runner/pools";
import { cleanup, onCleanup } from "../helpers/processes";
import { envOf, project, registerReady } from "./helpers";

afterEach(cleanup);

const TASK = "shop";

describe("draining a warm pool", () => {
  it("destroys a failed member instead of replacing it, and returns once none is left", async () => {
    const p = project(TASK);
    const store = await openLeaseStore({ sqliteFile: p.sqliteFile });
    onCleanup(() => store.close());
    await registerReady(store, p, TASK, 2);
    for (const n of [1, 2])
      copyFileSync(
        path.join(p.projectDir, "stacks", `Pulumi.${TASK}.yaml`),
        path.join(p.projectDir, "stacks", `Pulumi.${memberName(TASK, n)}.yaml`),
      );
    await store.setMember(poolOf(TASK), memberName(TASK, 2), "failed");
    const lines: string[] = [];
    const env = { ...envOf(p), PULUMI_CONFIG_PASSPHRASE: "drain" };
    const state = await warmPool(TASK, 0, { projectDir: p.projectDir, env, log: (l) => lines.push(l) });
    expect(state).toMatchObject({ size: 0, ready: 0, failed: 0, deploying: 0 });
    expect(lines.filter((l) => /replacing|deploying shop-w/.test(l))).toEqual([]);
    expect(await store.accounts(poolOf(TASK))).toEqual([]);
  }, 240_000);

  it("fails a member whose destroy fails, and the drain stops in one line instead of waiting on it", async () => {
    const p = project(TASK);
    const store = await openLeaseStore({ sqliteFile: p.sqliteFile });
    onCleanup(() => store.close());
    await registerReady(store, p, TASK, 1);
    const refusal = await warmPool(TASK, 0, { projectDir: p.projectDir, env: envOf(p) }).then(
      () => "",
      (error: Error) => error.message,
    );
    expect(refusal).toMatch(/^pool shop: 1 env\(s\) failed to deploy or reset/);
    expect((await store.accounts(poolOf(TASK))).map((r) => r.state)).toEqual(["failed"]);
  }, 240_000);
});
