// `multienv accounts <pool>` as an operator runs it: the pool's accounts and their holders from the machine's own
// store (in its MULTIENV_CACHE), as a table or the documented JSON, and an account freed by hand
// saying who held it; a wrong account or a free one refused in one line.
import { execFile } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { accountsDbFile, openLeaseStore } from "../../src/accounts";
import { cleanup, ROOT, tempDir } from "../helpers/processes";

afterEach(cleanup);

const CLI = join(ROOT, "bin/multienv.js");

function run(args: string[], env: NodeJS.ProcessEnv): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) =>
    execFile(
      process.execPath,
      [CLI, ...args],
      { cwd: ROOT, env: { ...process.env, ...env } },
      (error, stdout, stderr) =>
        resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    ),
  );
}

/** A project with a pool of three accounts, `task-1` holding one, on a file backend and a machine folder of its own. */
async function pooledProject(): Promise<{ dir: string; env: NodeJS.ProcessEnv }> {
  const dir = tempDir("accounts-project-");
  writeFileSync(join(dir, "Pulumi.yaml"), "name: multienv\nruntime: nodejs\nstackConfigDir: stacks\n");
  mkdirSync(join(dir, "stacks"));
  writeFileSync(
    join(dir, "stacks", "Pulumi.gh.yaml"),
    "config:\n  multienv:pool:\n    accounts:\n      alex: { settings: { account: alex } }\n      kim: { settings: { account: kim } }\n      sam: { settings: { account: sam } }\n",
  );
  const backend = `file://${join(dir, "state")}`;
  mkdirSync(join(dir, "state"));
  const env = { PULUMI_BACKEND_URL: backend, MULTIENV_CACHE: join(dir, "machine") };
  const store = await openLeaseStore({ sqliteFile: accountsDbFile(env) });
  await store.syncPool("gh", ["alex", "kim", "sam"]);
  await store.tryLease("gh", { id: "lease-of-task-1", name: "task-1" }, 3_600_000);
  await store.close();
  return { dir, env };
}

describe("multienv accounts", () => {
  it("prints each account and its holder, as JSON too", async () => {
    const { dir, env } = await pooledProject();
    const json = await run(["accounts", "gh", "--json", "--project-dir", dir], env);
    expect(json.code).toBe(0);
    const list = JSON.parse(json.stdout) as { pool: string; accounts: Record<string, unknown>[] };
    expect(list.pool).toBe("gh");
    expect(list.accounts.map((a) => [a.name, a.heldBy])).toEqual([
      ["alex", "task-1"],
      ["kim", null],
      ["sam", null],
    ]);
    expect(Date.parse(String(list.accounts[0].until))).toBeGreaterThan(Date.parse(String(list.accounts[0].since)));
    expect(list.accounts[1]).toEqual({ name: "kim", heldBy: null, since: null, until: null });

    const table = await run(["accounts", "gh", "--project-dir", dir], env);
    expect(table.stdout.split("\n")[0]).toMatch(/^ACCOUNT\s+HELD BY\s+SINCE\s+UNTIL$/);
    expect(table.stdout).toMatch(/^alex\s+task-1\s+\d{4}-/m);
  });

  it("--release frees an account, saying who held it; a free or unknown account is refused in one line", async () => {
    const { dir, env } = await pooledProject();
    const freed = await run(["accounts", "gh", "--release", "alex", "--project-dir", dir], env);
    expect(freed).toMatchObject({ code: 0, stdout: "account alex of pool gh is free; stack task-1 held it\n" });
    const again = await run(["accounts", "gh", "--release", "alex", "--project-dir", dir], env);
    expect(again.code).toBe(1);
    expect(again.stderr.trim().split("\n")).toHaveLength(1);
    expect(again.stderr).toContain("account alex of pool gh is not leased; nothing to free");
    const unknown = await run(["accounts", "gh", "--release", "bob", "--project-dir", dir], env);
    expect(unknown.stderr).toContain("pool gh has no account bob; its accounts: alex, kim, sam");
  });
});
