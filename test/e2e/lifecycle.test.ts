// What a Pulumi user checks first, with the real engine on the real Docker engine: outputs and the control
// token as the CLI shows them, no diff on an unchanged stack, secrets as ciphertext at rest, a change
// touching only what it names, drift repaired by refresh, two `multienv reset` CLIs at once taking turns
// (the stack's lifecycle lock), bad config stopped with check's own lines, and the plain CLI's up and destroy
// (the capture collector storing every capture before anything goes).
import { execFile, execFileSync, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { engineClient } from "../../src/engines/docker";
import { deployStack, gatewayAccess, stackStatus, type StackSpec } from "../../src/runner";
import { resourcesInDeployment } from "../../src/runner/stack/progress";
import { openStack } from "../../src/runner/stack/workspace";
import { readRunRecord } from "../../src/runner/evidence/run-record";
import { lifecycleLockFile } from "../../src/runner/stack/lifecycle-lock";
import { multienv, startMultienv, type CliRun } from "./helpers/cli";
import { e2eStack, REPO, stackFileOf, sweepStack } from "./helpers/env";
import { until } from "../helpers/until";

const STACK = e2eStack("e2e-life");

/** The CLI's and the Node.js language host's versions, as `pulumi about` reports them. */
const HOST = (() => {
  const about = JSON.parse(
    execFileSync("pulumi", ["about", "--json"], {
      cwd: REPO,
      env: process.env,
      encoding: "utf8",
      stdio: ["ignore", "pipe", "ignore"],
    }),
  );
  const language =
    (about.plugins as { name: string; kind: string; version: string }[]).find(
      (p) => p.kind === "language" && p.name === "nodejs",
    )?.version ?? "unknown";
  return { cli: String(about.cliAbout?.version ?? "").replace(/^v/, ""), language };
})();
const POLICY_PACKS_RUN = HOST.language === HOST.cli;
const SECRET_SETTING = `ghp_e2e_${randomBytes(12).toString("hex")}`;
const ARTIFACTS = path.join(REPO, "artifacts", STACK);
const api = engineClient();

const WEBSITES = {
  shop: {
    domains: ["shop.test"],
    server: { image: "multienv/sample-shop-server" },
    frontend: { image: "multienv/sample-shop-frontend" },
    settings: { currency: "USD" },
  },
  github: {
    live: true,
    domains: ["github.com"],
    server: { image: "multienv/sample-live-server" },
    settings: { account: "alex" },
    secretSettings: { token: "githubToken" },
  },
};

function spec(websites: Record<string, unknown> = WEBSITES): StackSpec {
  return {
    name: STACK,
    config: {
      target: "docker",
      captureTraffic: true,
      websites,
      computers: { desktop: { network: ["example.org"], startTabs: ["https://shop.test/"] } },
      // Its checks of the live github.com need the web stand-in, which this file does not start (demo.test does).
      selfTest: false,
    },
    secrets: { githubToken: SECRET_SETTING },
  };
}

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** The plain Pulumi CLI in the project directory, on this run's backend (test/e2e/setup.ts). */
function pulumi(args: string[], timeout = 240_000): Promise<Run> {
  return new Promise((resolve) => {
    execFile(
      "pulumi",
      [...args, "--non-interactive"],
      { cwd: REPO, env: process.env, timeout, maxBuffer: 64 * 1024 * 1024 },
      (error, stdout, stderr) =>
        resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

function multienvCheck(stackFile: string): Promise<Run> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [path.join(REPO, "bin/multienv.js"), "check", stackFile],
      { cwd: REPO, timeout: 120_000 },
      (error, stdout, stderr) =>
        resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

/** Container name -> the engine's id, for every container of the stack. */
async function containerIds(): Promise<Record<string, string>> {
  const list = await api.listContainers({ all: true, filters: { label: [`multienv.stack=${STACK}`] } });
  return Object.fromEntries(list.map((c) => [c.Names[0].slice(1), c.Id]));
}

function stateFile(): string {
  const backend = new URL(process.env.PULUMI_BACKEND_URL!).pathname;
  return path.join(backend, ".pulumi", "stacks", "multienv", `${STACK}.json`);
}

/** Runs `up` on the stack through the Automation API and returns its change summary. */
async function upSummary(): Promise<Record<string, number>> {
  const opened = await openStack(STACK);
  const result = await opened.stack.up({});
  return (result.summary.resourceChanges ?? {}) as Record<string, number>;
}

/** A gateway route answers (the gateway is up and routes to that site). */
/** True when the gateway at `gatewayUrl` serves `route`, given the control token (all but /healthz want it). */
async function routes(gatewayUrl: string, route: string): Promise<boolean> {
  const { controlToken } = await gatewayAccess(STACK);
  const answer = await fetch(`${gatewayUrl}${route}`, { headers: { "x-multienv-token": controlToken } }).catch(
    () => undefined,
  );
  return answer?.status === 200;
}

/**
 * A Docker engine of its own (its own data root, socket and containerd; no bridge, no iptables rules), real and
 * holding no image: what a machine that never ran `npm run images` has.
 */
async function startBareEngine(): Promise<{
  host: string;
  engine: ReturnType<typeof engineClient>;
  stop(): Promise<void>;
}> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "multienv-bare-engine-"));
  const host = `unix://${path.join(dir, "docker.sock")}`;
  const at = (name: string) => path.join(dir, name);
  const daemon = spawn(
    "dockerd",
    [
      ...["--data-root", at("data"), "--exec-root", at("exec"), "--pidfile", at("pid"), "-H", host],
      ...["--bridge", "none", "--iptables=false", "--ip6tables=false", "--ip-masq=false"],
    ],
    { stdio: "ignore" },
  );
  const exited = new Promise<void>((resolve) => daemon.on("exit", () => resolve()));
  const engine = engineClient({ host });
  await until("the bare engine to answer", () => engine.ping().then(() => true), 30_000, 100);
  return {
    host,
    engine,
    async stop() {
      daemon.kill("SIGTERM");
      await exited;
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

let gatewayUrl: string;
/** The outputs the first deploy returned, secrets masked. */
let deployedOutputs: Record<string, unknown>;
/** What the first deploy reported as it went. */
const progressLines: string[] = [];

beforeAll(async () => {
  await sweepStack(api, STACK);
  fs.rmSync(ARTIFACTS, { recursive: true, force: true });
  const deployed = await deployStack(spec(), { log: (line) => progressLines.push(line) });
  gatewayUrl = deployed.outputs.gatewayUrl;
  deployedOutputs = deployed.displayed;
}, 300_000);

afterAll(async () => {
  await pulumi(["destroy", "--yes", "--skip-preview", "--stack", STACK]).catch(() => undefined);
  await pulumi(["stack", "rm", "--yes", "--force", "--preserve-config", "--stack", STACK]).catch(() => undefined);
  await sweepStack(api, STACK).catch(() => undefined);
  fs.rmSync(stackFileOf(STACK), { force: true });
  fs.rmSync(ARTIFACTS, { recursive: true, force: true });
  // The lifecycle lock's file, beside the artifacts (every deploy and reset opens it), outlives them.
  fs.rmSync(lifecycleLockFile(ARTIFACTS), { force: true });
}, 300_000);

describe("a task stack under the real engine", () => {
  it("has the documented outputs, shows the token as [secret], and prints it with --show-secrets", async () => {
    const shown = await pulumi(["stack", "output", "--json", "--stack", STACK]);
    expect(shown.code).toBe(0);
    const outputs = JSON.parse(shown.stdout);
    expect(Object.keys(outputs).sort()).toEqual([
      "agentTokens",
      "captureTraffic",
      "computers",
      "controlToken",
      "gatewayUrl",
      "live",
      "liveReasons",
      "liveWebsites",
      "replayedWebsites",
      "reproducible",
      "selfTest",
      "websites",
    ]);
    expect(outputs.selfTest).toEqual({ skipped: true }); // off in this spec
    expect(outputs.controlToken).toBe("[secret]");
    expect(outputs.agentTokens).toBe("[secret]");
    expect(outputs.gatewayUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(outputs.websites.shop).toEqual({
      live: false,
      domains: ["shop.test"],
      svcUrl: `${outputs.gatewayUrl}/svc/shop/`,
      browseUrl: `${outputs.gatewayUrl}/website/shop/`,
    });
    expect(outputs.websites.github).toEqual({
      live: true,
      domains: ["github.com"],
      svcUrl: `${outputs.gatewayUrl}/svc/github/`,
    });
    expect(outputs.computers.desktop).toMatchObject({
      network: ["example.org"],
      cdpUrl: `${outputs.gatewayUrl}/computers/desktop/cdp`,
      siteTable: { shop: ["shop.test"] },
    });
    expect(outputs.computers.desktop.reaching).toEqual(expect.arrayContaining(["example.org", "github.com"]));
    expect(outputs).toMatchObject({ live: true, reproducible: false, captureTraffic: true });
    expect(outputs.liveWebsites).toEqual([
      { name: "github", domains: ["github.com"], allowHosts: [], reproducible: false },
    ]);
    expect(outputs.replayedWebsites, "no site of this spec is served from a recording").toEqual([]);
    // The outputs the deploy returned (taken off the engine's events) are the CLI's, the secrets masked the same way.
    expect(deployedOutputs).toEqual(outputs);

    const token = await pulumi(["stack", "output", "controlToken", "--show-secrets", "--stack", STACK]);
    expect(token.code).toBe(0);
    expect(token.stdout.trim()).toBe((await gatewayAccess(STACK)).controlToken);
    expect(token.stdout.trim()).toMatch(/^[0-9a-f]{64}$/);
  });

  it("counts its progress against what the program declared, with no preview: every step, the total once it arrives", async () => {
    const exported = await pulumi(["stack", "export", "--stack", STACK]);
    expect(exported.code).toBe(0);
    const resources = resourcesInDeployment(JSON.parse(exported.stdout));
    const counted = progressLines.filter((line) => /^\[\d+\/(\d+|\?)\] /.test(line));
    expect(progressLines.some((line) => line.includes("previewing"))).toBe(false);
    expect(counted.length).toBeGreaterThan(resources);
    // The count reaches the engine behind the SDK's own debug lines, so the first components' lines may say `?`;
    // from the first line with the total on, every line has it, and it is the state's.
    const finished = counted.filter((line) => line.includes("] done: "));
    expect(finished.length).toBe(resources);
    const first = counted.findIndex((line) => !line.includes("/?]"));
    expect(first).toBeGreaterThanOrEqual(0);
    for (const line of counted.slice(first)) expect(line).toMatch(new RegExp(`^\\[\\d+/${resources}\\] `));
    expect(finished.at(-1)).toMatch(new RegExp(`^\\[${resources}/${resources}\\] `));
  });

  it("reports no changes on a second up and on preview --expect-no-changes", async () => {
    const preview = await pulumi(["preview", "--expect-no-changes", "--stack", STACK]);
    expect(preview.stdout + preview.stderr).not.toContain("no changes were expected");
    expect(preview.code).toBe(0);
    const summary = await upSummary();
    expect(Object.keys(summary)).toEqual(["same"]);
  });

  it("keeps the control token and the secret setting as ciphertext in the state and in the stack file", async () => {
    const { controlToken } = await gatewayAccess(STACK);
    const state = fs.readFileSync(stateFile(), "utf8");
    const stackFile = fs.readFileSync(stackFileOf(STACK), "utf8");
    for (const [where, text] of [
      ["state", state],
      ["stack file", stackFile],
    ] as const) {
      expect({ where, token: text.includes(controlToken) }).toEqual({ where, token: false });
      expect({ where, setting: text.includes(SECRET_SETTING) }).toEqual({ where, setting: false });
    }
    expect(stackFile).toMatch(/multienv:githubToken:\s*\n\s*secure: /);
    // The values are there, encrypted: the state holds ciphertext for both.
    expect(state).toContain('"ciphertext"');
  });

  it("recreates only the changed site's server (and its capture sidecar, in that server's network namespace)", async () => {
    const before = await containerIds();
    await deployStack(spec({ ...WEBSITES, shop: { ...WEBSITES.shop, settings: { currency: "EUR" } } }));
    // What `multienv status` checks agrees with the deploy that just returned, new containers and all.
    const status = await stackStatus(STACK);
    expect(status.problems).toEqual([]);
    const after = await containerIds();
    const changed = Object.keys(before)
      .filter((name) => after[name] !== before[name])
      .sort();
    expect(changed).toEqual([`${STACK}-shop-server`, `${STACK}-shop-server-capture`]);
    const settings = (await api.getContainer(`${STACK}-shop-server`).inspect()).Config.Env.find((e: string) =>
      e.startsWith("AGENTENV_WEBSITE_SETTINGS="),
    );
    expect(settings).toBe('AGENTENV_WEBSITE_SETTINGS={"currency":"EUR"}');
    expect((await gatewayAccess(STACK)).gatewayUrl).toBe(gatewayUrl);
  });

  it("adds a website's containers and leaves the other sites alone; the gateway, reconfigured, is found at its new address", async () => {
    const before = await containerIds();
    const blog = {
      domains: ["blog.test"],
      server: { image: "multienv/sample-shop-server" },
      frontend: { image: "multienv/sample-shop-frontend" },
    };
    const websites = { ...WEBSITES, shop: { ...WEBSITES.shop, settings: { currency: "EUR" } }, blog };
    const deployed = await deployStack(spec(websites));
    const after = await containerIds();
    const added = Object.keys(after)
      .filter((name) => !(name in before))
      .sort();
    expect(added).toEqual([
      `${STACK}-blog-frontend`,
      `${STACK}-blog-frontend-capture`,
      `${STACK}-blog-server`,
      `${STACK}-blog-server-capture`,
    ]);
    // The gateway's config names every site and the proxy's site table every synthetic name, so those two are
    // recreated (the proxy keeps its CA in its volume); the other sites' containers and the browser are untouched.
    const changed = Object.keys(before)
      .filter((name) => after[name] !== before[name])
      .sort();
    expect(changed).toEqual([`${STACK}-desktop-proxy`, `${STACK}-gateway`]);
    // A replaced gateway is published on the port Docker picks for the new container: the runner learns it from
    // the outputs (gatewayAccess reads them on every command), and the old address serves nothing any more.
    expect((await gatewayAccess(STACK)).gatewayUrl).toBe(deployed.outputs.gatewayUrl);
    const previous = gatewayUrl;
    gatewayUrl = deployed.outputs.gatewayUrl;
    if (previous !== gatewayUrl) expect(await routes(previous, "/healthz")).toBe(false);
    await until("the new site through the gateway", () => routes(gatewayUrl, "/website/blog/"), 20_000, 250);
  });

  it("brings back a container removed by hand: refresh sees it gone, up recreates it", async () => {
    await api.getContainer(`${STACK}-shop-frontend`).remove({ force: true });
    const opened = await openStack(STACK);
    const refreshed = await opened.stack.refresh({});
    expect(refreshed.summary.resourceChanges).toMatchObject({ delete: 1 });
    const summary = await upSummary();
    expect(summary).toMatchObject({ create: 1 });
    expect((await api.getContainer(`${STACK}-shop-frontend`).inspect()).State.Running).toBe(true);
    await until("the shop's pages again", () => routes(gatewayUrl, "/website/shop/"), 20_000, 250);
  });

  it("runs two `multienv reset` CLIs started at once one after the other: one waits naming the other, both episodes recorded", async () => {
    const before = await readRunRecord(ARTIFACTS, STACK);
    const episode = before.episode ?? 1;
    const ended = before.episodes?.length ?? 0;
    const racers = [startMultienv(["reset", STACK]), startMultienv(["reset", STACK])];
    const runs = await Promise.all(racers.map((racer) => racer.done));
    for (const run of runs) expect(run.code, run.stderr).toBe(0);
    // Each ended an episode of its own, in turn: none numbered twice, none of run.json's endings written over.
    const after = await readRunRecord(ARTIFACTS, STACK);
    const endings = (after.episodes ?? []).slice(ended);
    expect(endings.map((e) => e.episode)).toEqual([episode, episode + 1]);
    expect(after.episode).toBe(episode + 2);
    expect(Date.parse(endings[1].endedAt)).toBeGreaterThanOrEqual(Date.parse(endings[0].endedAt));
    // The lifecycle lock's line (src/runner/stack/lifecycle-lock.ts), on the waiting CLI's stderr.
    const waitsFor = (run: CliRun, holder: CliRun) =>
      new RegExp(
        `^stack ${STACK}: waiting for process ${holder.pid} \\(resetting it since \\d{4}-\\d\\d-\\d\\dT[\\d:.]+Z\\) to finish$`,
        "m",
      ).test(run.stderr);
    const waited = runs.filter((run, i) => waitsFor(run, runs[1 - i]));
    expect(waited.length, runs.map((run) => `${run.pid}: ${run.stderr}`).join("\n")).toBe(1);
    const second = waited[0];
    const first = runs.find((run) => run !== second)!;
    expect(first.stderr).not.toContain("waiting for");
    // The holder began the next episode, the one that waited the one after.
    expect(first.stdout).toMatch(new RegExp(`^stack ${STACK}: episode ${episode + 1} begins `, "m"));
    expect(second.stdout).toMatch(new RegExp(`^stack ${STACK}: episode ${episode + 2} begins `, "m"));
    const status = await multienv(["status", STACK]);
    expect(status.code, status.stderr).toBe(0);
  });

  it("stops pulumi up on bad config or a refused plan with the lines multienv check prints, and no stack trace", async () => {
    const bad = e2eStack("e2e-bad");
    const file = stackFileOf(bad);
    fs.writeFileSync(
      file,
      [
        "config:",
        "  multienv:websites:",
        "    shop:",
        "      domains: [shop.test]",
        "      allowHosts: [cdn.example.com]",
        "      server: { image: multienv/sample-shop-server }",
        "      frontend: { image: multienv/sample-shop-frontend }",
        "    github:",
        "      live: true",
        "      domains: [github.com]",
        "      server: { image: multienv/sample-live-server }",
        "      frontend: { image: multienv/sample-shop-frontend }",
        "",
      ].join("\n"),
    );
    try {
      const check = await multienvCheck(file);
      expect(check.code).toBe(1);
      const problems = check.stderr.split("\n").filter((l) => l.startsWith("multienv:"));
      expect(problems.length).toBeGreaterThanOrEqual(2);
      await pulumi(["stack", "init", bad]);
      const up = await pulumi(["up", "--yes", "--skip-preview", "--stack", bad]);
      expect(up.code).not.toBe(0);
      const text = up.stdout + up.stderr;
      for (const line of problems) expect(text).toContain(line);
      expect(text).not.toMatch(/^\s+at .+\(.*:\d+:\d+\)$/m);
      expect(text).not.toMatch(/Error: .*\n\s+at /);
    } finally {
      await pulumi(["stack", "rm", "--yes", "--force", "--stack", bad]);
      fs.rmSync(file, { force: true });
    }
  });

  it("refuses a deploy on an engine without the project's images: one line each naming it and the command that builds it", async () => {
    const bare = await startBareEngine();
    const name = e2eStack("e2e-noimg");
    try {
      const failed = await deployStack({ ...spec(), name }, { programEnv: { DOCKER_HOST: bare.host } }).then(
        () => undefined,
        (error: Error) => error.message,
      );
      expect(failed).toBeDefined();
      const lines = failed!.split("\n");
      expect(lines[0]).toBe(
        `stack ${name}: deploying failed: multienv: image multienv/gateway:latest is not on the Docker engine; build it: npm run images -- gateway; fix it and run \`multienv up ${name}\` again`,
      );
      expect(lines.slice(1)).toEqual([
        "multienv: image multienv/site-proxy:latest is not on the Docker engine; build it: npm run images -- site-proxy",
        "multienv: image multienv/browser:latest is not on the Docker engine; build it: npm run images -- browser",
      ]);
      // Refused before anything was made: no image was built or pulled there, no container made anywhere.
      expect(await bare.engine.listImages({ all: true })).toEqual([]);
      expect(await bare.engine.listContainers({ all: true })).toEqual([]);
      expect(await api.listContainers({ all: true, filters: { label: [`multienv.stack=${name}`] } })).toEqual([]);
    } finally {
      await pulumi(["stack", "rm", "--yes", "--force", "--stack", name]);
      fs.rmSync(stackFileOf(name), { force: true });
      await bare.stop();
    }
  });

  // The CLI starts a policy pack through its language host's RunPlugin call; a host older than the CLI (the one
  // scripts/pulumi-toolchain.sh can build where the release's own is not served) has none.
  it.skipIf(!POLICY_PACKS_RUN)(
    `runs the policy pack under pulumi up --policy-pack policies (needs the CLI's own language host; this one is ${HOST.language})`,
    async () => {
      const up = await pulumi(["up", "--yes", "--skip-preview", "--stack", STACK, "--policy-pack", "policies"]);
      expect(up.code, up.stdout + up.stderr).toBe(0);
      expect(up.stdout).toMatch(/Policies:[\s\S]*multienv/);
    },
  );

  it("goes through the plain CLI: pulumi up, then pulumi destroy, which stores every capture before anything goes", async () => {
    const up = await pulumi(["up", "--yes", "--skip-preview", "--stack", STACK]);
    expect(up.code, up.stderr).toBe(0);
    const destroy = await pulumi(["destroy", "--yes", "--skip-preview", "--stack", STACK]);
    expect(destroy.code, destroy.stderr).toBe(0);
    expect(await containerIds()).toEqual({});
    const stored = fs.readdirSync(path.join(ARTIFACTS, "traffic"));
    for (const c of ["shop-server", "shop-frontend", "github-server", "blog-server", "blog-frontend"])
      expect(stored).toContain(`${c}.pcap0`);
    const record = JSON.parse(fs.readFileSync(path.join(ARTIFACTS, "run.json"), "utf8"));
    expect(record.captures.length).toBeGreaterThanOrEqual(5);
    for (const capture of record.captures) expect(capture.sha256).toMatch(/^[0-9a-f]{64}$/);
    expect(fs.readdirSync(path.join(ARTIFACTS, "proxy-logs"))).toContain("desktop.jsonl");
  });
});
