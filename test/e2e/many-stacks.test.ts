// Three task stacks on one engine at once, as a runner deploys them: two from this process (the runner library,
// concurrently) and one from a process of its own (the CLI) at the same time. Each gets a working env (its
// self-test passes), no computer of one reaches any container of another (tried from inside the containers,
// and through the computer's own proxy), and `down` of one leaves the others running and untouched.
import { execFile } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import YAML from "yaml";
import { afterAll, beforeAll, expect, it } from "vitest";
import { engineClient } from "../../src/engines/docker";
import { deployStack, destroyStack, gatewayAccess, type DeployedStack, type StackSpec } from "../../src/runner";
import { addressesOf, connectsFrom, e2eStack, REPO, stackFileOf, sweepStack, throughProxy } from "./helpers/env";
import { until } from "../helpers/until";
import { chromium } from "playwright-core";

const api = engineClient();
const [A, B, C] = ["e2e-ma", "e2e-mb", "e2e-mc"].map(e2eStack);
const STACKS = [A, B, C];

/** A small task: one synthetic site, one computer on an allowlist and one allow-all, no capture. */
function task(name: string): StackSpec {
  return {
    name,
    config: {
      "multienv:target": "docker",
      "multienv:websites": {
        shop: {
          domains: ["shop.test"],
          server: { image: "multienv/sample-shop-server" },
          frontend: { image: "multienv/sample-shop-frontend" },
        },
      },
      "multienv:computers": {
        agent: { network: ["example.org"], startTabs: ["https://shop.test/"] },
        open: { network: "allow-all" },
      },
      // No web stand-in here: the allow-all computer's public page is the env's own synthetic shop.
      "multienv:selfTest": { publicUrl: "https://shop.test/" },
    },
  };
}

/** `multienv up <stack>` in a process of its own, on this run's backend. */
function upInAnotherProcess(spec: StackSpec): Promise<{ code: number; stdout: string; stderr: string }> {
  fs.writeFileSync(stackFileOf(spec.name), YAML.stringify({ config: spec.config }));
  return new Promise((resolve) =>
    execFile(
      process.execPath,
      [path.join(REPO, "bin/multienv.js"), "up", spec.name, "--no-preview"],
      { cwd: REPO, env: process.env, timeout: 600_000, maxBuffer: 16 * 1024 * 1024 },
      (error, stdout, stderr) =>
        resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    ),
  );
}

async function containersOf(stack: string): Promise<Record<string, string>> {
  const list = await api.listContainers({ all: true, filters: { label: [`multienv.stack=${stack}`] } });
  return Object.fromEntries(list.map((c) => [c.Names[0].replace(/^\//, ""), `${c.Id} ${c.State}`]));
}

async function shopTitle(stack: string): Promise<string> {
  const { gatewayUrl, controlToken } = await gatewayAccess(stack);
  const browser = await chromium.connectOverCDP(`${gatewayUrl}/computers/agent/cdp`, {
    headers: { Authorization: `Bearer ${controlToken}` },
  });
  try {
    const page = await browser.contexts()[0].newPage();
    await page.goto("https://shop.test/");
    const title = await page.title();
    await page.close();
    return title;
  } finally {
    await browser.close();
  }
}

let deployed: DeployedStack[] = [];
let seconds = 0;

beforeAll(async () => {
  for (const stack of STACKS) await sweepStack(api, stack);
  const started = Date.now();
  const [inProcess, other] = await Promise.all([
    Promise.all([deployStack(task(A)), deployStack(task(B))]),
    upInAnotherProcess(task(C)),
  ]);
  seconds = (Date.now() - started) / 1000;
  deployed = inProcess;
  if (other.code !== 0) throw new Error(`multienv up ${C} failed: ${other.stderr || other.stdout}`);
  console.log(`three stacks deployed at once (two in one process, one in another): ${seconds.toFixed(1)} s`);
}, 900_000);

afterAll(async () => {
  for (const stack of STACKS) {
    await destroyStack(stack, { remove: true }).catch(() => undefined);
    await sweepStack(api, stack).catch(() => undefined);
    fs.rmSync(stackFileOf(stack), { force: true });
    fs.rmSync(path.join(REPO, "artifacts", stack), { recursive: true, force: true });
  }
}, 300_000);

it("gives each of them a working env: its self-test passed and its computer loads its site", async () => {
  for (const env of deployed)
    expect("passed" in env.outputs.selfTest && env.outputs.selfTest.passed, env.name).toBe(true);
  const record = JSON.parse(fs.readFileSync(path.join(REPO, "artifacts", C, "run.json"), "utf8"));
  expect(record.selfTest.passed).toBe(true);
  for (const stack of STACKS) expect(await shopTitle(stack)).toBe("Synthetic shop");
  // Three gateways, three host ports.
  const urls = await Promise.all(STACKS.map(async (s) => (await gatewayAccess(s)).gatewayUrl));
  expect(new Set(urls).size).toBe(3);
});

it("lets no computer of one reach any container of another, from inside its containers or through its proxy", async () => {
  const targets: Record<string, [string, number]> = {};
  for (const [container, ports] of [
    [`${B}-gateway`, [8080, 8081]],
    [`${B}-shop-server`, [8000]],
    [`${B}-shop-frontend`, [80]],
    [`${B}-agent-proxy`, [3128, 9000]],
    [`${B}-open-proxy`, [3128, 9000]],
    [`${B}-agent-browser`, [9222]],
  ] as const) {
    for (const [network, address] of Object.entries(await addressesOf(api, container))) {
      for (const port of ports) targets[`${container} on ${network}:${port}`] = [address, port];
      // The engine's side of each of B's networks is the host itself.
      const gateway = (await api.getNetwork(network).inspect()).IPAM?.Config?.[0]?.Gateway as string | undefined;
      if (gateway)
        targets[`the host on ${network}, B's gateway port`] = [
          gateway,
          Number(new URL((await gatewayAccess(B)).gatewayUrl).port),
        ];
    }
  }
  expect(Object.keys(targets).length).toBeGreaterThan(10);
  for (const probe of [`${A}-agent-browser`, `${A}-agent-proxy`, `${A}-open-browser`, `${A}-open-proxy`]) {
    const results = connectsFrom(probe, targets);
    const reached = Object.entries(results).filter(([, r]) => r === "connected");
    expect({ probe, reached }).toEqual({ probe, reached: [] });
  }
  // Through the allow-all computer's proxy, the agent's own path: CONNECT and GET to each of those addresses.
  const requests: Record<string, { method: "GET" | "CONNECT"; target: string }> = {};
  for (const [what, [address, port]] of Object.entries(targets)) {
    requests[`CONNECT ${what}`] = { method: "CONNECT", target: `${address}:${port}` };
    requests[`GET ${what}`] = { method: "GET", target: `http://${address}:${port}/` };
  }
  const answers = throughProxy(`${A}-open-browser`, requests);
  const through = Object.entries(answers).filter(
    ([, a]) => a.status === 200 || (a.status > 0 && a.marker === undefined),
  );
  expect(through).toEqual([]);
});

it("takes one stack down and leaves the others running and untouched", async () => {
  const before = { [B]: await containersOf(B), [C]: await containersOf(C) };
  await deployed[0].destroy({ remove: true });
  expect(await containersOf(A)).toEqual({});
  for (const stack of [B, C]) {
    expect(await containersOf(stack)).toEqual(before[stack]);
    const { gatewayUrl } = await gatewayAccess(stack);
    await until(`${stack}'s gateway healthy`, async () => (await fetch(`${gatewayUrl}/healthz`)).ok, 10_000, 250);
    expect(await shopTitle(stack)).toBe("Synthetic shop");
  }
});
