import { defineConfig } from "vitest/config";
import { BaseSequencer, type TestSpecification } from "vitest/node";

/** Vitest's own order, but every kubernetes file after the rest. */
class KubernetesLastSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    const isKubernetes = (file: TestSpecification) => /kubernetes/.test(file.moduleId);
    return [...sorted.filter((f) => !isKubernetes(f)), ...sorted.filter(isKubernetes)];
  }
}

// Two tiers: `unit` (plan, config, components under Pulumi mocks, services on loopback)
// and `e2e` (the real Pulumi engine deploying on the real Docker engine). `npm test` runs both, the unit tier
// first: while e2e deploys, Docker adds and removes interfaces, and Chromium drops a page load when the
// machine's interfaces change (ERR_NETWORK_CHANGED), which the unit tier's browser tests must not meet.
export default defineConfig({
  test: {
    // The kubernetes files last: their prerequisites build in the background meanwhile (test/e2e/global-setup.ts).
    // A sequencer is the whole run's, not a project's.
    sequence: { sequencer: KubernetesLastSequencer },
    projects: [
      {
        test: {
          name: "unit",
          include: ["test/**/*.test.ts"],
          sequence: { groupOrder: 0 },
          exclude: ["test/e2e/**"],
          testTimeout: 60_000,
          hookTimeout: 60_000,
        },
      },
      {
        test: {
          name: "e2e",
          include: ["test/e2e/**/*.test.ts"],
          setupFiles: ["test/e2e/setup.ts"],
          globalSetup: ["test/e2e/global-setup.ts"],
          sequence: { groupOrder: 1 },
          testTimeout: 300_000,
          hookTimeout: 600_000,
          fileParallelism: false,
        },
      },
    ],
  },
});
