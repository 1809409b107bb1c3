// A pool's stack file and a task stack's live site naming it, as `multienv check` reads them: the pool's refusals,
// a site with both a pool and its own account settings refused, and a pooled site's server handed its account's
// settings as a secret in the rendered graph.
import { mkdirSync, writeFileSync } from "node:fs";
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { checkStack } from "../../src/runner/check/check";
import { RESOURCE_TYPES } from "../../src/protocol/resource-types";
import { cleanup, tempDir } from "../helpers/processes";

afterEach(cleanup);

const POOL = `config:
  multienv:pool:
    accounts:
      alex:
        settings: { account: alex }
        secretSettings: { token: alexToken }
      sam:
        settings: { account: sam }
        secretSettings: { token: samToken }
    leaseHours: 12
  multienv:alexToken:
    secure: v1:AAAA
  multienv:samToken:
    secure: v1:BBBB
`;

function task(site: string): string {
  return `config:
  multienv:websites:
    github:
${site}
  multienv:computers:
    desktop:
      network: [github.com]
`;
}

const LIVE = `      live: true
      domains: [github.com]
      server: { image: multienv/sample-live-server }
      accountPool: gh-pool`;

function project(files: Record<string, string>): string {
  const dir = tempDir();
  mkdirSync(path.join(dir, "stacks"));
  for (const [name, text] of Object.entries(files))
    writeFileSync(path.join(dir, "stacks", `Pulumi.${name}.yaml`), text);
  return dir;
}

describe("account pools in check", () => {
  it("accepts a pool whose secret settings are secrets", async () => {
    const dir = project({ "gh-pool": POOL });
    expect(await checkStack("gh-pool", { projectDir: dir })).toMatchObject({ ok: true, problems: [] });
  });

  it("refuses a pool whose secret setting is plaintext or unset, naming the key and the fix", async () => {
    const dir = project({
      "gh-pool": POOL.replace(
        "  multienv:alexToken:\n    secure: v1:AAAA\n",
        "  multienv:alexToken: hunter22\n",
      ).replace("  multienv:samToken:\n    secure: v1:BBBB\n", ""),
    });
    const result = await checkStack("gh-pool", { projectDir: dir });
    expect(result.ok).toBe(false);
    expect(result.problems).toEqual([
      "multienv:pool.accounts.alex.secretSettings.token: names config key alexToken, which holds a plaintext value; a secret setting must be a secret: `pulumi config set --secret alexToken <value> --stack gh-pool`",
      "multienv:pool.accounts.sam.secretSettings.token: names config key samToken, which is not set; set it with `pulumi config set --secret samToken <value> --stack gh-pool`",
    ]);
  });

  it("refuses a live site with both a pool and its own account settings", async () => {
    const secretToo = project({
      "gh-pool": POOL,
      task: task(`${LIVE}\n      secretSettings: { token: myToken }`) + "  multienv:myToken:\n    secure: v1:CCCC\n",
    });
    const both = await checkStack("task", { projectDir: secretToo });
    expect(both.ok).toBe(false);
    expect(both.problems.join("\n")).toContain(
      "multienv:websites.github.secretSettings: the site leases its account from pool gh-pool, whose accounts hold the secret settings",
    );

    const plainToo = project({
      "gh-pool": POOL,
      task: task(`${LIVE}\n      settings: { account: me, sessionDomain: github.com }`),
    });
    const plain = await checkStack("task", { projectDir: plainToo });
    expect(plain.problems).toEqual([
      "multienv:websites.github.settings.account: is an account setting of pool gh-pool (accounts alex, sam); a site that leases its account takes its account settings from the pool alone, so remove it here",
    ]);
  });

  it("refuses a pool on a synthetic site, and a pool with no stack file", async () => {
    const synthetic = await checkStack("task", {
      projectDir: project({ "gh-pool": POOL, task: task("      domains: [shop.test]\n      accountPool: gh-pool") }),
    });
    expect(synthetic.problems.join("\n")).toContain(
      "multienv:websites.github.accountPool: only a live site signs in with a pool's accounts",
    );
    const missing = await checkStack("task", { projectDir: project({ task: task(LIVE) }) });
    expect(missing.problems[0]).toMatch(
      /^multienv:websites\.github\.accountPool: names pool gh-pool, which has no stack file /,
    );
  });

  it("hands the pooled site's server its leased account's settings as a secret, and declares its cleanup", async () => {
    const dir = project({ "gh-pool": POOL, task: task(LIVE) });
    const result = await checkStack("task", { projectDir: dir });
    expect(result.problems).toEqual([]);
    const lease = result.resources.find((r) => r.type === RESOURCE_TYPES.accountLease)!;
    expect(lease.inputs).toMatchObject({ pool: "gh-pool", holder: "task" });
    const server = result.resources.find(
      (r) => r.type === RESOURCE_TYPES.container && String(r.inputs.name).endsWith("github-server"),
    )!;
    expect(server.inputs.envs).toBe("[secret]");
    expect(server.additionalSecretOutputs).toContain("envs");
    expect(result.resources.some((r) => r.type === RESOURCE_TYPES.siteCleanup)).toBe(true);
  });

  it("refuses a pool with no shared store when the stacks' state is not a local file", async () => {
    const dir = project({ "gh-pool": POOL, task: task(LIVE) });
    const env = { PULUMI_BACKEND_URL: "s3://state-bucket/multienv" };
    const pool = await checkStack("gh-pool", { projectDir: dir, env });
    expect(pool.ok).toBe(false);
    expect(pool.problems).toHaveLength(1);
    expect(pool.problems[0]).toMatch(
      /^multienv:pool\.store: is unset, .*not a local file \(it is at s3:\/\/state-bucket\).*set store to a PostgreSQL URL/,
    );
    const taskResult = await checkStack("task", { projectDir: dir, env });
    expect(taskResult.problems[0]).toMatch(/^pool gh-pool: multienv:pool\.store: is unset/);
    const shared = project({
      "gh-pool": POOL.replace(
        "    leaseHours: 12\n",
        "    leaseHours: 12\n    store: postgres://multienv@db.internal/multienv\n",
      ),
    });
    expect(await checkStack("gh-pool", { projectDir: shared, env })).toMatchObject({ ok: true, problems: [] });
    expect(await checkStack("gh-pool", { projectDir: dir, env: {} })).toMatchObject({ ok: true, problems: [] });
  });

  it("warns of a store password in plain text, naming the key and the fix; a storePassword must be a secret", async () => {
    const plain = project({
      "gh-pool": POOL.replace(
        "    leaseHours: 12\n",
        "    leaseHours: 12\n    store: postgres://multienv:hunter22@db.internal/multienv\n",
      ),
    });
    const warned = await checkStack("gh-pool", { projectDir: plain, env: {} });
    expect(warned.ok).toBe(true);
    expect(warned.warnings).toEqual([
      expect.stringMatching(
        /^multienv:pool\.store: holds the store's password in plain text in the stack file; .*`pulumi config set --secret storePassword <password> --stack gh-pool`/,
      ),
    ]);
    const secret = project({
      "gh-pool":
        POOL.replace(
          "    leaseHours: 12\n",
          "    leaseHours: 12\n    store: postgres://multienv@db.internal/multienv\n    storePassword: pgPassword\n",
        ) + "  multienv:pgPassword:\n    secure: v1:DDDD\n",
    });
    expect(await checkStack("gh-pool", { projectDir: secret, env: {} })).toMatchObject({
      ok: true,
      problems: [],
      warnings: [],
    });
    const notSecret = project({
      "gh-pool":
        POOL.replace(
          "    leaseHours: 12\n",
          "    leaseHours: 12\n    store: postgres://multienv@db.internal/multienv\n    storePassword: pgPassword\n",
        ) + "  multienv:pgPassword: hunter22\n",
    });
    const refused = await checkStack("gh-pool", { projectDir: notSecret, env: {} });
    expect(refused.problems).toEqual([
      expect.stringMatching(
        /^multienv:pool\.storePassword: names config key pgPassword, which holds a plaintext value/,
      ),
    ]);
  });
});
