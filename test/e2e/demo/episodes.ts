// The demo's episodes suite: reset puts the env back as after `up` (see target.ts).
import fs from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { runShopEpisode } from "../../../examples/runner/shop-agent";
import { signIn } from "../../../src/runner/lifecycle/sign-in";
import { resetStack } from "../../../src/runner";
import { harProblems } from "../../helpers/har";
import { LIST_ZOMBIES } from "../../helpers/processes";
import { until } from "../../helpers/until";
import { demoHelpers, type DemoTarget } from "./target";

export function episodesSuite(t: DemoTarget): void {
  describe("episodes: reset puts the env back as after `up`", () => {
    const { STACK, computer } = demoHelpers(t);

    it("resets the env for the next episode: every site's data emptied, each browser signed out with its start tabs, the episode collected first", async () => {
      const env = t.env();
      const access = { gatewayUrl: env.gatewayUrl, controlToken: env.token };
      // Episode 1 leaves traces: an order in each shop (placed by the scripted agent), data in the live site, a
      // session, local storage, a tab elsewhere.
      expect(
        (await env.gateway("/svc/github/data", { method: "POST", body: JSON.stringify({ left: "github" }) })).status,
      ).toBe(201);
      await signIn({ access, site: "github", computer: "desktop" });
      const before = await computer("desktop");
      for (const shop of ["https://shop.test/", "https://gist.github.com/"])
        await runShopEpisode(await before.contexts()[0].newPage(), shop);
      for (const site of ["shop", "gist"])
        expect(
          ((await (await env.gateway(`/svc/${site}/data`)).json()) as { orders: unknown[] }).orders,
          site,
        ).toHaveLength(1);
      const page = await before.contexts()[0].newPage();
      await page.goto("https://shop.test/");
      await page.evaluate(() =>
        (globalThis as unknown as { localStorage: { setItem(k: string, v: string): void } }).localStorage.setItem(
          "cart",
          "3 items",
        ),
      );
      await page.goto("https://gist.github.com/");
      await before.close();
      expect(
        env.throughProxy(`${STACK}-desktop-browser`, { offList: { method: "CONNECT", target: "example.com:443" } })
          .offList.status,
      ).toBe(403);

      const result = await resetStack(STACK, { collect: true, log: (line) => console.log(line) });
      expect(result.episode).toBe(2);
      expect(result.sites).toEqual({ shop: "reset", github: "reset", gist: "restarted" });
      console.log(`reset of the demo env, episode 1 collected first: ${result.seconds.toFixed(1)} s`);
      // The data plane of every site is empty again.
      for (const [site, empty] of [
        ["shop", { orders: [] }],
        ["gist", { orders: [] }],
        ["github", { items: [] }],
      ] as const)
        expect({ site, data: await (await env.gateway(`/svc/${site}/data`)).json() }).toEqual({ site, data: empty });
      // The browser has its start tabs and nothing else, no cookie, no storage.
      const after = await computer("desktop");
      const context = after.contexts()[0];
      await until(
        "the start tabs loaded",
        async () => {
          const urls = context
            .pages()
            .map((p) => p.url())
            .sort();
          return JSON.stringify(urls) === JSON.stringify(["https://github.com/", "https://shop.test/"])
            ? urls
            : undefined;
        },
        30_000,
        250,
      );
      expect(await context.cookies()).toEqual([]);
      const shop = context.pages().find((p) => p.url() === "https://shop.test/")!;
      expect(
        await shop.evaluate(() =>
          (globalThis as unknown as { localStorage: { getItem(k: string): string | null } }).localStorage.getItem(
            "cart",
          ),
        ),
      ).toBeNull();
      // Episode 1 was collected first, whole; run.json counts episodes.
      const episodeDir = path.join(t.artifacts, "episodes", "1");
      const episode1 = fs.readFileSync(path.join(episodeDir, "proxy-logs", "desktop.jsonl"), "utf8");
      expect(episode1).toContain('"host":"example.com"');
      expect(episode1, "the self-test's lines are no episode's").not.toContain("not-reached.multienv.invalid");
      expect(fs.readdirSync(path.join(episodeDir, "traffic"))).toContain("shop-server.pcap0");
      // Its request log is a valid HAR of what the agent did: both checkouts, each through its site's own name.
      const har = JSON.parse(fs.readFileSync(path.join(episodeDir, "requests", "desktop.har"), "utf8"));
      expect(await harProblems(har)).toEqual([]);
      const checkouts = (har.log.entries as { request: { method: string; url: string } }[])
        .filter((e) => e.request.method === "POST" && new URL(e.request.url).pathname === "/checkout")
        .map((e) => new URL(e.request.url).host)
        .sort();
      expect(checkouts).toEqual(["gist.github.com", "shop.test"]);
      const record = JSON.parse(fs.readFileSync(path.join(t.artifacts, "run.json"), "utf8"));
      expect(record.episode).toBe(2);
      expect(record.episodes).toEqual([expect.objectContaining({ episode: 1, collected: true, dir: "episodes/1" })]);
      // Episode 2's evidence starts empty: its proxy log, collected by the next reset, holds nothing of episode 1,
      // and the start tabs' connections, still open when that reset began, are in it.
      await until("the shop's start tab loaded", async () => (await shop.title()) === "Synthetic shop", 30_000, 250);
      await after.close();
      const next = await resetStack(STACK, { collect: true });
      expect(next.episode).toBe(3);
      const episode2 = fs.readFileSync(path.join(t.artifacts, "episodes", "2", "proxy-logs", "desktop.jsonl"), "utf8");
      expect(episode2, episode2).not.toContain('"host":"example.com"');
      expect(episode2, episode2).toContain('"host":"shop.test"');
      // Two resets ended two Chromiums, each with its helper processes: none is left unreaped in the container.
      const zombies = env.exec(`${STACK}-desktop-browser`, LIST_ZOMBIES).trim();
      expect(zombies, "zombie processes in the browser's container").toBe("");
    });
  });
}
