// A warm pool on the kubernetes target: two members, each an ordinary stack in a namespace of the test cluster
// (scripts/test-cluster.sh), warmed by the library, served over HTTP, claimed, released and claimed again. What it
// holds: admission measures an idle member on the cluster (its pods' working set) against the cluster's allocatable
// memory, so the pool grows past its first member; a claim's cdpUrl is a local port-forward of the service to the
// member's gateway pod, opening that computer's browser with the claim's agent token; the reset on the cluster hands
// the next episode a fresh profile; a drain leaves no namespace of the pool.
import fs from "node:fs";
import path from "node:path";
import { chromium } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { destroyStack } from "../../src/runner";
import { servePools, warmPool, type PoolService } from "../../src/runner/pools";
import { until } from "../helpers/until";
import { e2eStack, REPO, stackFileOf } from "./helpers/env";
import { kubectl, PREREQUISITES_TIMEOUT_MS, testCluster, type TestCluster } from "./helpers/kubernetes";

const TASK = e2eStack("k8s-pool");
const MEMBERS = [`${TASK}-w1`, `${TASK}-w2`];
let cluster: TestCluster;
let service: PoolService | undefined;
let token = "";
const log = (line: string) => console.log(`  ${line}`);

async function call(method: string, route: string, body?: unknown): Promise<{ status: number; json: any }> {
  const res = await fetch(`${service!.url}${route}`, {
    method,
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, json: await res.json() };
}

async function claim(): Promise<any> {
  const answer = await call("POST", "/v1/claims", { task: TASK, ttlSeconds: 300, waitSeconds: 180 });
  expect(answer.status, JSON.stringify(answer.json)).toBe(201);
  return answer.json;
}

const memberNamespaces = () =>
  kubectl(cluster, ["get", "namespaces", "-o", "name"])
    .split("\n")
    .filter((n) => MEMBERS.some((m) => n === `namespace/${m}`));

async function cleanUp(): Promise<void> {
  for (const member of MEMBERS) {
    await destroyStack(member, { remove: true }).catch(() => undefined);
    kubectl(cluster, ["delete", "namespace", member, "--ignore-not-found", "--wait=false"]);
    fs.rmSync(stackFileOf(member), { force: true });
    fs.rmSync(path.join(REPO, "artifacts", member), { recursive: true, force: true });
  }
  fs.rmSync(stackFileOf(TASK), { force: true });
  fs.rmSync(path.join(REPO, "artifacts", TASK), { recursive: true, force: true });
  fs.rmSync(path.join(REPO, ".multienv", "pools", TASK), { recursive: true, force: true });
}

beforeAll(async () => {
  cluster = testCluster();
  process.env.KUBECONFIG = cluster.kubeconfig;
  await cleanUp();
  fs.copyFileSync(path.join(__dirname, "fixtures", "Pulumi.pool-shop-kubernetes.yaml"), stackFileOf(TASK));
}, PREREQUISITES_TIMEOUT_MS);

afterAll(async () => {
  await service?.close();
  if (cluster) await cleanUp();
}, 600_000);

describe("a warm pool of namespaces on the kubernetes test cluster", () => {
  it("warms two members, admission measured on the cluster", async () => {
    const state = await warmPool(TASK, 2, { log });
    expect(state).toMatchObject({ ready: 2, size: 2 });
    expect(state.admits).toBeGreaterThanOrEqual(2);
    expect(memberNamespaces().sort()).toEqual(MEMBERS.map((m) => `namespace/${m}`));
  }, 900_000);

  it("claims both, releases one and claims it again with a fresh profile, through serve's port-forwards", async () => {
    service = await servePools({ port: 0, log });
    token = fs.readFileSync(service.tokenFile, "utf8").trim();
    const held = [await claim(), await claim()];
    expect(held.map((c) => c.stack).sort()).toEqual(MEMBERS);
    const first = held[0];
    const agent = first.computers.agent;
    expect(agent.cdpUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/computers\/agent\/cdp$/);

    const browser = await chromium.connectOverCDP(agent.cdpUrl, {
      headers: { authorization: `Bearer ${agent.agentToken}` },
    });
    const context = browser.contexts()[0];
    const page = await context.newPage();
    await page.goto("https://shop.test/");
    await context.addCookies([{ name: "episode", value: "one", url: "https://shop.test/" }]);
    expect((await context.cookies()).some((c) => c.name === "episode")).toBe(true);
    await browser.close();

    expect((await call("DELETE", `/v1/claims/${encodeURIComponent(first.id)}`)).status).toBe(202);
    // The only free member is the one released: the next claim waits for its reset and gets it.
    const again = await claim();
    expect(again.stack).toBe(first.stack);
    const fresh = await chromium.connectOverCDP(again.computers.agent.cdpUrl, {
      headers: { authorization: `Bearer ${again.computers.agent.agentToken}` },
    });
    expect(await fresh.contexts()[0].cookies()).toEqual([]);
    await fresh.close();
    for (const c of [again, held[1]])
      expect((await call("DELETE", `/v1/claims/${encodeURIComponent(c.id)}?collect=false`)).status).toBe(202);
    await until(
      "both members ready again",
      async () => {
        const pool = (await call("GET", "/v1/pools")).json.pools.find((p: { task: string }) => p.task === TASK);
        return pool?.ready === 2 ? pool : undefined;
      },
      300_000,
      500,
    );
  }, 900_000);

  it("drains with --size 0: no namespace of the pool left", async () => {
    await service?.close();
    service = undefined;
    expect(await warmPool(TASK, 0, { log })).toMatchObject({ ready: 0, size: 0 });
    await until("the members' namespaces gone", () => (memberNamespaces().length === 0 ? true : undefined), 300_000);
  }, 900_000);
});
