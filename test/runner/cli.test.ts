// The lifecycle commands as a user runs them (bin/multienv.js as a real process): --help everywhere, argument
// errors, one-line failures naming the stack and what to do, the missing Pulumi CLI, and `collect --from-env`
// exactly as the capture collector's delete step runs it.
import { execFile } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import * as collectCommand from "../../src/runner/commands/collect";
import * as downCommand from "../../src/runner/commands/down";
import * as signInCommand from "../../src/runner/commands/sign-in";
import * as upCommand from "../../src/runner/commands/up";
import { captureCollectorCommands, captureCollectorEnvironment, COLLECTOR_ENV } from "../../src/plan/collector";
import { cleanup, ROOT, tempDir } from "../helpers/processes";
import { helpOf, CLI, pcapBytes, sha256, startTestGateway, writeCaptures } from "./helpers";
import { startChromium } from "../helpers/chromium";
import { TOKEN } from "../gateway/helpers";
import { until } from "../helpers/until";

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** PATH with node but without any `pulumi`: this machine has none, and the test must not depend on that. */
const PATH_WITHOUT_PULUMI = [dirname(process.execPath), "/usr/bin", "/bin"].join(":");
/** A machine cache with no toolchain built in it, so the runner finds no `pulumi` there either. */
const CACHE_WITHOUT_PULUMI = mkdtempSync(join(tmpdir(), "multienv-cache-"));

function run(args: string[], env: NodeJS.ProcessEnv = {}, file = process.execPath, fileArgs = [CLI]): Promise<Run> {
  return new Promise((resolve) => {
    execFile(
      file,
      [...fileArgs, ...args],
      {
        cwd: ROOT,
        env: definedOnly({ ...process.env, PATH: PATH_WITHOUT_PULUMI, MULTIENV_CACHE: CACHE_WITHOUT_PULUMI, ...env }),
        timeout: 50_000,
      },
      (error, stdout, stderr) => {
        resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, stdout, stderr });
      },
    );
  });
}

/** `env` without the variables set to undefined (which a child would see as the string "undefined"). */
function definedOnly(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(env).filter(([, value]) => value !== undefined));
}

/** The smallest stack `multienv check` passes: one computer on no network. */
const VALID_STACK = "config:\n  multienv:computers:\n    agent:\n      network: none\n";

/**
 * A project directory with a Pulumi.yaml and stack files (name -> YAML; by default a valid `demo`), and in its file
 * backend (.multienv/state) a checkpoint for each of `deployed` holding one container, so a command gets as far as
 * the Pulumi CLI.
 */
function project(stacks: Record<string, string> = { demo: VALID_STACK }, deployed: string[] = []): string {
  const dir = tempDir("runner-project-");
  writeFileSync(join(dir, "Pulumi.yaml"), "name: multienv\nruntime: nodejs\nstackConfigDir: stacks\n");
  mkdirSync(join(dir, "stacks"));
  for (const [name, yaml] of Object.entries(stacks)) writeFileSync(join(dir, "stacks", `Pulumi.${name}.yaml`), yaml);
  const state = join(dir, ".multienv", "state", ".pulumi", "stacks", "multienv");
  mkdirSync(state, { recursive: true });
  for (const name of deployed) {
    const container = {
      urn: `urn:pulumi:${name}::multienv::docker:index/container:Container::c`,
      type: "docker:index/container:Container",
    };
    const checkpoint = {
      version: 3,
      checkpoint: { stack: name, latest: { manifest: { time: "2026-01-02T03:04:05Z" }, resources: [container] } },
    };
    writeFileSync(join(state, `${name}.json`), JSON.stringify(checkpoint));
  }
  return dir;
}

afterAll(cleanup);
// Each case starts the CLI as a process (a second or two of module loading each, more on a busy machine).
vi.setConfig({ testTimeout: 120_000 });

describe("--help", () => {
  it("lists the lifecycle commands (bin/multienv.js), and each has its own help", async () => {
    const top = await run(["--help"]);
    expect(top.code).toBe(0);
    for (const name of ["up", "collect", "sign-in", "down"])
      expect(top.stdout).toMatch(new RegExp(`^\\s+${name} `, "m"));

    const up = await helpOf("up", upCommand);
    expect(up).toContain("Usage: multienv up [options] <stack>");
    expect(up).toContain("--show-secrets");
    const collect = await helpOf("collect", collectCommand);
    expect(collect).toContain("--fail-on-capture-error");
    expect(collect).toContain("--from-env");
    expect(await helpOf("sign-in", signInCommand)).toMatch(
      /--site <site>[\s\S]*--computer <computer>[\s\S]*--sign-out/,
    );
    expect(await helpOf("down", downCommand)).toContain("--fail-on-capture-error");
  });
});

describe("--help without Pulumi's SDK", () => {
  // What keeps `--help` fast is that nothing on the CLI's path loads @pulumi/* until a command's action needs it.
  // This fails when a module the CLI loads for every command imports @pulumi/* at its top.
  it("loads no @pulumi module for the command list or any command's help", async () => {
    const dir = tempDir("help-modules-");
    const helps = [["--help"], ["help"], ["check", "--help"], ["up", "--help"], ["status", "-h"], ["down", "--help"]];
    const loaded = await Promise.all(
      helps.map(async (args, i) => {
        const report = join(dir, `modules-${i}.txt`);
        const r = await run(args, { REPORT_LOADED_MODULES: report }, process.execPath, [
          "--require",
          join(ROOT, "test", "helpers", "report-loaded-modules.cjs"),
          CLI,
        ]);
        expect(r.stdout + r.stderr).toMatch(/Usage: multienv/);
        return readFileSync(report, "utf8").split("\n");
      }),
    );
    for (const modules of loaded) {
      // The report is real: the CLI's own modules are in it.
      expect(modules.some((m) => m.endsWith(join("src", "runner", "cli.ts")))).toBe(true);
      expect(modules.filter((m) => m.includes("/@pulumi/"))).toEqual([]);
    }
  });
});

describe("argument errors", () => {
  it("names the missing argument or option", async () => {
    const [up, signIn, collect] = await Promise.all([
      run(["up"]),
      run(["sign-in", "demo", "--site", "github"]),
      run(["collect"]),
    ]);
    expect(up.code).toBe(1);
    expect(up.stderr).toContain("error: missing required argument 'stack'");
    expect(signIn.code).toBe(1);
    expect(signIn.stderr).toContain("error: required option '--computer <computer>' not specified");
    expect(collect.code).toBe(1);
    expect(collect.stderr).toBe(
      "multienv collect: name the stack to collect (`multienv collect <stack>`), or pass --from-env\n",
    );
  });

  it("refuses a stack with no stack file in one line (a bad stack name: lifecycle.test.ts)", async () => {
    const missing = await run(["up", "nosuch", "--project-dir", project()]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toBe(
      "multienv up: stack nosuch: there is no stacks/Pulumi.nosuch.yaml; write one (see the examples in stacks/) or deploy from a spec object\n",
    );
  });

  it("says in one line that the Pulumi CLI is missing and how to install it", async () => {
    const dir = project({ demo: VALID_STACK }, ["demo"]);
    const results = await Promise.all([
      run(["up", "demo", "--project-dir", dir]),
      run(["down", "demo", "--project-dir", dir]),
    ]);
    for (const r of results) {
      expect(r.code).toBe(1);
      expect(r.stderr.split("\n")).toHaveLength(2); // one line and its newline
      expect(r.stderr).toMatch(
        /^multienv [a-z-]+: stack demo: .* needs the Pulumi CLI, which is not installed; install it with `curl -fsSL https:\/\/get\.pulumi\.com \| sh`/,
      );
    }
    expect(results[0].stderr).toContain("multienv up: stack demo: deploying needs the Pulumi CLI");
    expect(results[1].stderr).toContain("multienv down: stack demo: destroying needs the Pulumi CLI");
  });
});

describe("the checks every command on a stack runs before Pulumi", () => {
  const NO_PASSPHRASE = { PULUMI_CONFIG_PASSPHRASE: undefined, PULUMI_CONFIG_PASSPHRASE_FILE: undefined };
  /** Runs each in turn: nine CLI processes at once can take a busy 2-core machine past a process's timeout. */
  async function inTurn(commands: string[][], env: NodeJS.ProcessEnv = {}): Promise<Run[]> {
    const runs: Run[] = [];
    for (const args of commands) runs.push(await run(args, env));
    return runs;
  }
  const ON_A_STACK = [
    ["status"],
    ["outputs"],
    ["reset"],
    ["collect"],
    ["screenshot"],
    ["watch"],
    ["takeover", "--computer", "agent"],
    ["sign-in", "--site", "shop", "--computer", "agent"],
    ["down"],
  ];

  it("up names a YAML error by file and line, not the missing Pulumi CLI; every other command refuses it too", async () => {
    const dir = project({ bad: "config:\n  multienv:computers:\n    agent: {network: none\n" });
    const [up, ...others] = await inTurn(
      [["up"], ...ON_A_STACK].map(([command, ...rest]) => [command, "bad", ...rest, "--project-dir", dir]),
    );
    expect(up.code).toBe(1);
    expect(up.stderr).not.toContain("Pulumi CLI");
    expect(up.stderr.split("\n")[0]).toBe(
      "multienv up: stack bad: stacks/Pulumi.bad.yaml has 1 problem; fix it and run `multienv up bad` again (`multienv check bad` checks without deploying)",
    );
    expect(up.stderr.split("\n")[1]).toMatch(
      /^ {2}multienv: \S+\/stacks\/Pulumi\.bad\.yaml line \d+: not valid YAML: /,
    );
    for (const r of others) {
      expect(r.code).toBe(1);
      expect(r.stderr).not.toContain("Pulumi CLI");
      expect(r.stderr).toMatch(
        /^multienv [a-z-]+: stack bad: stacks\/Pulumi\.bad\.yaml is not a stack file Pulumi can read; fix it first\n {2}multienv: \S+ line \d+: not valid YAML/,
      );
    }
  });

  it("up refuses a config problem with its line, before the Pulumi CLI is looked for", async () => {
    const dir = project({ typo: "config:\n  multienv:computers:\n    agent:\n      network: none\n      imag: x\n" });
    const up = await run(["up", "typo", "--project-dir", dir]);
    expect(up.code).toBe(1);
    expect(up.stderr).toBe(
      "multienv up: stack typo: stacks/Pulumi.typo.yaml has 1 problem; fix it and run `multienv up typo` again (`multienv check typo` checks without deploying)\n" +
        "  multienv:computers.agent.imag: unknown key; did you mean image?\n",
    );
  });

  it("a stack never deployed gets one line, with the `multienv up` that deploys it, and no passphrase asked", async () => {
    const dir = project();
    const runs = await inTurn(
      ON_A_STACK.map(([command, ...rest]) => [command, "demo", ...rest, "--project-dir", dir]),
      NO_PASSPHRASE,
    );
    for (const [i, r] of runs.entries()) {
      const command = ON_A_STACK[i][0];
      expect(r.code).toBe(1);
      const so = command === "down" ? ", so there is nothing to destroy" : "";
      expect(r.stderr).toBe(
        `multienv ${command}: stack demo is not deployed${so}; deploy it with \`multienv up demo\`\n`,
      );
    }
    // Without a stack file, the line says to write one first.
    const none = await run(["status", "nosuch", "--project-dir", dir], NO_PASSPHRASE);
    expect(none.stderr).toBe(
      "multienv status: stack nosuch is not deployed; there is no stacks/Pulumi.nosuch.yaml to deploy it from: write one (see the examples in stacks/), then run `multienv up nosuch`\n",
    );
  });

  it("a config problem of a stack already deployed is a warning: the command acts on the env as deployed", async () => {
    const dir = project({ typo: "config:\n  multienv:computers:\n    agent:\n      network: none\n      imag: x\n" });
    const status = await run(["status", "typo", "--project-dir", dir], NO_PASSPHRASE);
    expect(status.stderr).toBe(
      "warning: stack typo: stacks/Pulumi.typo.yaml has 1 problem, which `multienv check typo` lists; the next `multienv up typo` refuses it\n" +
        "multienv status: stack typo is not deployed; deploy it with `multienv up typo`\n",
    );
  });
});

describe("collect --from-env (the capture collector's delete step)", () => {
  let gatewayUrl: string;
  let stopGateway: () => Promise<void>;
  const files = { "shop-server.pcap0": pcapBytes(9_000), "shop-frontend.pcap0": pcapBytes(500) };

  beforeAll(async () => {
    const capturesDir = tempDir("runner-captures-");
    writeCaptures(capturesDir, files);
    const gateway = await startTestGateway({ sites: { shop: { server: "http://127.0.0.1:9" } }, capturesDir });
    gatewayUrl = gateway.url;
    stopGateway = gateway.stop;
  });

  const environment = (artifactsDir: string) => ({
    ...captureCollectorEnvironment({
      stack: "task-5",
      gatewayUrl,
      controlToken: TOKEN,
      context: { computers: [], syntheticDomains: ["shop.test"], live: false, liveWebsites: [], captureTraffic: true },
    }),
    [COLLECTOR_ENV.artifactsDir]: artifactsDir,
  });

  it("runs the built delete command in the project directory and stores every capture", async () => {
    const artifactsDir = join(tempDir(), "task-5");
    const command = captureCollectorCommands().delete;
    const result = await run([], environment(artifactsDir), "/bin/sh", ["-c", command]);

    expect(result.code).toBe(0);
    // Progress goes to stderr, the summary to stdout; no warnings.
    expect(result.stderr).not.toContain("warning");
    expect(result.stderr).toContain("collected traffic/shop-server.pcap0 (9000 bytes, sha256 ");
    expect(result.stdout).toContain("captures: 2 downloaded, 0 already complete, 0 failed");
    expect(readdirSync(join(artifactsDir, "traffic")).sort()).toEqual(Object.keys(files).sort());
    const record = JSON.parse(readFileSync(join(artifactsDir, "run.json"), "utf8"));
    expect(record.captures.find((c: { name: string }) => c.name === "shop-server.pcap0").sha256).toBe(
      sha256(files["shop-server.pcap0"]),
    );
    expect(record).toMatchObject({ stack: "task-5", reproducible: true, captureTraffic: true });
  });

  it("closes the computers' browsers first, as teardown", async () => {
    const browser = await startChromium();
    const gateway = await startTestGateway({
      sites: { shop: { server: "http://127.0.0.1:9" } },
      computers: { agent: { cdp: browser.cdp } },
    });
    const env = captureCollectorEnvironment({
      stack: "task-6",
      gatewayUrl: gateway.url,
      controlToken: TOKEN,
      context: { computers: ["agent"], syntheticDomains: [], live: false, liveWebsites: [], captureTraffic: false },
    });
    const result = await run([], { ...env, [COLLECTOR_ENV.artifactsDir]: join(tempDir(), "task-6") }, "/bin/sh", [
      "-c",
      captureCollectorCommands().delete,
    ]);
    expect(result.code).toBe(0);
    await until("the browser to exit", () => browser.exited());
  });

  it("names a missing variable in one line", async () => {
    const result = await run(["collect", "--from-env"], { [COLLECTOR_ENV.stack]: "", [COLLECTOR_ENV.gatewayUrl]: "" });
    expect(result.code).toBe(1);
    expect(result.stderr).toBe(
      "multienv collect: collect --from-env: MULTIENV_STACK is not set; the capture collector's delete step sets it\n",
    );
  });

  it("warns but succeeds when the gateway is gone, and fails with --fail-on-capture-error (so pulumi destroy stops)", async () => {
    await stopGateway();
    const artifactsDir = join(tempDir(), "task-5");
    const lenient = await run([], environment(artifactsDir), "/bin/sh", ["-c", captureCollectorCommands().delete]);
    expect(lenient.code).toBe(0);
    expect(lenient.stderr).toMatch(
      /^warning: stack task-5: captures not collected: the gateway did not list them \(listing traffic captures: cannot reach the gateway \(ECONNREFUSED\)\)/,
    );

    const strict = await run([], environment(artifactsDir), "/bin/sh", [
      "-c",
      captureCollectorCommands({ failOnCaptureError: true }).delete,
    ]);
    expect(strict.code).toBe(1);
    expect(strict.stderr).toBe(
      "multienv collect: stack task-5: captures not collected: the gateway did not list them (listing traffic captures: cannot reach the gateway (ECONNREFUSED)); run `multienv collect task-5` again while the env is up\n",
    );
  });
});
