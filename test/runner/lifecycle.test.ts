// The runner's own rules around the Automation API: which backend and config a stack gets, how outputs are shown
// (secrets masked unless asked), how engine events become progress lines, and that operations on one stack
// queue while different stacks run at once. The Pulumi CLI itself is not needed (nor installed) here.
import type { EngineEvent, OutputMap } from "@pulumi/pulumi/automation";
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { collectCaptures, deployStack, destroyStack, signIn } from "../../src/runner";
import { explain, isPulumiMissing, RunnerError } from "../../src/runner/errors";
import {
  displayOutputs,
  formatDisplayed,
  readOutputs,
  SECRET_PLACEHOLDER,
  syntheticDomainsOf,
} from "../../src/runner/stack/outputs";
import { describeUrn, ProgressReporter, resourcesInDeployment, StepCounter } from "../../src/runner/stack/progress";
import { formatDeclaredResources, parseDeclaredResources } from "../../src/protocol/declared-resources";
import { withStackLock } from "../../src/runner/stack/lock";
import { backendUrlFor, configChanges, specConfigMap } from "../../src/runner/stack/workspace";
import { cleanup, tempDir } from "../helpers/processes";

afterAll(cleanup);

describe("workspace", () => {
  it("keeps state in a file backend under the project unless PULUMI_BACKEND_URL says otherwise", () => {
    expect(backendUrlFor("/work/p", {})).toBe("file:///work/p/.multienv/state");
    expect(backendUrlFor("/work/p", { PULUMI_BACKEND_URL: "s3://bucket/state" })).toBe("s3://bucket/state");
    expect(backendUrlFor("/work/p", { PULUMI_BACKEND_URL: "  " })).toBe("file:///work/p/.multienv/state");
  });

  it("writes a spec's config in the multienv namespace, objects as JSON, secrets flagged", () => {
    const map = specConfigMap({
      name: "task-1",
      config: {
        target: "docker",
        captureTraffic: true,
        websites: { shop: { domains: ["shop.test"] } },
        "aws:region": "eu-west-1",
        unset: undefined,
      },
      secrets: { githubToken: "ghp_x" },
    });
    expect(map).toEqual({
      "multienv:target": { value: "docker", secret: false },
      "multienv:captureTraffic": { value: "true", secret: false },
      "multienv:websites": { value: '{"shop":{"domains":["shop.test"]}}', secret: false },
      "aws:region": { value: "eu-west-1", secret: false },
      "multienv:githubToken": { value: "ghp_x", secret: true },
    });
  });

  it("reopening a stack writes only the config that changed, and removes what the spec no longer names", () => {
    const current = {
      "multienv:target": { value: "docker", secret: false },
      "multienv:captureTraffic": { value: "true", secret: false },
      "multienv:githubToken": { value: "ghp_x", secret: true },
      "multienv:old": { value: "1", secret: false },
    };
    expect(configChanges(current, current)).toEqual({ stale: [], changed: {} });
    const { stale, changed } = configChanges(current, {
      "multienv:target": { value: "docker", secret: false },
      "multienv:captureTraffic": { value: "false", secret: false },
      "multienv:githubToken": { value: "ghp_x", secret: false },
      "multienv:new": { value: "2", secret: false },
    });
    expect(stale).toEqual(["multienv:old"]);
    expect(changed).toEqual({
      "multienv:captureTraffic": { value: "false", secret: false },
      "multienv:githubToken": { value: "ghp_x", secret: false },
      "multienv:new": { value: "2", secret: false },
    });
  });
});

describe("per-stack lock", () => {
  it("runs operations on one stack one after another, and on different stacks at once", async () => {
    const events: string[] = [];
    const step = (key: string, label: string, ms: number) =>
      withStackLock(key, async () => {
        events.push(`start ${label}`);
        await new Promise((r) => setTimeout(r, ms));
        events.push(`end ${label}`);
      });
    await Promise.all([step("a", "a1", 40), step("a", "a2", 5), step("b", "b1", 10)]);
    expect(events.indexOf("end a1")).toBeLessThan(events.indexOf("start a2"));
    expect(events.indexOf("start b1")).toBeLessThan(events.indexOf("end a1"));
  });

  it("goes on with the next operation after one fails", async () => {
    const failed = withStackLock("c", async () => {
      throw new Error("boom");
    });
    const next = withStackLock("c", async () => "ran");
    await expect(failed).rejects.toThrow("boom");
    await expect(next).resolves.toBe("ran");
  });
});

const OUTPUTS: OutputMap = {
  gatewayUrl: { value: "http://127.0.0.1:49153", secret: false },
  controlToken: { value: "s3cr3t-token", secret: true },
  websites: {
    value: { shop: { live: false, domains: ["shop.test"] }, github: { live: true, domains: ["github.com"] } },
    secret: false,
  },
  computers: { value: { agent: { network: "allow-all" } }, secret: false },
  live: { value: true, secret: false },
  liveWebsites: {
    value: [{ name: "github", domains: ["github.com"], allowHosts: [], reproducible: false }],
    secret: false,
  },
  reproducible: { value: false, secret: false },
  captureTraffic: { value: true, secret: false },
};

describe("outputs", () => {
  it("masks secrets unless asked to show them", () => {
    const masked = displayOutputs(OUTPUTS);
    expect(masked.controlToken).toBe(SECRET_PLACEHOLDER);
    expect(JSON.stringify(masked)).not.toContain("s3cr3t-token");
    expect(formatDisplayed(masked)).not.toContain("s3cr3t-token");
    expect(displayOutputs(OUTPUTS, true).controlToken).toBe("s3cr3t-token");
  });

  it("reads what the runner relies on, without the token", () => {
    const outputs = readOutputs(OUTPUTS);
    expect(outputs).toMatchObject({
      gatewayUrl: "http://127.0.0.1:49153",
      live: true,
      reproducible: false,
      captureTraffic: true,
    });
    expect(JSON.stringify(outputs)).not.toContain("s3cr3t-token");
    expect(syntheticDomainsOf(outputs)).toEqual(["shop.test"]);
  });

  it("counts a replayed site's domains and allowed hosts as inside the env, a live site's not", () => {
    const websites = {
      shop: { live: false, domains: ["shop.test"], svcUrl: "" },
      github: { live: false, replayed: true, domains: ["github.com"], allowHosts: ["*.githubassets.com"], svcUrl: "" },
      docs: { live: true, domains: ["docs.example.org"], svcUrl: "" },
    };
    expect(syntheticDomainsOf({ websites })).toEqual(["shop.test", "github.com", "*.githubassets.com"]);
  });
});

function pre(urn: string, type: string, op = "create"): EngineEvent {
  return {
    sequence: 0,
    timestamp: 0,
    resourcePreEvent: { metadata: { op, urn, type, provider: "" } },
  } as unknown as EngineEvent;
}
function diagnostic(message: string, severity: "debug" | "info"): EngineEvent {
  return { sequence: 0, timestamp: 0, diagnosticEvent: { message, color: "never", severity } } as EngineEvent;
}
function done(urn: string, type: string, op = "create"): EngineEvent {
  return {
    sequence: 0,
    timestamp: 0,
    resOutputsEvent: { metadata: { op, urn, type, provider: "" } },
  } as unknown as EngineEvent;
}
function failed(urn: string, type: string): EngineEvent {
  return {
    sequence: 0,
    timestamp: 0,
    resOpFailedEvent: { metadata: { op: "create", urn, type, provider: "" }, status: 1, steps: 0 },
  } as unknown as EngineEvent;
}

const STACK_URN = "urn:pulumi:t::multienv::pulumi:pulumi:Stack::multienv-t";
const PROVIDER_URN = "urn:pulumi:t::multienv::pulumi:providers:docker::local";
const GATEWAY_URN = "urn:pulumi:t::multienv::multienv:index:MultiEnv$docker:index/container:Container::t-gateway";
const SERVER_URN =
  "urn:pulumi:t::multienv::multienv:index:MultiEnv$multienv:website:Website$docker:index/container:Container::t-shop-server";

describe("progress", () => {
  it("names a resource by its own type and name", () => {
    expect(describeUrn(SERVER_URN)).toBe("docker:index/container:Container t-shop-server");
  });

  it("counts a preview's resource steps, not the stack or providers", () => {
    const counter = new StepCounter();
    for (const e of [
      pre(STACK_URN, "pulumi:pulumi:Stack"),
      pre(PROVIDER_URN, "pulumi:providers:docker"),
      pre(GATEWAY_URN, "docker:index/container:Container"),
      pre(SERVER_URN, "docker:index/container:Container", "same"),
    ])
      counter.onEvent(e);
    expect(counter.total).toBe(2);
  });

  it("reports done/total as resources complete, naming the current one, and failures", () => {
    const lines: string[] = [];
    const progress = new ProgressReporter((l) => lines.push(l), 2);
    progress.onEvent(pre(STACK_URN, "pulumi:pulumi:Stack"));
    progress.onEvent(pre(SERVER_URN, "docker:index/container:Container"));
    progress.onEvent(done(SERVER_URN, "docker:index/container:Container"));
    progress.onEvent(pre(GATEWAY_URN, "docker:index/container:Container"));
    progress.onEvent(failed(GATEWAY_URN, "docker:index/container:Container"));
    expect(lines).toEqual([
      "[0/2] create docker:index/container:Container t-shop-server …",
      "[1/2] done: create docker:index/container:Container t-shop-server",
      "[1/2] create docker:index/container:Container t-gateway …",
      "[2/2] failed: create docker:index/container:Container t-gateway",
    ]);
  });

  it("counts a destroy's total from the stack's state", () => {
    const deployment = {
      version: 3,
      deployment: {
        resources: [
          { urn: STACK_URN, type: "pulumi:pulumi:Stack" },
          { urn: PROVIDER_URN, type: "pulumi:providers:docker" },
          { urn: GATEWAY_URN, type: "docker:index/container:Container" },
          { urn: SERVER_URN, type: "docker:index/container:Container" },
        ],
      },
    };
    expect(resourcesInDeployment(deployment)).toBe(2);
    expect(resourcesInDeployment({ deployment: {} })).toBe(0);
  });

  it("takes the total from the count the program declares, read off the event stream's debug diagnostics", () => {
    const lines: string[] = [];
    const progress = new ProgressReporter((l) => lines.push(l));
    // Another debug line, and the count's text at another severity (a resource could log it), change nothing.
    progress.onEvent(diagnostic("Registering resource: t=pulumi:pulumi:Stack", "debug"));
    progress.onEvent(diagnostic(formatDeclaredResources(9), "info"));
    progress.onEvent(pre(SERVER_URN, "docker:index/container:Container"));
    progress.onEvent(diagnostic(`${formatDeclaredResources(2)}\n`, "debug"));
    progress.onEvent(done(SERVER_URN, "docker:index/container:Container"));
    expect(lines).toEqual([
      "[0/?] create docker:index/container:Container t-shop-server …",
      "[1/2] done: create docker:index/container:Container t-shop-server",
    ]);
    expect(parseDeclaredResources("multienv: resources declared: x")).toBeUndefined();
  });

  it("takes the count only from the program's own line, tied to no resource, and only as a number", () => {
    const lines: string[] = [];
    const progress = new ProgressReporter((l) => lines.push(l));
    const fromResource = diagnostic(formatDeclaredResources(9), "debug");
    fromResource.diagnosticEvent!.urn = SERVER_URN;
    progress.onEvent(fromResource);
    for (const text of ["0x10", "1e2", " 3.5", "-1", "12345678901"])
      progress.onEvent(diagnostic(`multienv: resources declared: ${text}`, "debug"));
    progress.onEvent(pre(SERVER_URN, "docker:index/container:Container"));
    progress.onEvent(diagnostic(formatDeclaredResources(2), "debug"));
    progress.onEvent(done(SERVER_URN, "docker:index/container:Container"));
    expect(lines).toEqual([
      "[0/?] create docker:index/container:Container t-shop-server …",
      "[1/2] done: create docker:index/container:Container t-shop-server",
    ]);
  });

  it("adds the deletes of what the program no longer declares to the total it declared", () => {
    const lines: string[] = [];
    const progress = new ProgressReporter((l) => lines.push(l));
    progress.onEvent(diagnostic(formatDeclaredResources(1), "debug"));
    progress.onEvent(pre(GATEWAY_URN, "docker:index/container:Container", "update"));
    progress.onEvent(done(GATEWAY_URN, "docker:index/container:Container", "update"));
    progress.onEvent(pre(SERVER_URN, "docker:index/container:Container", "delete"));
    progress.onEvent(done(SERVER_URN, "docker:index/container:Container", "delete"));
    expect(lines).toEqual([
      "[0/1] update docker:index/container:Container t-gateway …",
      "[1/1] done: update docker:index/container:Container t-gateway",
      "[1/2] delete docker:index/container:Container t-shop-server …",
      "[2/2] done: delete docker:index/container:Container t-shop-server",
    ]);
  });

  it("shows an unknown total as ?", () => {
    const lines: string[] = [];
    const progress = new ProgressReporter((l) => lines.push(l));
    progress.onEvent(pre(SERVER_URN, "docker:index/container:Container", "delete"));
    progress.onEvent(done(SERVER_URN, "docker:index/container:Container", "delete"));
    expect(lines).toEqual([
      "[0/?] delete docker:index/container:Container t-shop-server …",
      "[1/?] done: delete docker:index/container:Container t-shop-server",
    ]);
  });
});

describe("errors", () => {
  it("recognises the Automation API's missing-CLI failure and says how to install it", () => {
    const error = new Error(
      "code: -2\n stdout: \n stderr: Command failed with ENOENT: pulumi version\nspawn pulumi ENOENT\n",
    );
    expect(isPulumiMissing(error)).toBe(true);
    expect(explain(error, "task-1", "deploying").message).toBe(
      "stack task-1: deploying needs the Pulumi CLI, which is not installed; install it with `curl -fsSL https://get.pulumi.com | sh` and make sure `pulumi` is on PATH, or build it with `bash scripts/pulumi-toolchain.sh`",
    );
  });

  it("keeps the telling line of a CLI transcript, and passes RunnerErrors through", () => {
    const error = new Error(
      "code: 255\n stdout: \n stderr: warning: something\nerror: failed to decrypt: incorrect passphrase\n err?: x",
    );
    expect(explain(error, "t", "reading outputs").message).toMatch(
      /^stack t: reading outputs needs the stack's secrets passphrase; set PULUMI_CONFIG_PASSPHRASE/,
    );
    const other = new Error("code: 255\n stdout: \n stderr: error: no Pulumi.yaml project file found\n");
    expect(explain(other, "t", "deploying").message).toBe(
      "stack t: deploying failed: no Pulumi.yaml project file found; `multienv check t` shows the stack's problems offline",
    );
    expect(explain(other, "t", "collecting").message).toBe(
      "stack t: collecting failed: no Pulumi.yaml project file found",
    );
    const mine = new RunnerError("already one line");
    expect(explain(mine, "t", "x")).toBe(mine);
  });
});

describe("the library without the Pulumi CLI", () => {
  it("fails each operation with one line saying how to install it", async () => {
    const projectDir = tempDir("runner-project-");
    writeFileSync(join(projectDir, "Pulumi.yaml"), "name: multienv\nruntime: nodejs\nstackConfigDir: stacks\n");
    mkdirSync(join(projectDir, "stacks"));
    writeFileSync(join(projectDir, "stacks", "Pulumi.demo.yaml"), "config: {}\n");
    const path = process.env.PATH;
    const cache = process.env.MULTIENV_CACHE;
    // No `pulumi` on this PATH nor in the machine's cache, whatever the machine has installed or built.
    process.env.PATH = [dirname(process.execPath), "/usr/bin", "/bin"].join(":");
    process.env.MULTIENV_CACHE = tempDir("runner-cache-");
    try {
      const install = "install it with `curl -fsSL https://get.pulumi.com | sh`";
      await expect(deployStack("demo", { projectDir })).rejects.toThrow(
        `stack demo: deploying needs the Pulumi CLI, which is not installed; ${install}`,
      );
      await expect(collectCaptures("demo", { projectDir })).rejects.toThrow(
        `stack demo: collecting needs the Pulumi CLI`,
      );
      await expect(signIn("demo", { projectDir, site: "github", computer: "agent" })).rejects.toThrow(
        "stack demo: signing computer agent in to github needs the Pulumi CLI",
      );
      await expect(destroyStack("demo", { projectDir })).rejects.toBeInstanceOf(RunnerError);
      // A spec object is refused the same way, before any of its config is written.
      await expect(deployStack({ name: "spec-1", config: { target: "docker" } }, { projectDir })).rejects.toThrow(
        "stack spec-1: deploying needs the Pulumi CLI",
      );
    } finally {
      process.env.PATH = path;
      if (cache === undefined) delete process.env.MULTIENV_CACHE;
      else process.env.MULTIENV_CACHE = cache;
    }
  });

  it("refuses a bad stack name before touching anything", async () => {
    await expect(deployStack({ name: "Bad_Name", config: {} })).rejects.toThrow(
      /a stack name must be lowercase letters/,
    );
  });
});

// The Automation API's own classification of the CLI's answers.
const { createCommandError } = require("@pulumi/pulumi/automation/errors") as {
  createCommandError(result: { stdout: string; stderr: string; code: number }): Error;
};

describe("a stack that was never deployed", () => {
  it("is an error for collect, sign-in and down, saying to deploy it first", () => {
    const error = createCommandError({ stdout: "", stderr: "error: no stack named 'task-3' found", code: 255 });
    expect(explain(error, "task-3", "collecting").message).toBe(
      "stack task-3: no such stack in the state backend; deploy it first with `multienv up task-3`",
    );
  });
});

describe("Pulumi's stack lock", () => {
  it("is named, with what to do, when another process holds it", () => {
    const error = createCommandError({
      stdout: "",
      stderr:
        "error: the stack is currently locked by 1 lock(s). Either wait for the other process(es) to end or delete the lock file with `pulumi cancel`.",
      code: 255,
    });
    expect(explain(error, "task-7", "deploying").message).toBe(
      "stack task-7: another update holds Pulumi's lock on this stack; wait for it to finish, or if that process died, run `pulumi cancel --stack task-7`",
    );
  });
});
