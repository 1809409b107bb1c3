// The demo task (stacks/Pulumi.demo-kubernetes.yaml) on a real one-node Kubernetes cluster (scripts/test-cluster.sh,
// NetworkPolicies enforced by kube-router), deployed by the runner with the real Pulumi engine and kubernetes
// provider, reached through a port-forward, and attacked from inside its pods: a hostile site image, an agent in a
// computer's browser, each probing what its pod must not reach. The public web is a stand-in in a network namespace
// of the cluster's on a public address, its names in the cluster's DNS. The disruptive scenarios (a killed site
// container, down) run last. A person takes a computer over from watch's page, through the same port-forward.
// A fourth site is served from a recording: its recording image (built here as an operator builds it, FROM the replay
// server's) reaches the cluster's containerd as the project's images do, by `scripts/test-cluster.sh up`.
import { execFile, execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { chromium } from "playwright-core";
import YAML from "yaml";
import {
  collectCaptures,
  deployStack,
  destroyStack,
  gatewayAccess,
  resetStack,
  screenshotStack,
  signIn,
  stackStatus,
  type StackSpec,
} from "../../src/runner";
import { TRAFFIC_CAPTURES_PATH, type TrafficCaptureListing } from "../../src/protocol/traffic";
import {
  connectProbeScript,
  e2eStack,
  REPO,
  specOf,
  stackFileOf,
  throughProxyScript,
  CHROMIUM_MAIN,
} from "./helpers/env";
import { until } from "../helpers/until";
import { LIST_ZOMBIES } from "../helpers/processes";
import {
  execIn,
  getJson,
  kubectl,
  namespaceGone,
  nodeInPod,
  PREREQUISITES_TIMEOUT_MS,
  startClusterStandin,
  testCluster,
  type ClusterWebStandin,
  type TestCluster,
} from "./helpers/kubernetes";
import { TRUST_SCRIPT } from "./helpers/web-standin";
import { TAKEN_OVER_ERROR_CODE } from "../../src/protocol/takeover";
import { personTypesInTakeover } from "./helpers/takeover";
import { recordingDockerfile, recordingImage } from "../../src/plan/replay";
import { gatewayClient } from "../../src/protocol/gateway-client";
import { entry, har } from "../replay-server/helpers";

const STACK = e2eStack("k8s");
const STACK_FILE = path.join(REPO, "stacks/Pulumi.demo-kubernetes.yaml");
const ARTIFACTS = path.resolve(__dirname, "../../artifacts", STACK);
const SITE_PODS = [
  "shop-server",
  "shop-frontend",
  "github-server",
  "gist-server",
  "gist-frontend",
  "news-server",
  "news-replay",
];
/** The website containers captured, by the names captures carry: a replay server's is its site's frontend's. */
const CAPTURED = SITE_PODS.map((p) => (p === "news-replay" ? "news-frontend" : p));
/** The replayed site: a live site served from its recording, which the cluster has no way to the web for anyway. */
const REPLAYED = "https://news.ycombinator.com";
const RECORDING_DIR = fs.mkdtempSync(path.join(os.tmpdir(), "multienv-k8s-recording-"));
const HAR = path.join(RECORDING_DIR, "recording.har");

/**
 * The recording and its image, `docker build` of the HAR beside the plan's Dockerfile (FROM the replay server): the
 * front page, a poll recorded answering twice, and no favicon request (the page names none), so the counters are
 * the test's alone.
 */
function buildRecordingImage(): string {
  const page = `<html><head><link rel="icon" href="data:,"></head><body><h1 id="front">recorded front page</h1></body></html>`;
  const text = (body: string) => ({ body, mimeType: "text/plain" });
  fs.writeFileSync(
    HAR,
    JSON.stringify(
      har([
        entry(`${REPLAYED}/`, { body: page }),
        entry(`${REPLAYED}/poll`, text("first")),
        entry(`${REPLAYED}/poll`, text("second")),
      ]),
    ),
  );
  fs.writeFileSync(path.join(RECORDING_DIR, "Dockerfile"), recordingDockerfile());
  const sha256 = createHash("sha256").update(fs.readFileSync(HAR)).digest("hex");
  execFileSync("docker", ["build", "-q", "-t", recordingImage(sha256), RECORDING_DIR], { stdio: "ignore" });
  return sha256;
}

let cluster: TestCluster;
let standin: ClusterWebStandin;
let spec: StackSpec;
let deploySeconds = 0;
let access: { gatewayUrl: string; controlToken: string; close?: () => Promise<void> };
/** The replayed site's counters once the agent's visit is done: the episode's, until the reset ends it. */
let replayCounted: { exact: number; fuzzy: number; missed: number } | undefined;

const pod = (name: string) => getJson(cluster, STACK, "pod", name);
const podIp = (name: string): string => pod(name).status.podIP;
const serviceIp = (name: string): string => getJson(cluster, STACK, "service", name).spec.clusterIP;
const probe = (from: string, container: string, targets: Record<string, [string, number]>) =>
  JSON.parse(nodeInPod(cluster, STACK, from, container, connectProbeScript(targets))) as Record<string, string>;
const connected = (results: Record<string, string>) => Object.keys(results).filter((k) => results[k] === "connected");
const gateway = (p: string, init: RequestInit = {}) =>
  fetch(access.gatewayUrl + p, {
    ...init,
    headers: { authorization: `Bearer ${access.controlToken}`, ...(init.headers ?? {}) },
  });

/** The replayed site's poll, asked twice from its page. */
const POLLS = `(async () => { const out = []; for (let i = 0; i < 2; i++) out.push(await (await fetch("/poll")).text()); return out; })()`;

/** The API server as pods see it: its Service's ClusterIP, and the node address it listens on. */
function apiServer(): Record<string, [string, number]> {
  const endpoints = getJson(cluster, "default", "endpoints", "kubernetes");
  const address = endpoints.subsets[0].addresses[0].ip as string;
  const port = endpoints.subsets[0].ports[0].port as number;
  return {
    apiService: [getJson(cluster, "default", "service", "kubernetes").spec.clusterIP, 443],
    apiNode: [address, port],
  };
}

/** kill -9 of every process of a pod's container, from the host (a container's PID 1 ignores its own signals). */
function killContainer(podName: string, container: string): void {
  const status = (pod(podName).status.containerStatuses as { name: string; containerID: string }[]).find(
    (s) => s.name === container,
  );
  const id = status?.containerID.replace(/^containerd:\/\//, "");
  if (!id) throw new Error(`no container ${container} in pod ${podName}`);
  const pids = fs.readdirSync("/proc").filter((p) => {
    if (!/^\d+$/.test(p)) return false;
    try {
      return fs.readFileSync(`/proc/${p}/cgroup`, "utf8").includes(id);
    } catch {
      return false;
    }
  });
  if (pids.length === 0) throw new Error(`no process of container ${id} found on this node`);
  execFileSync("kill", ["-9", ...pids]);
}

/** Chromium restarted in each browser, so it reads the NSS db the stand-in's CA was added to. */
function trustStandin(): void {
  for (const computer of ["desktop", "open"]) {
    execIn(cluster, STACK, `${computer}-browser`, "browser", ["sh", "-c", TRUST_SCRIPT], standin.certs.caPem);
    const pids = JSON.parse(
      nodeInPod(
        cluster,
        STACK,
        `${computer}-browser`,
        "browser",
        `const fs=require("fs");const r=[];for(const p of fs.readdirSync("/proc")){if(!/^\\d+$/.test(p))continue;try{r.push([+p,fs.readFileSync("/proc/"+p+"/cmdline","utf8").split("\\0").join(" ")])}catch{}}console.log(JSON.stringify(r))`,
      ),
    ) as [number, string][];
    const main = pids.filter(([, cmd]) => CHROMIUM_MAIN.test(cmd)).map(([p]) => String(p));
    if (main.length) execIn(cluster, STACK, `${computer}-browser`, "browser", ["kill", "-9", ...main]);
  }
}

function pulumi(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) =>
    execFile(
      "pulumi",
      [...args, "--non-interactive"],
      { cwd: REPO, env: process.env, timeout: 300_000, maxBuffer: 64 * 1024 * 1024 },
      (error, stdout, stderr) =>
        resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    ),
  );
}

beforeAll(async () => {
  buildRecordingImage();
  cluster = testCluster();
  process.env.KUBECONFIG = cluster.kubeconfig;
  standin = await startClusterStandin(cluster, ["example.org"]);
  fs.rmSync(ARTIFACTS, { recursive: true, force: true });
  kubectl(cluster, ["delete", "namespace", STACK, "--ignore-not-found", "--wait=true"]);
  spec = specOf(STACK, STACK_FILE);
  const websites = spec.config["multienv:websites"] as Record<string, { settings?: Record<string, unknown> }>;
  // gist's server declares no reset operation, so a reset recreates its pod.
  websites.gist.settings = { ...websites.gist.settings, declareReset: false };
  Object.assign(websites, {
    // Recorded: the computers' proxies open its HTTPS (trusting its stand-in's CA for it alone) into the request log.
    github: { ...websites.github, record: true, recordTrust: standin.certs.caPem },
    news: {
      live: true,
      domains: [new URL(REPLAYED).hostname],
      server: { image: "multienv/sample-live-server" },
      replay: { file: HAR },
    },
  });
  const started = Date.now();
  // Deployed as `multienv up` does, its preview first: a new stack's preview meets every Service's ClusterIP unknown.
  await deployStack(spec, { selfTest: false });
  deploySeconds = (Date.now() - started) / 1000;
  access = await gatewayAccess(STACK);
  trustStandin();
}, PREREQUISITES_TIMEOUT_MS + 900_000);

afterAll(async () => {
  await access?.close?.().catch(() => undefined);
  standin?.stop();
  if (spec) {
    await destroyStack(STACK).catch(() => undefined);
    fs.rmSync(stackFileOf(STACK), { force: true });
  }
  fs.rmSync(RECORDING_DIR, { recursive: true, force: true });
}, 300_000);

describe("the demo multi env on a Kubernetes cluster", () => {
  it("deploys every part as a pod in the stack's namespace, healthy, reached by port-forward alone", async () => {
    console.log(`kubernetes deploy to healthy: ${deploySeconds.toFixed(1)} s`);
    const ns = getJson(cluster, "", "namespace", STACK);
    expect(ns.metadata.labels["multienv.stack"]).toBe(STACK);
    const pods = JSON.parse(kubectl(cluster, ["get", "pods", "-n", STACK, "-o", "json"])).items as any[];
    expect(pods.map((p) => p.metadata.name).sort()).toEqual(
      [...SITE_PODS, "gateway", "desktop-proxy", "desktop-browser", "open-proxy", "open-browser"].sort(),
    );
    for (const p of pods) {
      expect(p.status.phase).toBe("Running");
      expect(p.spec.automountServiceAccountToken).toBe(false);
      expect(p.metadata.labels["multienv.stack"]).toBe(STACK);
    }
    expect(access.gatewayUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect((await gateway("/healthz")).status).toBe(200);
    // No Service publishes the runner listener: none outside the cluster, none on its port.
    const services = JSON.parse(kubectl(cluster, ["get", "services", "-n", STACK, "-o", "json"])).items as any[];
    for (const s of services) {
      expect(s.spec.type).toBe("ClusterIP");
      expect(s.spec.ports.map((p: { port: number }) => p.port)).not.toContain(8080);
    }
  });

  it("previews a new stack of three computers with the plain Pulumi CLI, as a user's `pulumi preview` does", async () => {
    const name = e2eStack("k8s-new");
    const three = specOf(name, STACK_FILE);
    const computers = three.config["multienv:computers"] as Record<string, unknown>;
    three.config["multienv:computers"] = { ...computers, third: { network: "none" } };
    fs.writeFileSync(stackFileOf(name), YAML.stringify({ config: three.config }));
    try {
      const init = await pulumi(["stack", "init", name]);
      expect({ code: init.code, err: init.stderr }).toMatchObject({ code: 0 });
      const preview = await pulumi(["preview", "--stack", name]);
      expect({ code: preview.code, err: preview.stderr.split("\n").slice(-12) }).toMatchObject({ code: 0 });
      expect(preview.stdout).toMatch(/kubernetes:core\/v1:Pod\s+\S*third-browser\s+create/);
    } finally {
      await pulumi(["stack", "rm", "--yes", "--force", "--stack", name]);
      fs.rmSync(stackFileOf(name), { force: true });
    }
  }, 300_000);

  it("passes its self-test from inside each computer, and a second up changes nothing", async () => {
    const deployed = await deployStack(spec);
    expect(deployed.outputs.selfTest).toMatchObject({ passed: true });
    const preview = await pulumi(["preview", "--expect-no-changes", "--stack", STACK]);
    expect({ code: preview.code, err: preview.stderr.split("\n").slice(-5) }).toMatchObject({ code: 0 });
  }, 600_000);

  it("signs a computer in to the live site through the forwarded gateway", async () => {
    expect(await signIn(STACK, { site: "github", computer: "desktop" })).toMatchObject({ cookies: 1 });
    const browser = await chromium.connectOverCDP(`${access.gatewayUrl}/computers/desktop/cdp`, {
      headers: { authorization: `Bearer ${access.controlToken}` },
      timeout: 30_000,
    });
    const page = await browser.contexts()[0].newPage();
    try {
      // github.com is tunnelled to its stand-in on the web namespace, which echoes the session cookie it was sent.
      await page.goto("https://github.com/headers", { timeout: 30_000, waitUntil: "domcontentloaded" });
      const sent = JSON.parse((await page.textContent("body")) ?? "{}") as Record<string, string>;
      expect(sent.cookie).toContain("user_session=alex");
    } finally {
      await page.close().catch(() => undefined);
      // Disconnects from the browser over DevTools; the computer's Chromium goes on.
      void browser.close().catch(() => undefined);
    }
  }, 120_000);

  it("serves a replayed site from its recording at its real name through a computer's proxy: its repeats in order, a miss a 404 counted and logged", async () => {
    const browser = await chromium.connectOverCDP(`${access.gatewayUrl}/computers/desktop/cdp`, {
      headers: { authorization: `Bearer ${access.controlToken}` },
      timeout: 30_000,
    });
    const before = await gatewayClient(access).replayCounters("news");
    const page = await browser.contexts()[0].newPage();
    try {
      await page.goto(`${REPLAYED}/`, { timeout: 30_000, waitUntil: "domcontentloaded" });
      expect(await page.textContent("#front")).toBe("recorded front page");
      expect(await page.evaluate(POLLS)).toEqual(["first", "second"]);
      const miss = await page.evaluate(
        `fetch("/never-recorded").then((a) => ({ status: a.status, marker: a.headers.get("x-agentenv-replay") }))`,
      );
      expect(miss).toEqual({ status: 404, marker: "miss" });
    } finally {
      await page.close().catch(() => undefined);
      void browser.close().catch(() => undefined);
    }
    // The page and both polls exact; the one miss, as the docker target counts them.
    replayCounted = await gatewayClient(access).replayCounters("news");
    expect({
      exact: replayCounted.exact - before.exact,
      fuzzy: replayCounted.fuzzy - before.fuzzy,
      missed: replayCounted.missed - before.missed,
    }).toEqual({ exact: 3, fuzzy: 0, missed: 1 });
    await collectCaptures(STACK);
    const line = fs
      .readFileSync(path.join(ARTIFACTS, "proxy-logs", "desktop.jsonl"), "utf8")
      .split("\n")
      .filter((l) => l.includes('"replay-miss"'))
      .map((l) => JSON.parse(l) as Record<string, string>)
      .find((l) => l.url.includes("/never-recorded"));
    expect(line).toMatchObject({ site: "news", method: "GET", url: `${REPLAYED}/never-recorded` });
  }, 120_000);

  it("shows its status and a computer's screen through the forwarded gateway", async () => {
    const status = await stackStatus(STACK);
    expect({ healthy: status.healthy, problems: status.problems }).toEqual({ healthy: true, problems: [] });
    expect(status.containers.length).toBe(12);
    const shots = await screenshotStack(STACK, { computer: "desktop" });
    expect(shots).toHaveLength(1);
    expect(fs.readFileSync(shots[0].file).subarray(1, 4).toString()).toBe("PNG");
    // Seen taking from 5 s to 111 s on this cluster (docs/kubernetes.md): the time is the operator's, not an aim.
  }, 300_000);

  it("lets a person take a computer over through the forwarded gateway: its agent held, the person's click and keys in its page, then handed back", async () => {
    const seen = await personTypesInTakeover({
      stack: STACK,
      access,
      computer: "desktop",
      operator: "kim",
      text: "k8s",
    });
    for (const { method, error } of seen.refused)
      expect(error, method).toMatchObject({ code: TAKEN_OVER_ERROR_CODE, message: expect.stringContaining("kim") });
    expect(seen.typed).toBe("k8s");
    expect(seen.record).toMatchObject({ computer: "desktop", operator: "kim", keys: 3 });
    expect(seen.record.inputs.filter((i) => i.kind === "pointer")).toHaveLength(2);
  }, 180_000);

  it("lets a hostile site image reach no port of a proxy, a browser or the gateway, nor the API server or metadata", () => {
    const targets: Record<string, [string, number]> = { ...apiServer(), metadata: ["169.254.169.254", 80] };
    for (const computer of ["desktop", "open"])
      for (const part of ["proxy", "browser"])
        for (const port of [3128, 9000, 9222, 22, 80]) {
          targets[`${computer}-${part}@pod:${port}`] = [podIp(`${computer}-${part}`), port];
          targets[`${computer}-${part}@service:${port}`] = [serviceIp(`${computer}-${part}`), port];
        }
    for (const port of [8080, 8081]) targets[`gateway@pod:${port}`] = [podIp("gateway"), port];
    targets["gateway@service:8081"] = [serviceIp("gateway"), 8081];
    // Another site's pod: the sites reach each other only as the topology says (a frontend its own server).
    targets["shop-server@pod:8000"] = [podIp("shop-server"), 8000];
    // A replay server: the gateway's alone, on every port it listens on.
    for (const port of [8070, 9000, 8090]) {
      targets[`news-replay@pod:${port}`] = [podIp("news-replay"), port];
      targets[`news-replay@service:${port}`] = [serviceIp("news-replay"), port];
    }
    for (const site of ["gist-server", "github-server", "news-server"]) {
      const results = probe(site, "server", targets);
      expect({ site, connected: connected(results) }).toEqual({ site, connected: [] });
    }
  });

  it("lets a computer's browser reach its own proxy and nothing else: no gateway, site, other computer, API server, metadata or web", () => {
    const targets: Record<string, [string, number]> = {
      ownProxy: [serviceIp("desktop-proxy"), 3128],
      ownProxyControl: [podIp("desktop-proxy"), 9000],
      gatewayBrowse: [podIp("gateway"), 8081],
      gatewayRunner: [podIp("gateway"), 8080],
      shopServer: [podIp("shop-server"), 8000],
      shopServerService: [serviceIp("shop-server"), 8000],
      replayServer: [podIp("news-replay"), 8070],
      replayControl: [serviceIp("news-replay"), 9000],
      otherProxy: [podIp("open-proxy"), 3128],
      otherBrowser: [podIp("open-browser"), 9222],
      web: [cluster.webAddress, 443],
      metadata: ["169.254.169.254", 80],
      ...apiServer(),
    };
    const results = probe("desktop-browser", "browser", targets);
    expect(results.ownProxy).toBe("connected");
    expect(connected(results).filter((k) => k !== "ownProxy")).toEqual([]);
  });

  it("lets a replay server reach nothing: no web, by address or by name, no gateway, site, computer, API server or metadata", () => {
    const targets: Record<string, [string, number]> = {
      web: [cluster.webAddress, 443],
      webByName: ["github.com", 443],
      gatewayBrowse: [podIp("gateway"), 8081],
      gatewayRunner: [podIp("gateway"), 8080],
      ownServer: [podIp("news-server"), 8000],
      shopServer: [serviceIp("shop-server"), 8000],
      proxy: [podIp("desktop-proxy"), 3128],
      browser: [podIp("desktop-browser"), 9222],
      metadata: ["169.254.169.254", 80],
      ...apiServer(),
    };
    expect(connected(probe("news-replay", "replay-server", targets))).toEqual([]);
  });

  it("refuses, through the proxy, the gateway's runner and /svc/, a website pod, another computer, the API server and metadata", () => {
    const api = apiServer();
    const requests = {
      synthetic: { method: "GET" as const, target: "http://shop.test/" },
      svc: { method: "GET" as const, target: `http://${podIp("gateway")}:8081/svc/shop/` },
      svcByService: { method: "GET" as const, target: `http://${serviceIp("gateway")}:8081/svc/shop/` },
      sitePod: { method: "GET" as const, target: `http://${podIp("shop-server")}:8000/` },
      otherComputer: { method: "GET" as const, target: `http://${podIp("open-browser")}:9222/json/version` },
      apiServer: { method: "CONNECT" as const, target: `${api.apiService[0]}:443` },
      apiNode: { method: "CONNECT" as const, target: `${api.apiNode[0]}:${api.apiNode[1]}` },
      metadata: { method: "GET" as const, target: "http://169.254.169.254/latest/meta-data/" },
    };
    for (const computer of ["desktop", "open"]) {
      const answers = JSON.parse(
        nodeInPod(cluster, STACK, `${computer}-browser`, "browser", throughProxyScript(requests)),
      ) as Record<string, { status: number; marker?: string }>;
      expect({ computer, synthetic: answers.synthetic.status }).toEqual({ computer, synthetic: 200 });
      for (const name of Object.keys(requests).filter((k) => k !== "synthetic"))
        expect({ computer, name, status: answers[name].status }).toEqual({ computer, name, status: 403 });
    }
  });

  it("resets for the next episode (a site without a reset operation gets a new pod) and collects every capture", async () => {
    const gistUid = pod("gist-server").metadata.uid;
    const result = await resetStack(STACK, { collect: true });
    expect(result.sites).toMatchObject({ gist: "restarted", shop: "reset" });
    // The replayed site's episode ended with the counters it had; the next one starts its recording over.
    const run = JSON.parse(fs.readFileSync(path.join(ARTIFACTS, "run.json"), "utf8")) as {
      episodes: { replay?: Record<string, { exact: number; fuzzy: number; missed: number }> }[];
    };
    expect(run.episodes.at(-1)?.replay?.news).toEqual(replayCounted);
    expect(await gatewayClient(access).replayCounters("news")).toEqual({ exact: 0, fuzzy: 0, missed: 0 });
    expect(pod("gist-server").metadata.uid).not.toBe(gistUid);
    expect((await gateway("/healthz")).status).toBe(200);
    // The reset ended the episode's Chromium and its helper processes: none is left unreaped in the browser's pod.
    const zombies = execIn(cluster, STACK, "desktop-browser", "browser", LIST_ZOMBIES).trim();
    expect(zombies, "zombie processes in the browser's pod").toBe("");
    // The finished episode was collected before its pods went: every website container's capture.
    const episode = fs.readdirSync(path.join(ARTIFACTS, "episodes/1/traffic"));
    for (const c of CAPTURED)
      expect({ c, stored: episode.some((f) => f.startsWith(`${c}.`)) }).toEqual({ c, stored: true });
    // The episode's request log: the recorded live site's exchange decrypted, the replayed site's polls.
    const requests = JSON.parse(fs.readFileSync(path.join(ARTIFACTS, "episodes/1/requests/desktop.har"), "utf8")) as {
      log: { entries: { request: { url: string }; response: { status: number } }[] };
    };
    const urls = requests.log.entries.map((e) => e.request.url);
    expect(urls.filter((u) => u === `${REPLAYED}/poll`)).toHaveLength(2);
    const headers = requests.log.entries.find((e) => e.request.url === "https://github.com/headers");
    expect(headers?.response.status).toBe(200);
    // The next one's captures began with the new pods, and collect stores them.
    await collectCaptures(STACK);
    const stored = fs.readdirSync(path.join(ARTIFACTS, "traffic"));
    for (const c of CAPTURED)
      expect({ c, stored: stored.some((f) => f.startsWith(`${c}.`)) }).toEqual({ c, stored: true });
    // Its repeats from the first recorded answer again.
    const browser = await chromium.connectOverCDP(`${access.gatewayUrl}/computers/desktop/cdp`, {
      headers: { authorization: `Bearer ${access.controlToken}` },
      timeout: 30_000,
    });
    const page = await browser.contexts()[0].newPage();
    try {
      await page.goto(`${REPLAYED}/`, { timeout: 30_000, waitUntil: "domcontentloaded" });
      expect(await page.evaluate(POLLS)).toEqual(["first", "second"]);
    } finally {
      await page.close().catch(() => undefined);
      void browser.close().catch(() => undefined);
    }
  }, 300_000);

  it("keeps capturing when a site's container is killed: the kubelet restarts it, the capture's run goes on and grows", async () => {
    const listing = async () =>
      ((await (await gateway(TRAFFIC_CAPTURES_PATH)).json()) as TrafficCaptureListing).captures.filter(
        (c) => c.container === "shop-server",
      );
    const before = await listing();
    expect(before.length).toBeGreaterThan(0);
    const restarts = () =>
      (pod("shop-server").status.containerStatuses as { name: string; restartCount: number }[]).find(
        (s) => s.name === "server",
      )?.restartCount ?? 0;
    const restartsBefore = restarts();
    killContainer("shop-server", "server");
    await until(
      "the site container restarted and ready",
      async () =>
        restarts() > restartsBefore && (pod("shop-server").status.containerStatuses as any[]).every((s) => s.ready),
      60_000,
      250,
    );
    const bytes = (cs: { bytes: number }[]) => cs.reduce((n, c) => n + c.bytes, 0);
    await until("the shop answering again", async () => (await gateway("/svc/shop/")).status < 500, 30_000, 250);
    await until("the capture grown", async () => bytes(await listing()) > bytes(before), 30_000, 250);
    const after = await listing();
    // One run: the capture container was never restarted (the pod's network namespace outlived the site's).
    expect(new Set(after.map((c) => c.run))).toEqual(new Set([1]));
    const capture = (pod("shop-server").status.initContainerStatuses as { name: string; restartCount: number }[]).find(
      (s) => s.name === "capture",
    );
    expect(capture?.restartCount).toBe(0);
  }, 120_000);

  it("goes down leaving no namespace, its captures collected first", async () => {
    await access.close?.();
    await destroyStack(STACK);
    await namespaceGone(cluster, STACK);
    expect(fs.readdirSync(path.join(ARTIFACTS, "traffic")).length).toBeGreaterThan(0);
    spec = undefined as unknown as StackSpec;
  }, 300_000);
});
