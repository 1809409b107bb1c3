// Account pools with the real engine on the real Docker engine: a pool of two accounts (a stack of its own) and three
// task stacks whose live site (the sample live server, whose /session shows the account it serves) leases from it.
// Two deploy at once with different accounts, each server serving its own; the third waits, then fails in one line
// naming the pool and its holders with nothing of it created; once one of the others is down (its site's cleanup
// run), the third deploys with the freed account. The accounts' secret settings never reach the state in plain text.
import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { readFileSync, readdirSync, rmSync, statSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { engineClient } from "../../src/engines/docker";
import { deployStack, destroyStack, gatewayAccess, listStacks, type StackSpec } from "../../src/runner";
import { poolAccounts, releaseAccount } from "../../src/runner/operator/accounts";
import { ACCOUNT_WAIT_ENV } from "../../src/accounts";
import { e2eStack, STACK_LABEL, stackFileOf, sweepStack } from "./helpers/env";

const POOL = e2eStack("e2e-pool");
const TASKS = ["a", "b", "c"].map((t) => e2eStack(`e2e-pooled-${t}`));
const TOKENS = {
  alexToken: `ghp_alex_${randomBytes(10).toString("hex")}`,
  samToken: `ghp_sam_${randomBytes(10).toString("hex")}`,
};
const api = engineClient();

const poolSpec: StackSpec = {
  name: POOL,
  config: {
    pool: {
      accounts: {
        alex: { settings: { account: "alex" }, secretSettings: { token: "alexToken" } },
        sam: { settings: { account: "sam" }, secretSettings: { token: "samToken" } },
      },
    },
  },
  secrets: TOKENS,
};

function taskSpec(name: string): StackSpec {
  return {
    name,
    config: {
      target: "docker",
      websites: {
        github: {
          live: true,
          domains: ["github.com"],
          server: { image: "multienv/sample-live-server" },
          settings: { sessionDomain: "github.com" },
          accountPool: POOL,
        },
      },
      selfTest: false,
    },
  };
}

/** The account the stack's live server signs in as: the session cookie its /session answers, through the gateway. */
async function servedAccount(stack: string): Promise<string> {
  const access = await gatewayAccess(stack);
  try {
    const answer = await fetch(`${access.gatewayUrl.replace(/\/+$/, "")}/svc/github/session`, {
      headers: { authorization: `Bearer ${access.controlToken}` },
    });
    const state = (await answer.json()) as { cookies: { name: string; value: string }[] };
    return state.cookies.find((c) => c.name === "user_session")!.value;
  } finally {
    await access.close();
  }
}

/** Every file of the state directory as text. */
function stateText(): string {
  const dir = fileURLToPath(process.env.PULUMI_BACKEND_URL!);
  const texts: string[] = [];
  const walk = (d: string) => {
    for (const name of readdirSync(d)) {
      const p = path.join(d, name);
      if (statSync(p).isDirectory()) walk(p);
      else if (!name.startsWith("accounts.sqlite")) texts.push(readFileSync(p, "latin1"));
    }
  };
  walk(dir);
  return texts.join("\n");
}

async function containersOf(stack: string): Promise<number> {
  return (await api.listContainers({ all: true, filters: { label: [`${STACK_LABEL}=${stack}`] } })).length;
}

afterAll(async () => {
  for (const stack of [...TASKS, POOL]) await destroyStack(stack).catch(() => undefined);
  for (const stack of TASKS) await sweepStack(api, stack).catch(() => undefined);
  for (const stack of [...TASKS, POOL]) rmSync(stackFileOf(stack), { force: true });
}, 600_000);

describe("account pools on the docker target", () => {
  it("leases each task its own account, makes the third wait and fail clearly, and frees an account at down", async () => {
    const [a, b, c] = TASKS;
    await deployStack(poolSpec);

    // Two at once: two different accounts, each server serving its own.
    const [upA, upB] = await Promise.all([deployStack(taskSpec(a)), deployStack(taskSpec(b))]);
    const accountOf = (up: typeof upA) => (up.displayed.accounts as Record<string, { account: string }>).github.account;
    const leased = [accountOf(upA), accountOf(upB)];
    expect(leased.sort()).toEqual(["alex", "sam"]);
    expect(await servedAccount(a)).toBe(accountOf(upA));
    expect(await servedAccount(b)).toBe(accountOf(upB));
    const listed = await poolAccounts(POOL);
    expect(listed.accounts.map((x) => [x.name, x.heldBy])).toEqual([
      ["alex", accountOf(upA) === "alex" ? a : b],
      ["sam", accountOf(upA) === "sam" ? a : b],
    ]);
    const ls = await listStacks();
    expect(ls.stacks.find((s) => s.stack === a)?.accounts).toEqual({ github: { pool: POOL, account: accountOf(upA) } });

    // The secret settings reach the server, as a secret: never in the state's plain text.
    const serverEnv = JSON.parse(
      execFileSync("docker", ["inspect", "--format", "{{json .Config.Env}}", `${a}-github-server`], {
        encoding: "utf8",
      }),
    ) as string[];
    expect(serverEnv.join("\n")).toContain(TOKENS[accountOf(upA) === "alex" ? "alexToken" : "samToken"]);
    const state = stateText();
    expect(state).not.toContain(TOKENS.alexToken);
    expect(state).not.toContain(TOKENS.samToken);

    // The third waits, then fails in one line naming the pool and its holders, with nothing of it created.
    const failed = await deployStack(taskSpec(c), { programEnv: { [ACCOUNT_WAIT_ENV]: "5" } }).then(
      () => undefined,
      (error: Error) => error.message,
    );
    expect(failed).toMatch(
      new RegExp(
        `pool ${POOL}: every account is leased \\(alex by (${a}|${b}) until .*, sam by (${a}|${b}) until .*\\) and none was freed within 5 s`,
      ),
    );
    expect(await containersOf(c)).toBe(0);

    // Once one is down (its site's cleanup run, then its lease released), the third deploys with the freed account.
    const freed = accountOf(upA);
    await destroyStack(a);
    expect((await poolAccounts(POOL)).accounts.find((x) => x.name === freed)?.heldBy).toBeNull();
    const upC = await deployStack(taskSpec(c));
    expect(accountOf(upC)).toBe(freed);
    expect(await servedAccount(c)).toBe(freed);

    // An up of a stack holding a lease keeps the account and extends the lease.
    const before = (await poolAccounts(POOL)).accounts.find((x) => x.name === freed)!;
    const again = await deployStack(taskSpec(c));
    expect(accountOf(again)).toBe(freed);
    const after = (await poolAccounts(POOL)).accounts.find((x) => x.name === freed)!;
    expect(after.since).toBe(before.since);
    expect(Date.parse(after.until!)).toBeGreaterThan(Date.parse(before.until!));

    // Freed by hand, saying who held it.
    expect(await releaseAccount(POOL, accountOf(upB))).toBe(b);
  }, 1_500_000);
});
