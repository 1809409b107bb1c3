// `multienv collect <stack>`: store the run's captures, site-proxy logs and run.json under artifacts/<stack>/.
// `multienv collect --from-env` is the same collection run by the capture collector's delete step during a
// plain `pulumi destroy`: it reads the gateway's address, the control token and the env's context from its
// environment (src/plan/collector.ts), not from the stack, whose lock the destroy holds.
import { resolve } from "node:path";
import type { Command } from "commander";
import { artifactsDirOf } from "../evidence/artifacts";
import { readCollectorEnvironment } from "../../plan/collector";
import type { CollectResult } from "../evidence/collect";
import type { GatewayAccess } from "../stack/outputs";
import { RunnerError } from "../errors";
import { checkFirst, type CommonOptions, note, runAction, say, withProjectDir } from "./common";

interface CollectOptions extends CommonOptions {
  failOnCaptureError?: boolean;
  fromEnv?: boolean;
  artifacts?: string;
  endConnections?: boolean;
}

function summary(stack: string, result: CollectResult, artifactsDir: string): string {
  const r = result.record;
  const hosts = r.publicHostsContacted.length > 0 ? r.publicHostsContacted.join(", ") : "none";
  return [
    `stack ${stack}: collected into ${artifactsDir}`,
    `  captures: ${result.downloaded.length} downloaded, ${result.skipped.length} already complete, ${result.captureErrors.length} failed`,
    `  public hosts contacted: ${hosts}`,
    `  reproducible: ${r.reproducible}${r.reproducible ? "" : ` (${r.notReproducibleBecause.join("; ")})`}`,
  ].join("\n");
}

export function register(program: Command): void {
  withProjectDir(
    program
      .command("collect")
      .description(
        "download every capture (traffic/v1) and each computer's site-proxy log into artifacts/<stack>/, recording sizes, SHA-256 and reproducibility in run.json",
      )
      .argument("[stack]", "the stack (task) name; omit with --from-env")
      .option("--fail-on-capture-error", "fail (exit 1) when a capture cannot be collected; by default it is a warning")
      .option(
        "--from-env",
        "read the gateway URL, control token and env from MULTIENV_* variables (the capture collector's delete step)",
      )
      .option("--artifacts <dir>", "store here instead of artifacts/<stack> under the project directory")
      .option(
        "--end-connections",
        "first end every connection the computers' site proxies hold, so each is in its log (for teardown)",
      ),
  ).action((stack: string | undefined, options: CollectOptions) =>
    runAction("collect", async () => {
      if (options.fromEnv) {
        if (stack !== undefined)
          throw new RunnerError(`--from-env reads the stack from MULTIENV_STACK; drop the stack argument ${stack}`);
        const fromEnv = readCollectorEnvironment(process.env);
        // Remote hosts: the SSH tunnel, down when this destroy runs from a new shell, is brought up; kubernetes: a
        // port-forward to the gateway's pod is open for the collection. A gateway that cannot be reached is said, and
        // the collection below records what it could not store (and fails with --fail-on-capture-error, so the
        // destroy stops before anything is gone).
        const { openGatewayReach } =
          require("../../engines/gateway-reach") as typeof import("../../engines/gateway-reach");
        const reach = await openGatewayReach(fromEnv, {
          owner: `stack ${fromEnv.stack}`,
          onUnreachable: (error) => note(`warning: ${error.message}`),
        });
        const access: GatewayAccess = {
          gatewayUrl: reach.url,
          controlToken: fromEnv.controlToken,
          close: reach.close,
        };
        try {
          say(
            summary(fromEnv.stack, await collectFromEnv(fromEnv, access, options), artifactsDirFor(fromEnv, options)),
          );
        } finally {
          await access.close?.();
        }
        return;
      }
      if (stack === undefined)
        throw new RunnerError("name the stack to collect (`multienv collect <stack>`), or pass --from-env");
      if (options.endConnections)
        throw new RunnerError(
          `stack ${stack}: --end-connections is for teardown (--from-env); \`multienv down ${stack}\` ends them itself`,
        );
      await checkFirst(stack, options, "deployed");
      const artifactsDir = resolve(options.artifacts ?? artifactsDirOf(options.projectDir, stack));
      const { collectCaptures } = require("../index") as typeof import("../index");
      const result = await collectCaptures(stack, {
        projectDir: options.projectDir,
        artifactsDir,
        failOnCaptureError: options.failOnCaptureError,
        log: note,
      });
      say(summary(stack, result, artifactsDir));
      // Evidence lost for good fails the collection (run.json says what is missing); the delete step of a destroy
      // (--from-env) only warns, as failing it could not bring the entries back and would hold the destroy.
      if (result.evidenceLost.length > 0) throw new RunnerError(result.evidenceLost.join("; "));
    }),
  );
}

function artifactsDirFor(fromEnv: ReturnType<typeof readCollectorEnvironment>, options: CollectOptions): string {
  return resolve(options.artifacts ?? fromEnv.artifactsDir ?? artifactsDirOf(options.projectDir, fromEnv.stack));
}

/** The collection of `collect --from-env`, through `access`. */
async function collectFromEnv(
  fromEnv: ReturnType<typeof readCollectorEnvironment>,
  access: GatewayAccess,
  options: CollectOptions,
): Promise<CollectResult> {
  // Loaded when run: the delete step needs neither the Automation API nor Pulumi at all.
  const { collectRun } = require("../evidence/collect") as typeof import("../evidence/collect");
  if (options.endConnections && fromEnv.context.computers.length > 0) {
    const { completeProxyLogs } = require("../lifecycle/down") as typeof import("../lifecycle/down");
    await completeProxyLogs({ stack: fromEnv.stack, access, computers: fromEnv.context.computers }, note);
  }
  const artifactsDir = artifactsDirFor(fromEnv, options);
  return collectRun({
    stack: fromEnv.stack,
    access,
    artifactsDir,
    marks: {
      live: fromEnv.context.live,
      liveReasons: fromEnv.context.liveReasons,
      liveWebsites: fromEnv.context.liveWebsites,
      captureTraffic: fromEnv.context.captureTraffic,
    },
    captureTraffic: fromEnv.context.captureTraffic,
    computers: fromEnv.context.computers,
    syntheticDomains: fromEnv.context.syntheticDomains,
    replayedSites: fromEnv.context.replayedSites ?? [],
    failOnCaptureError: options.failOnCaptureError,
    log: note,
  });
}
