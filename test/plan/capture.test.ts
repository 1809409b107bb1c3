import { describe, expect, it } from "vitest";
import { captureProblems, captureWarnings } from "../../src/plan/capture";
import { plan } from "../../src/plan";
import { formatProblem } from "../../src/plan/problems";
import { stackConfig } from "./fixtures";

describe("capture", () => {
  it("is refused with no website in the env", () => {
    expect(captureProblems(stackConfig({ captureTraffic: true })).map(formatProblem)).toEqual([
      "multienv:captureTraffic: capture records websites' traffic and the env has no website; add a website or set captureTraffic: false",
    ]);
  });

  it("is allowed with a website, and off is always fine", () => {
    expect(captureProblems(stackConfig({ captureTraffic: true, websites: { shop: { domains: [] } } }))).toEqual([]);
    expect(captureProblems(stackConfig({ captureTraffic: false }))).toEqual([]);
  });

  it("puts one sidecar beside every website container: a synthetic site's server and frontend, a live site's server", () => {
    const result = plan(
      stackConfig({
        captureTraffic: true,
        capture: { fileSizeMb: 5, fileCount: 3 },
        websites: { shop: { domains: ["shop.test"] }, gh: { live: true, domains: ["github.com"] } },
      }),
      { stack: "demo" },
    );
    if (!result.ok) throw new Error(result.problems.map(formatProblem).join("\n"));
    expect(result.plan.capture).toEqual({
      enabled: true,
      fileSizeMb: 5,
      fileCount: 3,
      volumeName: "demo-captures",
      sidecars: [
        {
          target: "demo-gh-server",
          site: "gh",
          role: "server",
          containerName: "demo-gh-server-capture",
          filePrefix: "gh-server.pcap",
        },
        {
          target: "demo-shop-frontend",
          site: "shop",
          role: "frontend",
          containerName: "demo-shop-frontend-capture",
          filePrefix: "shop-frontend.pcap",
        },
        {
          target: "demo-shop-server",
          site: "shop",
          role: "server",
          containerName: "demo-shop-server-capture",
          filePrefix: "shop-server.pcap",
        },
      ],
    });
  });

  it("plans no sidecar when capture is off", () => {
    const result = plan(stackConfig({ websites: { shop: { domains: ["shop.test"] } } }), { stack: "demo" });
    expect(result.ok && result.plan.capture.sidecars).toEqual([]);
    expect(result.ok && result.plan.capture.enabled).toBe(false);
  });
});

describe("capture's size", () => {
  it("warns, naming the total, when the files could grow past any reasonable disk (per website container)", () => {
    const sites = { shop: { domains: ["shop.test"] }, gh: { live: true, domains: ["github.com"] } };
    // 3 website containers: the shop's server and frontend, the live site's server.
    const big = stackConfig({ captureTraffic: true, capture: { fileSizeMb: 1000, fileCount: 50 }, websites: sites });
    expect(captureWarnings(big).map(formatProblem)).toEqual([
      "multienv:capture: lets the captures grow to 150 GB (1000 MB × 50 files × 3 website containers), past any reasonable disk; lower fileSizeMb or fileCount",
    ]);
    expect(captureWarnings({ ...big, captureTraffic: false })).toEqual([]);
    expect(captureWarnings(stackConfig({ captureTraffic: true, websites: sites }))).toEqual([]);
  });
});
