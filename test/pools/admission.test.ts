// Admission: a pool never grows past what the machine's free memory holds at an idle env's measured cost. The free
// memory is injected (the keeper's `availableMemory`), so the refusal is met without filling the machine; the pool's
// members are registered ready without a deploy, of the current stack file, so the keeper has nothing else to do.
import { execFileSync } from "node:child_process";
import { afterEach, describe, expect, it } from "vitest";
import { openLeaseStore } from "../../src/accounts";
import { servePools, warmPool } from "../../src/runner/pools";
import { admission, MEMORY_RESERVE_BYTES, quantityBytes } from "../../src/runner/pools/admission";
import { stackFileHash } from "../../src/runner/pools/pool";
import { cleanup, onCleanup } from "../helpers/processes";
import { envOf, project, registerReady } from "./helpers";

afterEach(cleanup);

const TASK = "shop";
const GIB = 1024 ** 3;

describe("admission of a warm pool", () => {
  it("counts the envs there, those deploying, and the free memory's worth beyond the reserve", () => {
    expect(admission(GIB, MEMORY_RESERVE_BYTES + 2.5 * GIB, 1, 1)).toMatchObject({ admits: 3 });
    expect(admission(GIB, MEMORY_RESERVE_BYTES + 0.5 * GIB, 2, 0)).toMatchObject({ admits: 2 });
    // Less free than the reserve: no more, never fewer than those already there.
    expect(admission(GIB, MEMORY_RESERVE_BYTES / 2, 2, 1)).toMatchObject({ admits: 3 });
    expect(admission(undefined, 64 * GIB, 0, 0)).toMatchObject({ admits: null });
  });

  it("reads a cluster node's allocatable memory in any of Kubernetes' units, and nothing from a quantity it cannot", () => {
    expect(quantityBytes("24581348Ki")).toBe(24581348 * 1024);
    expect(quantityBytes("2Gi")).toBe(2 * GIB);
    expect(quantityBytes("1500M")).toBe(1.5e9);
    expect(quantityBytes("1e9")).toBe(1e9);
    expect(quantityBytes("123")).toBe(123);
    // Not a memory quantity: no room counted, so a pool never grows on a figure it misread.
    expect(quantityBytes("12m")).toBe(0);
    expect(quantityBytes("lots")).toBe(0);
  });

  it("refuses to grow past the free memory in one line saying how many fit and why, and GET /v1/pools says admits", async () => {
    const p = project(TASK);
    const store = await openLeaseStore({ sqliteFile: p.sqliteFile });
    onCleanup(() => store.close());
    const hash = await stackFileHash(p.projectDir, TASK);
    await registerReady(store, p, TASK, 2, undefined, { stackFileHash: hash, idleMemoryBytes: GIB });
    // Room for half an env more beyond the reserve: none.
    const availableMemory = async () => MEMORY_RESERVE_BYTES + 0.5 * GIB;
    const lines: string[] = [];
    const asked = warmPool(TASK, 5, {
      projectDir: p.projectDir,
      env: envOf(p),
      availableMemory,
      log: (line) => lines.push(line),
    });
    const refusal = await asked.then(
      () => "",
      (error: Error) => error.message,
    );
    expect(refusal).toBe(
      `pool ${TASK}: only 2 env(s) fit, not 5: an idle env takes 1.00 GiB; 1.00 GiB is free, 0.50 GiB of it kept for the machine, beside 2 env(s) already there; the pool keeps 2; ask for 2 or fewer, or free memory`,
    );
    // The keeper said it once, and deployed nothing.
    expect(lines.filter((l) => l.includes("admission allows 2 env(s) of 5"))).toHaveLength(1);
    expect(lines.filter((l) => l.includes(`deploying ${TASK}-w`))).toEqual([]);
    expect((await store.accounts(`warm:${TASK}`)).map((r) => r.state)).toEqual(["ready", "ready"]);

    const service = await servePools({
      projectDir: p.projectDir,
      env: envOf(p),
      port: 0,
      keeper: false,
      availableMemory,
    });
    onCleanup(() => service.close());
    const token = execFileSync("cat", [service.tokenFile], { encoding: "utf8" }).trim();
    const pools = (await (
      await fetch(`${service.url}/v1/pools`, { headers: { authorization: `Bearer ${token}` } })
    ).json()) as { pools: Record<string, unknown>[] };
    expect(pools.pools).toEqual([expect.objectContaining({ task: TASK, size: 5, ready: 2, admits: 2 })]);
  });
});
