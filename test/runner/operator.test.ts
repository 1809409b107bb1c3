// The operator's commands, their pure parts: reading a file state backend's checkpoints, container verdicts, the
// status report's problems and summaries, the terminal forms, the next steps after `up`, the watch page's log lines,
// and the CLI's help and argument errors.
import { execFile } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Command } from "commander";
import { describe, expect, it } from "vitest";
import * as lsCommand from "../../src/runner/commands/ls";
import * as outputsCommand from "../../src/runner/commands/outputs";
import * as screenshotCommand from "../../src/runner/commands/screenshot";
import * as statusCommand from "../../src/runner/commands/status";
import * as watchCommand from "../../src/runner/commands/watch";
import { containerProblem, countContainers, isHealthy } from "../../src/runner/targets/env-runtime";
import { nextSteps } from "../../src/runner/lifecycle/next-steps";
import {
  listStacks,
  proxyLogSize,
  stateOutputs,
  statusProblems,
  summarizeSelfTest,
  type StackStatus,
} from "../../src/runner/operator/operator";
import { formatScreenshots, formatStackList, formatStatus, table } from "../../src/runner/operator/format";
import {
  fileBackendDir,
  holdsSecret,
  readStateStack,
  readStateStacks,
  targetOf,
} from "../../src/runner/stack/state-files";
import { LogFollower, watchLines } from "../../src/runner/operator/watch";
import { escapeHtml, watchPage } from "../../src/runner/operator/watch-page";
import { CLI, helpOf, projectWith, ROOT_STACK } from "./helpers";
import { ROOT, tempDir } from "../helpers/processes";

const SECRET = { "4dabf18193072939515e22adb298388d": "1b47061264138c4ac30d75fd1eb44270", ciphertext: "v1:abc" };

function container(name: string, labels: Record<string, string> = {}) {
  return {
    urn: `urn:pulumi:s::multienv::docker:index/container:Container::${name}`,
    id: name,
    type: "docker:index/container:Container",
    inputs: { name, labels: Object.entries(labels).map(([label, value]) => ({ label, value })) },
  };
}

describe("the file state backend", () => {
  it("lists every stack from its checkpoint, gzipped or not, with its outputs' secrets hidden", async () => {
    const options = projectWith({
      up: {
        target: "docker",
        resources: [
          ROOT_STACK({ gatewayUrl: "http://127.0.0.1:1", controlToken: SECRET, nested: { inner: [SECRET] } }),
          container("up-gateway"),
        ],
      },
      gone: { gzip: true, time: "2026-02-03T00:00:00Z", resources: [ROOT_STACK({})] },
      fresh: null,
    });
    const stacks = await readStateStacks(options);
    expect(stacks.map((s) => s.name)).toEqual(["fresh", "gone", "up"]);
    expect(stacks[0]).toEqual({ name: "fresh", lastUpdated: undefined, resources: [], outputs: {} });
    expect(stacks[1].lastUpdated).toBe("2026-02-03T00:00:00Z");
    expect(stacks[2].outputs).toEqual({
      controlToken: "[secret]",
      gatewayUrl: "http://127.0.0.1:1",
      nested: "[secret]",
    });
    expect(await stateOutputs("up", options)).toEqual(stacks[2].outputs);
  });

  it("says in one line that a stack is not deployed and how to deploy it, whether the state has it or not", async () => {
    const options = projectWith({ gone: { resources: [ROOT_STACK({})] } });
    await expect(readStateStack("nosuch", { ...options, deployed: true })).rejects.toThrow(
      /^stack nosuch is not deployed; deploy it with `multienv up nosuch`$/,
    );
    await expect(readStateStack("gone", { ...options, deployed: true })).rejects.toThrow(
      /^stack gone is not deployed; deploy it with `multienv up gone`$/,
    );
    await expect(readStateStack("gone", options)).resolves.toMatchObject({ name: "gone" });
  });

  it("an empty or missing backend has no stacks; another kind of backend is refused in one line", async () => {
    const { projectDir } = projectWith({});
    expect(await readStateStacks({ projectDir, env: { PULUMI_BACKEND_URL: `file://${tempDir()}` } })).toEqual([]);
    await expect(readStateStacks({ projectDir, env: { PULUMI_BACKEND_URL: "s3://bucket" } })).rejects.toThrow(
      /^the state backend s3:\/\/bucket is not a file backend; /,
    );
    expect(fileBackendDir("file:///var/state")).toBe("/var/state");
    expect(fileBackendDir("https://api.pulumi.com")).toBeUndefined();
  });

  it("reads a stack's target from its stack file, docker when it names none", () => {
    const { projectDir } = projectWith({ a: { target: "ec2" } });
    writeFileSync(join(projectDir, "stacks", "Pulumi.b.yaml"), "config: {}\n");
    expect(targetOf("a", projectDir)).toBe("ec2");
    expect(targetOf("b", projectDir)).toBe("docker");
    expect(targetOf("c", projectDir)).toBeUndefined();
  });

  it("finds secrets at any depth", () => {
    expect(holdsSecret(SECRET)).toBe(true);
    expect(holdsSecret({ a: [1, { b: SECRET }] })).toBe(true);
    expect(holdsSecret({ a: [1, { b: "x" }], c: null })).toBe(false);
  });

  it("ls: a stack with no container is counted 0/0 without asking an engine; episodes from run.json; its leased accounts", async () => {
    const accounts = { github: { pool: "github-accounts", account: "alex" } };
    const options = projectWith({ gone: { target: "hosts", resources: [ROOT_STACK({ accounts })] }, fresh: null });
    const artifacts = join(options.projectDir, "artifacts", "gone");
    mkdirSync(artifacts, { recursive: true });
    writeFileSync(join(artifacts, "run.json"), JSON.stringify({ stack: "gone", episode: 3 }));
    expect(await listStacks(options)).toEqual({
      stacks: [
        {
          stack: "fresh",
          target: null,
          deployed: false,
          lastUpdated: null,
          containers: { total: 0, running: 0, healthy: 0 },
          episodes: 0,
          accounts: {},
          live: null,
          reproducible: null,
          liveReasons: [],
          persons: null,
        },
        {
          stack: "gone",
          target: "hosts",
          deployed: false,
          lastUpdated: "2026-01-02T03:04:05Z",
          containers: { total: 0, running: 0, healthy: 0 },
          episodes: 3,
          accounts,
          live: null,
          reproducible: null,
          liveReasons: [],
          persons: null,
        },
      ],
    });
  });

  it("ls: whether each deployed env is reproducible and, when it is live, why: its live sites and the computers reaching the public web", async () => {
    const open = {
      computer: "open",
      reach: "allow-all",
      why: "computer open reaches the public web (network: allow-all)",
    };
    const github = { name: "github", domains: ["github.com"], allowHosts: [], reproducible: false };
    const options = projectWith({
      web: {
        resources: [
          ROOT_STACK({ gatewayUrl: "http://127.0.0.1:1", live: true, reproducible: false, liveReasons: [open] }),
        ],
      },
      shop: {
        resources: [ROOT_STACK({ gatewayUrl: "http://127.0.0.1:2", live: false, reproducible: true, liveReasons: [] })],
      },
      // Deployed before its outputs named their reasons: its live sites are them.
      older: {
        resources: [
          ROOT_STACK({ gatewayUrl: "http://127.0.0.1:3", live: true, reproducible: false, liveWebsites: [github] }),
        ],
      },
    });
    const { stacks } = await listStacks(options);
    expect(stacks.map((s) => [s.stack, s.live, s.reproducible, s.liveReasons])).toEqual([
      [
        "older",
        true,
        false,
        [{ website: "github", domains: ["github.com"], why: "live website github (github.com) is served live" }],
      ],
      ["shop", false, true, []],
      ["web", true, false, [open]],
    ]);
  });
});

describe("container verdicts", () => {
  it("counts running, and healthy by the healthcheck when there is one", () => {
    const states = [
      { state: "running", health: "healthy" },
      { state: "running" },
      { state: "running", health: "starting" },
      { state: "exited" },
      { state: "missing" },
    ];
    expect(states.map(isHealthy)).toEqual([true, true, false, false, false]);
    expect(countContainers(states)).toEqual({ total: 5, running: 3, healthy: 2 });
  });

  it("names what is wrong", () => {
    const base = { name: "c", engine: "local" };
    expect(containerProblem({ ...base, state: "running" })).toBeUndefined();
    expect(containerProblem({ ...base, state: "exited" })).toBe("exited");
    expect(containerProblem({ ...base, state: "running", health: "unhealthy" })).toBe("running but unhealthy");
    expect(containerProblem({ ...base, state: "missing" })).toBe("not on its engine (local)");
    expect(containerProblem({ ...base, engine: "ssh://a@h", state: "unknown", error: "ssh exited 255" })).toBe(
      "its engine (ssh://a@h) did not answer: ssh exited 255",
    );
  });
});

const HEALTHY: StackStatus = {
  stack: "demo",
  healthy: true,
  problems: [],
  containers: [
    { name: "demo-gateway", role: "gateway", engine: "local", state: "running", health: "healthy" },
    { name: "demo-desktop-browser", role: "browser", computer: "desktop", engine: "local", state: "running" },
  ],
  gateway: { url: "http://127.0.0.1:5000", healthz: { ok: true, status: 200 } },
  computers: { desktop: { tabs: [{ url: "https://shop.test/", title: "Synthetic shop" }] } },
  selfTest: { passed: true, finishedAt: "2026-01-02T03:04:05Z", failed: [] },
  evidence: {
    captureTraffic: true,
    captures: { count: 2, bytes: 3000, files: [] },
    proxyLogs: { desktop: { bytes: 900, lines: 4, requests: 2, refused: 1 } },
  },
};

describe("status", () => {
  it("finds no problem in a healthy env", () => {
    expect(statusProblems(HEALTHY)).toEqual([]);
  });

  it("names each part that is not healthy, one line each", () => {
    const broken: StackStatus = {
      ...HEALTHY,
      containers: [{ name: "demo-shop-frontend", engine: "local", state: "exited" }],
      gateway: {
        url: "http://127.0.0.1:5000",
        healthz: { ok: false, status: 503, missing: [{ what: "ready", site: "shop", detail: "/ready answered 500" }] },
      },
      computers: { desktop: { tabs: [], error: "connect ECONNREFUSED" } },
      selfTest: { passed: false, finishedAt: "t", failed: ["computer desktop: x (u): y"] },
      evidence: {
        captureTraffic: true,
        captures: { error: "HTTP 500" },
        proxyLogs: { desktop: { error: "HTTP 502" } },
      },
    };
    expect(statusProblems(broken)).toEqual([
      "container demo-shop-frontend: exited",
      "gateway http://127.0.0.1:5000: /healthz does not answer ready (HTTP 503; shop /ready answered 500)",
      "computer desktop: DevTools did not answer (connect ECONNREFUSED)",
      "self-test failed: computer desktop: x (u): y",
      "captures: the listing failed (HTTP 500)",
      "computer desktop's proxy log: HTTP 502",
    ]);
    const unreachable = { ...HEALTHY, gateway: { url: "u", healthz: { ok: false, error: "cannot reach" } } };
    expect(statusProblems(unreachable)).toEqual(["gateway u: /healthz does not answer ready (cannot reach)"]);
  });

  it("judges a container whose health check has not run yet as the deploy did: by the gateway's /healthz", () => {
    const starting: StackStatus = {
      ...HEALTHY,
      containers: [{ name: "demo-shop-server", engine: "local", state: "running", health: "starting" }],
    };
    expect(statusProblems(starting)).toEqual([]);
    const notReady: StackStatus = {
      ...starting,
      gateway: {
        url: "u",
        healthz: { ok: false, status: 503, missing: [{ what: "ready", site: "shop", detail: "x" }] },
      },
    };
    expect(statusProblems(notReady)).toEqual([
      "container demo-shop-server: running but starting",
      "gateway u: /healthz does not answer ready (HTTP 503; shop x)",
    ]);
  });

  it("reduces the self-test to its failed checks", () => {
    expect(summarizeSelfTest({ skipped: true })).toEqual({ skipped: true });
    const check = (ok: boolean, check: string) => ({ check, url: `https://${check}/`, ok, detail: ok ? "200" : "403" });
    expect(
      summarizeSelfTest({
        passed: false,
        finishedAt: "t",
        seconds: 1,
        computers: { a: [check(true, "one"), check(false, "two")] },
        startTabs: { a: [check(false, "tab")] },
      }),
    ).toEqual({
      passed: false,
      finishedAt: "t",
      failed: ["computer a: two (https://two/): 403", "computer a: tab (https://tab/): 403"],
    });
  });

  it("sizes a proxy log by bytes, lines, requests and refusals, a torn last line left out", () => {
    const log = [
      { event: "startup", time: "t" },
      { event: "request", time: "t", method: "GET", host: "shop.test", port: 443, status: 200 },
      { event: "refused", time: "t", method: "CONNECT", host: "evil.test", port: 443, why: "not reached" },
    ]
      .map((r) => JSON.stringify(r))
      .join("\n");
    const text = `${log}\n{"event":"requ`;
    expect(proxyLogSize(text)).toEqual({ bytes: Buffer.byteLength(text), lines: 3, requests: 1, refused: 1 });
  });
});

describe("terminal forms", () => {
  it("lays out columns", () => {
    expect(
      table([
        ["a", "bb", "c"],
        ["ccc", "d", "e"],
      ]),
    ).toEqual(["a    bb  c", "ccc  d   e"]);
  });

  it("ls: a table, or how to deploy a first stack", () => {
    expect(formatStackList({ stacks: [] })).toBe("no stacks in the state; `multienv up <stack>` deploys one");
    const text = formatStackList({
      stacks: [
        {
          stack: "demo",
          target: "docker",
          deployed: true,
          lastUpdated: "2026-01-02T03:04:05.123456789Z",
          containers: { total: 15, running: 15, healthy: 14 },
          episodes: 2,
          accounts: { github: { pool: "github-accounts", account: "alex" } },
          live: true,
          reproducible: false,
          liveReasons: [
            { website: "github", domains: ["github.com"], why: "live website github (github.com) is served live" },
            { computer: "open", reach: "allow-all", why: "computer open reaches the public web (network: allow-all)" },
          ],
          persons: {
            desktop: { request: { id: "1", reason: "a CAPTCHA", since: "t", deadline: "u" } },
            open: { taken: { operator: "olivia", since: "t" } },
          },
        },
        {
          stack: "quiet",
          target: "docker",
          deployed: true,
          lastUpdated: "2026-01-02T03:04:05Z",
          containers: { total: 5, running: 5, healthy: 5 },
          episodes: 1,
          accounts: {},
          live: false,
          reproducible: true,
          liveReasons: [],
          // Its gateway did not answer.
          persons: null,
        },
        {
          stack: "old",
          target: null,
          deployed: false,
          lastUpdated: null,
          containers: { total: 0, running: 0, healthy: 0 },
          episodes: 0,
          accounts: {},
          live: null,
          reproducible: null,
          liveReasons: [],
          persons: null,
        },
      ],
    });
    expect(text.split("\n")).toEqual([
      "STACK  TARGET  DEPLOYED  LAST UPDATED          RUNNING  HEALTHY  EPISODES  REPRODUCIBLE  PERSON                           ACCOUNTS",
      "demo   docker  yes       2026-01-02T03:04:05Z  15/15    14/15    2         no            desktop:asks,open:taken(olivia)  github-accounts/alex",
      "quiet  docker  yes       2026-01-02T03:04:05Z  5/5      5/5      1         yes           ?                                -",
      "old    ?       no        never                 0/0      0/0      0         -             -                                -",
      "",
      "demo is live, not reproducible: live website github (github.com) is served live; computer open reaches the public web (network: allow-all)",
    ]);
  });

  it("status: each part, then what is not healthy", () => {
    const text = formatStatus(HEALTHY);
    expect(text).toContain("stack demo: healthy");
    expect(text).toContain("gateway: http://127.0.0.1:5000 /healthz ready (HTTP 200)");
    expect(text).toContain('    https://shop.test/  "Synthetic shop"');
    expect(text).toContain("self-test: passed");
    expect(text).toContain("  captures: 2 files, 2.9 KiB");
    expect(text).toContain("  desktop's proxy log: 900 B, 4 lines (2 requests, 1 refused)");
    expect(text).not.toContain("not healthy");
    const broken = formatStatus({ ...HEALTHY, healthy: false, problems: ["container x: exited"] });
    expect(broken).toMatch(/^stack demo: NOT healthy/);
    expect(broken).toMatch(/not healthy:\n {2}container x: exited$/);
  });

  it("status: who holds a computer, and its agent's request for a person, its reason kept on its line", () => {
    const text = formatStatus({
      ...HEALTHY,
      computers: {
        desktop: {
          ...HEALTHY.computers.desktop,
          takeover: {
            taken: { operator: "olivia", since: "2026-01-02T03:04:05.000Z" },
            request: {
              id: "1",
              reason: "a CAPTCHA\nstack demo: healthy",
              since: "2026-01-02T03:04:00.000Z",
              deadline: "2026-01-02T03:09:00.000Z",
            },
          },
        },
      },
    });
    const lines = text.split("\n");
    expect(lines).toContain("    taken over by olivia since 2026-01-02T03:04:05.000Z");
    // The agent's reason is its own text: a line break in it cannot forge a line of the report.
    expect(lines.filter((l) => l.startsWith("stack demo: healthy"))).toHaveLength(1);
    expect(lines.find((l) => l.includes("asks for a person"))).toMatch(
      /^ {4}its agent asks for a person until 2026-01-02T03:09:00.000Z: a CAPTCHA.+stack demo: healthy$/,
    );
  });

  it("screenshot: a line per file", () => {
    expect(
      formatScreenshots([
        { computer: "desktop", file: "/a/desktop.png", bytes: 1234, url: "https://shop.test/", title: "" },
      ]),
    ).toBe("/a/desktop.png (1234 bytes): computer desktop at https://shop.test/");
  });
});

describe("the next steps after up", () => {
  it("names the DevTools URL, how an agent connects with its computer's agent token (never the control token), and the commands", () => {
    const lines = nextSteps("demo", {
      computers: {
        desktop: {
          cdpUrl: "http://127.0.0.1:5000/computers/desktop/cdp",
          network: "allow-all",
          reaching: "allow-all",
          siteTable: {},
          startTabs: [],
        },
      },
    });
    expect(lines[0]).toBe("Next steps:");
    expect(lines).toContain("  computer desktop's DevTools: http://127.0.0.1:5000/computers/desktop/cdp");
    expect(lines).toContain(
      '  an agent connects with Playwright: chromium.connectOverCDP("http://127.0.0.1:5000/computers/desktop/cdp", { headers: { Authorization: "Bearer <agent token>" } })',
    );
    expect(lines).toContain(
      "  its agent token (agentTokens.desktop, which opens that computer's DevTools alone): multienv outputs demo --show-secrets",
    );
    expect(lines.join("\n")).not.toContain("controlToken");
    for (const command of ["outputs", "screenshot", "watch", "reset", "down"])
      expect(lines.some((l) => l.startsWith(`  multienv ${command} demo `))).toBe(true);
    expect(lines.length).toBeLessThanOrEqual(10);
  });

  it("leaves the agent's lines out for an env without computers", () => {
    const lines = nextSteps("bare", { computers: {} });
    expect(lines.join("\n")).not.toContain("connectOverCDP");
    expect(lines).toHaveLength(6);
  });
});

describe("the watch page's log lines", () => {
  it("keeps the request and refusal lines, as the page shows them", () => {
    const text = [
      { event: "startup", time: "t0" },
      { event: "request", time: "t1", method: "GET", host: "shop.test", port: 443, status: 200, site: "shop" },
      { event: "connection", time: "t2", host: "shop.test", port: 443 },
      { event: "refused", time: "t3", method: "CONNECT", host: "evil.test", port: 443, why: "not on its reaching" },
    ]
      .map((r) => JSON.stringify(r))
      .join("\n");
    expect(watchLines(text)).toEqual([
      { time: "t1", event: "request", method: "GET", host: "shop.test", port: 443, status: 200 },
      { time: "t3", event: "refused", method: "CONNECT", host: "evil.test", port: 443, why: "not on its reaching" },
    ]);
  });

  it("follows a growing log by what was appended, line by line, and a log started over from its start", () => {
    const piece = (start: number, text: string, size: number) => ({ start, bytes: Buffer.from(text), size });
    const follower = new LogFollower(4);
    // The first read is the log's tail.
    expect(follower.part()).toEqual({ last: 4 });
    expect(follower.next(piece(0, "a\nb", 3))).toBe("a\n");
    expect(follower.part()).toEqual({ from: 2 });
    expect(follower.next(piece(2, "b", 3))).toBe("");
    expect(follower.next(piece(2, "b\nc\n", 6))).toBe("b\nc\n");
    expect(follower.part()).toEqual({ from: 6 });
    // Smaller than what was read of it (416 with its size): read again from its start.
    expect(follower.next({ start: 6, bytes: Buffer.alloc(0), size: 2 })).toBe("");
    expect(follower.part()).toEqual({ from: 0 });
    expect(follower.next(piece(0, "x\n", 2))).toBe("x\n");
    // A proxy that ignores Range answers the whole log: only what is new in it is given.
    expect(follower.next(piece(0, "x\ny\n", 4))).toBe("y\n");
    // A tail inside the log: its torn first line is left out.
    const late = new LogFollower(6);
    expect(late.next(piece(10, "rn\nd\ne", 16))).toBe("d\n");
    expect(late.part()).toEqual({ from: 15 });
  });

  it("writes the computers' names as text", () => {
    expect(escapeHtml(`<a href="x">'&`)).toBe("&lt;a href=&quot;x&quot;&gt;&#39;&amp;");
    const page = watchPage("demo", ["desktop", "open"]);
    expect(page).toContain('<section data-computer="desktop">');
    expect(page).toContain('<section data-computer="open">');
    expect(page).not.toContain("innerHTML");
  });
});

/** A subcommand's argument error, as commander reports it. */
async function errorOf(args: string[], module: { register(program: Command): void }): Promise<string> {
  let out = "";
  const program = new Command("multienv")
    .exitOverride()
    .configureOutput({ writeOut: (text) => (out += text), writeErr: (text) => (out += text) });
  module.register(program);
  await program.parseAsync(["node", "multienv", ...args]).catch(() => undefined);
  return out;
}

describe("the CLI", () => {
  it("has help for each command", async () => {
    expect(await helpOf("ls", lsCommand)).toMatch(/Usage: multienv ls \[options\][\s\S]*--json[\s\S]*--project-dir/);
    expect(await helpOf("status", statusCommand)).toMatch(/Usage: multienv status \[options\] <stack>[\s\S]*--json/);
    expect(await helpOf("outputs", outputsCommand)).toMatch(/--show-secrets[\s\S]*--json/);
    expect(await helpOf("screenshot", screenshotCommand)).toMatch(/--computer <computer>[\s\S]*--out <dir>/);
    expect(await helpOf("watch", watchCommand)).toMatch(/127\.0\.0\.1[\s\S]*--port <port>/);
  });

  it("refuses a bad --port of watch in one line, before reading any state", async () => {
    const run = await new Promise<{ code: number; stderr: string }>((resolve) =>
      execFile(process.execPath, [CLI, "watch", "demo", "--port", "70000"], { cwd: ROOT }, (error, _stdout, stderr) =>
        resolve({ code: error ? Number((error as { code?: number }).code ?? 1) : 0, stderr }),
      ),
    );
    expect(run).toEqual({
      code: 1,
      stderr: "multienv watch: --port 70000: give a port number from 0 to 65535 (0: a free one)\n",
    });
  });

  it("names a missing stack argument", async () => {
    for (const [name, module] of [
      ["status", statusCommand],
      ["outputs", outputsCommand],
      ["screenshot", screenshotCommand],
      ["watch", watchCommand],
    ] as const)
      expect(await errorOf([name], module)).toContain("error: missing required argument 'stack'");
    expect(await errorOf(["ls", "extra"], lsCommand)).toContain("error: too many arguments for 'ls'");
  });
});
