// `multienv status <stack>`: one deployed env's health and evidence so far; exit 1 naming what is not healthy.
import type { Command } from "commander";
import { checkFirst, type CommonOptions, note, runAction, say, withProjectDir } from "./common";

interface StatusOptions extends CommonOptions {
  json?: boolean;
}

export function register(program: Command): void {
  withProjectDir(
    program
      .command("status")
      .description(
        "show a deployed env's health: each container's state and health, the gateway and its /healthz, each computer's open tabs (over DevTools) and who holds it (a person's takeover, its agent's request for a person), the self-test, and the evidence so far (captures, proxy logs); exit 1 when something is not healthy",
      )
      .argument("<stack>", "the stack (task) name")
      .option(
        "--json",
        "print {stack, healthy, problems, containers, gateway, computers, selfTest, evidence} as one JSON object",
      ),
  ).action((stack: string, options: StatusOptions) =>
    runAction("status", async () => {
      await checkFirst(stack, options, "deployed");
      const { stackStatus } = require("../index") as typeof import("../index");
      const { formatStatus } = require("../operator/format") as typeof import("../operator/format");
      const status = await stackStatus(stack, { projectDir: options.projectDir });
      say(options.json ? JSON.stringify(status, null, 2) : formatStatus(status));
      if (!status.healthy) {
        note(`multienv status: stack ${stack} is not healthy: ${status.problems.join("; ")}`);
        process.exitCode = 1;
      }
    }),
  );
}
