// The program entry Pulumi runs (Pulumi.yaml main: index.ts) and how it stops on bad input.
import { execFileSync } from "node:child_process";
import { resolve } from "node:path";
import * as pulumi from "@pulumi/pulumi";
import { describe, expect, it, vi } from "vitest";
import { multienvProgram } from "../../src/program";
import { countsAsStep, parseDeclaredResources } from "../../src/protocol/declared-resources";
import { GraphError } from "../../src/runner/check/graph";
import { graphOf } from "./helpers";

describe("program", () => {
  it("index.ts exports the program itself, so Pulumi's CommonJS loader (node --import=tsx) calls it", () => {
    // What Pulumi's nodejs runtime does with Pulumi.yaml's nodeargs: require the main module, call it if a function.
    const script = "const m = require('./index.ts'); process.stdout.write(typeof m + ' ' + m.name)";
    const out = execFileSync(process.execPath, ["--import=tsx", "-e", script], {
      cwd: resolve(__dirname, "..", ".."),
      encoding: "utf8",
    });
    expect(out).toBe(`function ${multienvProgram.name}`);
  });

  it("tells the runner how many resources it declares, every one the engine will take a step on, leases included", async () => {
    const websites = {
      shop: {
        domains: ["shop.test"],
        server: { image: "multienv/sample-shop-server" },
        frontend: { image: "multienv/sample-shop-frontend" },
      },
      gh: { live: true, domains: ["github.com"], server: { image: "multienv/sample-live-server" } },
      // A pooled site's lease (a component, the lease, and a read of the pool's stack) is declared before the env.
      lab: {
        live: true,
        domains: ["gitlab.com"],
        server: { image: "multienv/sample-live-server" },
        accountPool: "gitlab-accounts",
      },
    };
    const computers = { desktop: { network: ["example.org"] }, offline: { network: "none" } };
    for (const target of ["docker", "kubernetes"]) {
      const debug = vi.spyOn(pulumi.log, "debug");
      try {
        const graph = await graphOf(`count-${target}`, { target, captureTraffic: true, websites, computers });
        const declared = debug.mock.calls.map(([message]) => parseDeclaredResources(message));
        // The graph holds registrations; the pool's stack reference is a read, a step of the engine's too.
        const steps = graph.resources.filter((r) => countsAsStep(r.type)).length + 1;
        expect(
          graph.resources.some((r) => r.type === "multienv:accounts:AccountLease"),
          target,
        ).toBe(true);
        expect(
          declared.filter((count) => count !== undefined),
          target,
        ).toEqual([steps]);
        expect(steps, target).toBeGreaterThan(10);
      } finally {
        debug.mockRestore();
      }
    }
  });

  it("stops a refused plan with one line per problem, naming each config path", async () => {
    const config = {
      websites: { gh: { live: true, domains: ["140.82.112.3"], server: { image: "x" } } },
      computers: { c: { network: "allow-all", startTabs: ["https://example.com/"] } },
    };
    const error = await graphOf("p1", config).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(GraphError);
    const lines = (error as Error).message.split("\n");
    expect(lines.length).toBeGreaterThanOrEqual(2);
    expect(lines.some((l) => l.startsWith("multienv:websites.gh.domains[0]:"))).toBe(true);
    expect(lines.some((l) => l.startsWith("multienv:computers.c.startTabs[0]:"))).toBe(true);
    for (const line of lines) expect(line).toMatch(/^multienv:/);
  });

  it("stops a config the schema refuses the same way", async () => {
    const error = await graphOf("p2", { target: "nomad" }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(GraphError);
    expect((error as Error).message).toMatch(/^multienv:target: /);
  });

  it("logs the plan's warnings through pulumi.log.warn", async () => {
    const config = {
      websites: {
        gh: { live: true, domains: ["github.com", "gist.github.com"], server: { image: "x" } },
        gist: { domains: ["gist.github.com"], server: { image: "s" }, frontend: { image: "f" } },
      },
    };
    const graph = await graphOf("p3", config);
    expect(graph.warnings.some((w) => w.includes("gist.github.com"))).toBe(true);
  });
});
