// The demo topology (stacks/Pulumi.demo.yaml) deployed by the runner with the real Pulumi engine on the local
// Docker engine, checked with a real browser through the gateway: the demo scenarios (demo/),
// one deploy serving them all.
import fs from "node:fs";
import path from "node:path";
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect } from "vitest";
import type { StackSpec } from "../../src/runner";
import { demoSuites } from "./demo/suites";
import { DEMO_STACK_FILE, deployEnv, e2eStack, specOf, type DeployedEnv } from "./helpers/env";

const STACK = e2eStack("e2e");
let env: DeployedEnv;
const browsers: Browser[] = [];

const ARTIFACTS = path.resolve(__dirname, "../../artifacts", STACK);

beforeAll(async () => {
  fs.rmSync(ARTIFACTS, { recursive: true, force: true });
  // The demo as it is, but for gist.github.com's server, whose card declares no reset operation (so a reset restarts
  // it).
  const spec = specOf(STACK);
  const websites = spec.config["multienv:websites"] as Record<string, { settings?: Record<string, unknown> }>;
  websites.gist.settings = { ...websites.gist.settings, declareReset: false };
  env = await deployEnv(STACK, { spec });
  demoSpec = spec;
}, 420_000);

afterAll(async () => {
  await Promise.all(browsers.map((b) => b.close().catch(() => undefined)));
  if (!env) return;
  await env.teardown();
  // Teardown leaves nothing of the stack on the engine.
  const filters = { label: [`multienv.stack=${STACK}`] };
  expect(await env.api.listContainers({ all: true, filters })).toEqual([]);
  expect(await env.api.listNetworks({ filters })).toEqual([]);
  // Before anything went, the capture collector's delete step stored every capture (as `pulumi destroy` would).
  const stored = fs.readdirSync(path.join(ARTIFACTS, "traffic"));
  for (const c of ["shop-server", "shop-frontend", "github-server", "gist-server", "gist-frontend"])
    expect(stored).toContain(`${c}.pcap0`);
  fs.rmSync(ARTIFACTS, { recursive: true, force: true });
}, 120_000);

let demoSpec: StackSpec;

describe("the demo multi env on the local engine", () => {
  demoSuites({
    stack: STACK,
    artifacts: ARTIFACTS,
    env: () => env,
    spec: () => demoSpec,
    stackFile: () => DEMO_STACK_FILE,
    browsers,
    machines: () => ({ dockerHost: ["172.17.0.1", 22] }),
  });
});
