// A test runner's loop over one task: deploy the demo env once, run three episodes of the shop task on it (the last
// one an agent that gets the task wrong), grade each from the shop's data plane and again from the episode's request
// log alone (what the browser sent and got, as its site proxy recorded it), store each episode's evidence, reset,
// tear it down. The agent here is the
// scripted one of shop-agent.ts, driving the computer's browser over DevTools through the gateway
// (`chromium.connectOverCDP` with the computer's agent token, which opens that computer's DevTools and nothing else);
// an evaluation harness puts its own agent there. The control token, which opens every route, stays with the runner.
//
//   PULUMI_CONFIG_PASSPHRASE=demo npx tsx examples/runner/episodes.ts [stack] [--no-self-test]
//
// The stack (default `episodes-demo`) gets the demo's config (stacks/Pulumi.demo.yaml). Each episode's evidence
// ends up in artifacts/<stack>/episodes/<n>/: its captures, its proxy logs, its request logs (requests/<computer>.har);
// run.json lists the episodes.
import { readFileSync } from "node:fs";
import path from "node:path";
import { chromium } from "playwright-core";
import YAML from "yaml";
import { deployStack, gatewayClient, type DeployedStack, type StackSpec } from "../../src/runner";
import type { Har } from "har-format";
import { gradeShopEpisode, runShopEpisode, type ShopGrade, SHOP_URL } from "./shop-agent";
import { gradeShopEpisodeFromHar } from "./shop-har-grader";

const EPISODES = 3;

/** The demo task under another stack name: the spec a harness would build for each task it runs. */
function demoTask(stack: string): StackSpec {
  const file = YAML.parse(readFileSync(path.join(__dirname, "../../stacks/Pulumi.demo.yaml"), "utf8")) as {
    config: Record<string, unknown>;
  };
  return { name: stack, config: file.config };
}

/** The shop's orders as its data plane gives them, through the gateway with the control token (the runner's). */
async function shopData(env: DeployedStack): Promise<unknown> {
  return gatewayClient(await env.access()).siteJson("shop", "/data");
}

/** The agent of the last episode buys the mug alone: an episode both graders must fail. */
const WRONG_SKUS = ["mug"];

/** One episode: what the env holds at its start, the agent's run (buying `skus`), and the data plane's grade. */
async function episode(env: DeployedStack, skus?: readonly string[]): Promise<{ line: string; grade: ShopGrade }> {
  const before = (await shopData(env)) as { orders: unknown[] };
  // What the agent is handed: the computer's DevTools URL and its agent token, never the control token.
  const agentToken = (await env.access()).agentTokens?.desktop;
  if (agentToken === undefined) throw new Error("the stack exports no agent token for the desktop computer");
  const browser = await chromium.connectOverCDP(env.outputs.computers.desktop.cdpUrl, {
    headers: { Authorization: `Bearer ${agentToken}` },
  });
  try {
    const context = browser.contexts()[0];
    const tabs = context.pages().map((p) => p.url());
    const page = await context.newPage();
    const { orderId } = await runShopEpisode(page, SHOP_URL, skus);
    const grade = gradeShopEpisode(await shopData(env));
    return {
      line: `start tabs ${JSON.stringify(tabs)}, orders before ${before.orders.length}, ${orderId} placed, ${grade.passed ? "passed" : "failed"}: ${grade.reason}`,
      grade,
    };
  } finally {
    await browser.close();
  }
}

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const stack = args.find((a) => !a.startsWith("--")) ?? "episodes-demo";
  const log = (line: string) => console.log(`  ${line}`);
  console.log(`deploying ${stack}`);
  const env = await deployStack(demoTask(stack), { selfTest: !args.includes("--no-self-test"), log });
  try {
    for (let n = 1; n <= EPISODES; n++) {
      const { line, grade } = await episode(env, n === EPISODES ? WRONG_SKUS : undefined);
      console.log(`episode ${n}: ${line}`);
      const reset = await env.reset({ collect: true });
      const collected = reset.collected!.record;
      console.log(
        `episode ${n} collected: ${collected.captures.length} captures, public hosts ${JSON.stringify(collected.publicHostsContacted)}; episode ${reset.episode} ready in ${reset.seconds.toFixed(1)} s`,
      );
      // The episode's request log, now among its evidence: the same grade from what the browser sent and got alone.
      const har = JSON.parse(
        readFileSync(
          path.join(__dirname, "../../artifacts", stack, "episodes", String(n), "requests", "desktop.har"),
          "utf8",
        ),
      ) as Har;
      const fromHar = gradeShopEpisodeFromHar(har, SHOP_URL);
      const agree = fromHar.passed === grade.passed && fromHar.orderId === grade.orderId;
      console.log(
        `episode ${n} from its request log: ${fromHar.passed ? "passed" : "failed"}: ${fromHar.reason}; ${agree ? "agrees" : "DISAGREES"} with the data plane`,
      );
      if (!agree) throw new Error(`episode ${n}: the request log's grade disagrees with the data plane's`);
    }
  } finally {
    const down = await env.destroy({ remove: true });
    console.log(
      `destroyed ${stack} (${down.collected?.record.captures.length ?? 0} captures of the last episode stored)`,
    );
  }
}

main().catch((error: unknown) => {
  console.error(`episodes: ${(error as Error).message}`);
  process.exitCode = 1;
});
