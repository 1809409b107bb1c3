// A test runner's loop over one task: deploy the demo env once, run three episodes on it, store each episode's
// evidence, tear it down. The "agent" here is a stand-in that browses the way an agent would, over DevTools
// through the gateway; an evaluation harness puts its own agent there.
//
//   PULUMI_CONFIG_PASSPHRASE=demo npx tsx examples/runner/episodes.ts [stack] [--no-self-test]
//
// The stack (default `episodes-demo`) gets the demo's config (stacks/Pulumi.demo.yaml). Each episode's evidence
// ends up in artifacts/<stack>/episodes/<n>/: its captures, its proxy logs; run.json lists the episodes.
import { readFileSync } from "node:fs";
import path from "node:path";
import { chromium } from "playwright-core";
import YAML from "yaml";
import { deployStack, type DeployedStack, type StackSpec } from "../../src/runner";

/** The page's localStorage, as far as this example uses it (the program itself has no DOM types). */
interface WebStorage {
  getItem(key: string): string | null;
  setItem(key: string, value: string): void;
}

const EPISODES = 3;

/** The demo task under another stack name: the spec a harness would build for each task it runs. */
function demoTask(stack: string): StackSpec {
  const file = YAML.parse(readFileSync(path.join(__dirname, "../../stacks/Pulumi.demo.yaml"), "utf8")) as {
    config: Record<string, unknown>;
  };
  return { name: stack, config: file.config };
}

/** What an agent leaves behind in an episode: pages visited, a cart in local storage, a record in the shop. */
async function agentEpisode(env: DeployedStack, episode: number): Promise<string> {
  const { controlToken } = await env.access();
  const browser = await chromium.connectOverCDP(env.outputs.computers.desktop.cdpUrl, {
    headers: { Authorization: `Bearer ${controlToken}` },
  });
  try {
    const context = browser.contexts()[0];
    const tabs = context.pages().map((p) => p.url());
    const page = await context.newPage();
    await page.goto("https://shop.test/");
    const cartBefore = await page.evaluate(() =>
      (globalThis as unknown as { localStorage: WebStorage }).localStorage.getItem("cart"),
    );
    await page.evaluate(
      (n) => (globalThis as unknown as { localStorage: WebStorage }).localStorage.setItem("cart", `episode ${n}`),
      episode,
    );
    const order = await fetch(`${env.outputs.websites.shop.svcUrl}data`, {
      method: "POST",
      headers: { authorization: `Bearer ${controlToken}` },
      body: JSON.stringify({ episode }),
    });
    const orders = (await (
      await fetch(`${env.outputs.websites.shop.svcUrl}data`, { headers: { authorization: `Bearer ${controlToken}` } })
    ).json()) as { items: unknown[] };
    return `start tabs ${JSON.stringify(tabs)}, cart before ${JSON.stringify(cartBefore)}, order ${order.status}, orders now ${orders.items.length}`;
  } finally {
    await browser.close();
  }
}

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const stack = args.find((a) => !a.startsWith("--")) ?? "episodes-demo";
  const log = (line: string) => console.log(`  ${line}`);
  console.log(`deploying ${stack}`);
  const env = await deployStack(demoTask(stack), { preview: false, selfTest: !args.includes("--no-self-test"), log });
  try {
    for (let episode = 1; episode <= EPISODES; episode++) {
      console.log(`episode ${episode}: ${await agentEpisode(env, episode)}`);
      const reset = await env.reset({ collect: true });
      const collected = reset.collected!.record;
      console.log(
        `episode ${episode} collected: ${collected.captures.length} captures, public hosts ${JSON.stringify(collected.publicHostsContacted)}; episode ${reset.episode} ready in ${reset.seconds.toFixed(1)} s`,
      );
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
