// Collection against the real gateway process: every listed capture stored under traffic/, its size checked and
// its SHA-256 in run.json beside the live marks; a re-run skipping complete files; failures as warnings, or as
// errors with --fail-on-capture-error.
import { appendFileSync, existsSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { CaptureCollectionError, collectRun, type CollectOptions } from "../../src/runner/evidence/collect";
import type { RunRecord } from "../../src/runner/evidence/run-record";
import { cleanup, tempDir } from "../helpers/processes";
import { pcapBytes, sha256, startTestGateway, writeCaptures } from "./helpers";
import { TOKEN } from "../gateway/helpers";

afterEach(cleanup);

const LIVE_MARKS = {
  live: true,
  liveWebsites: [{ name: "github", domains: ["github.com"], allowHosts: [], reproducible: false as const }],
  captureTraffic: true,
};

async function env(files: Record<string, Buffer>) {
  const capturesDir = tempDir("runner-captures-");
  writeCaptures(capturesDir, files);
  const gateway = await startTestGateway({ sites: { shop: { server: "http://127.0.0.1:9" } }, capturesDir });
  const artifactsDir = join(tempDir("runner-artifacts-"), "artifacts", "task-1");
  const warnings: string[] = [];
  const options: CollectOptions = {
    stack: "task-1",
    access: { gatewayUrl: gateway.url, controlToken: TOKEN },
    artifactsDir,
    marks: LIVE_MARKS,
    captureTraffic: true,
    computers: [],
    syntheticDomains: ["shop.test"],
    log: (line) => line.startsWith("warning") && warnings.push(line),
  };
  return { capturesDir, gateway, artifactsDir, options, warnings };
}

const runJson = (artifactsDir: string) => JSON.parse(readFileSync(join(artifactsDir, "run.json"), "utf8")) as RunRecord;

describe("collect", () => {
  it("stores every listed capture under traffic/ with its size and SHA-256 in run.json, beside the live marks", async () => {
    const files = {
      "shop-server.pcap0": pcapBytes(70_000, 1),
      "shop-frontend.pcap0": pcapBytes(24, 2),
      "shop-server.pcap1": pcapBytes(5_000, 3),
    };
    const { artifactsDir, options } = await env(files);

    const result = await collectRun(options);

    expect(result.downloaded.sort()).toEqual(Object.keys(files).sort());
    expect(readdirSync(join(artifactsDir, "traffic")).sort()).toEqual(Object.keys(files).sort());
    const record = runJson(artifactsDir);
    for (const [name, bytes] of Object.entries(files)) {
      expect(readFileSync(join(artifactsDir, "traffic", name)).equals(bytes)).toBe(true);
      const entry = record.captures.find((c) => c.name === name)!;
      expect(entry).toMatchObject({
        name,
        site: "shop",
        bytes: bytes.length,
        listedBytes: bytes.length,
        sha256: sha256(bytes),
        file: `traffic/${name}`,
      });
    }
    expect(record).toMatchObject({
      stack: "task-1",
      live: true,
      reproducible: false,
      captureTraffic: true,
      captureErrors: [],
    });
    expect(record.liveWebsites.map((w) => w.name)).toEqual(["github"]);
    // Nothing temporary is left beside the files.
    expect(readdirSync(join(artifactsDir, "traffic")).filter((n) => n.startsWith("."))).toEqual([]);
  });

  it("skips files already complete on a re-run, and fetches a file again once it has grown", async () => {
    const { capturesDir, artifactsDir, options } = await env({
      "shop-server.pcap0": pcapBytes(4_000),
      "shop-server.pcap1": pcapBytes(3_000),
    });
    await collectRun(options);
    const stored = join(artifactsDir, "traffic", "shop-server.pcap0");
    const before = statSync(stored).mtimeMs;

    const again = await collectRun(options);
    expect(again.downloaded).toEqual([]);
    expect(again.skipped.sort()).toEqual(["shop-server.pcap0", "shop-server.pcap1"]);
    expect(statSync(stored).mtimeMs).toBe(before);

    // tcpdump appends to the newest file: the next collection takes the longer file.
    appendFileSync(join(capturesDir, "shop-server.pcap1"), Buffer.alloc(1_000, 7));
    const grown = await collectRun(options);
    expect(grown.downloaded).toEqual(["shop-server.pcap1"]);
    const grownBytes = readFileSync(join(capturesDir, "shop-server.pcap1"));
    expect(runJson(artifactsDir).captures.find((c) => c.name === "shop-server.pcap1")).toMatchObject({
      bytes: 4_000,
      sha256: sha256(grownBytes),
    });
  });

  it("treats a capture that vanished mid-collection as a warning by default, keeping the others", async () => {
    const { capturesDir, artifactsDir, options, warnings } = await env({
      "shop-server.pcap0": pcapBytes(2_000),
      "shop-server.pcap1": pcapBytes(2_000),
    });
    // Rotated away between the listing and its download: delete the second once the first is stored.
    const result = await collectRun({
      ...options,
      log: (line) => {
        if (line.startsWith("collected traffic/shop-server.pcap0")) rmSync(join(capturesDir, "shop-server.pcap1"));
        if (line.startsWith("warning")) warnings.push(line);
      },
    });
    expect(result.downloaded).toEqual(["shop-server.pcap0"]);
    expect(result.captureErrors.map((e) => e.name)).toEqual(["shop-server.pcap1"]);
    expect(warnings.join("\n")).toMatch(/stack task-1: 1 capture\(s\) not collected \(shop-server\.pcap1: .*404/);
    expect(warnings.join("\n")).toContain("--fail-on-capture-error");
    expect(runJson(artifactsDir).captureErrors.map((e) => e.name)).toEqual(["shop-server.pcap1"]);
    expect(existsSync(join(artifactsDir, "traffic", "shop-server.pcap1"))).toBe(false);
  });

  it("fails with --fail-on-capture-error when the gateway cannot be reached, after recording what happened", async () => {
    const { gateway, artifactsDir, options } = await env({ "shop-server.pcap0": pcapBytes(100) });
    await gateway.stop();
    const failing = collectRun({ ...options, failOnCaptureError: true });
    await expect(failing).rejects.toBeInstanceOf(CaptureCollectionError);
    await expect(failing).rejects.toThrow(
      /^stack task-1: captures not collected: the gateway did not list them \(listing traffic captures: cannot reach the gateway \(ECONNREFUSED\)\)/,
    );
    await expect(failing).rejects.toThrow(/run `multienv collect task-1` again while the env is up$/);
    expect(runJson(artifactsDir).captureErrors).toHaveLength(1);
  });

  it("stays consistent when two collections of one run race (collect beside a destroy's delete step)", async () => {
    const files = {
      "shop-server.pcap0": pcapBytes(300_000, 4),
      "shop-server.pcap1": pcapBytes(200_000, 5),
      "shop-frontend.pcap0": pcapBytes(100_000, 6),
    };
    const { artifactsDir, options } = await env(files);
    await Promise.all([collectRun(options), collectRun(options), collectRun(options)]);
    expect(readdirSync(join(artifactsDir, "traffic")).sort()).toEqual(Object.keys(files).sort());
    const record = runJson(artifactsDir);
    expect(record.captures.map((c) => c.name).sort()).toEqual(Object.keys(files).sort());
    for (const [name, bytes] of Object.entries(files)) {
      expect(readFileSync(join(artifactsDir, "traffic", name)).equals(bytes)).toBe(true);
      expect(record.captures.find((c) => c.name === name)!.sha256).toBe(sha256(bytes));
    }
    expect(readdirSync(artifactsDir).filter((n) => n.startsWith("."))).toEqual([]);
  });

  it("refuses the wrong control token: nothing is stored", async () => {
    const { artifactsDir, options } = await env({ "shop-server.pcap0": pcapBytes(100) });
    const failing = collectRun({
      ...options,
      access: { ...options.access, controlToken: "not-the-token" },
      failOnCaptureError: true,
    });
    await expect(failing).rejects.toThrow(/HTTP 401/);
    expect(existsSync(join(artifactsDir, "traffic"))).toBe(false);
  });

  it("asks the gateway's card whether it captures when not told, and skips captures when it does not", async () => {
    const artifactsDir = join(tempDir(), "task-2");
    const gateway = await startTestGateway({ sites: { shop: { server: "http://127.0.0.1:9" } } });
    const result = await collectRun({
      stack: "task-2",
      access: { gatewayUrl: gateway.url, controlToken: TOKEN },
      artifactsDir,
      computers: [],
      syntheticDomains: [],
    });
    expect(result.captureErrors).toEqual([]);
    expect(runJson(artifactsDir)).toMatchObject({ captureTraffic: false, captures: [], reproducible: true });
  });
});
