// The demo's browsing suite: what a computer's browser opens and loads (see target.ts for what a target gives it).
import fs from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { screenshotStack } from "../../../src/runner";
import { signIn, signOut } from "../../../src/runner/lifecycle/sign-in";
import { TAKEN_OVER_ERROR_CODE } from "../../../src/protocol/takeover";
import { until } from "../../helpers/until";
import { personTypesInTakeover } from "../helpers/takeover";
import { demoHelpers, type DemoTarget } from "./target";

export function browsingSuite(t: DemoTarget): void {
  describe("browsing: what a computer's browser opens and loads, through its proxy and the gateway", () => {
    const { STACK, computer, pages } = demoHelpers(t);
    it("opens the start tabs: the synthetic shop through proxy and gateway, github.com tunnelled to its stand-in; read over DevTools with the token", async () => {
      const env = t.env();
      const unauthorized = await env.gateway("/computers/desktop/cdp/json/version", { auth: false });
      expect(unauthorized.status).toBe(401);

      const desktop = await computer("desktop");
      const titles = await until(
        "both start tabs loaded",
        async () => {
          const byUrl = new Map<string, string>();
          for (const page of pages(desktop)) byUrl.set(page.url(), await page.title());
          return byUrl.get("https://shop.test/") === "Synthetic shop" &&
            byUrl.get("https://github.com/") === "GitHub stand-in"
            ? byUrl
            : undefined;
        },
        30_000,
        250,
      );
      expect(titles.get("https://shop.test/")).toBe("Synthetic shop");
      expect(titles.get("https://github.com/")).toBe("GitHub stand-in");
      // github.com went straight to the (stand-in) site in a tunnel: the stand-in itself answered the page.
      // (The proxy logs a connection when it ends; Chromium keeps this one open, so its log line may not exist yet.)
      const standin = env.docker(`${STACK}-desktop-proxy`, ["logs", env.webStandin("desktop")]);
      expect(standin).toContain('"event":"request","host":"github.com","method":"GET","url":"/"');

      // No certificate error: the shop's leaf came from the env CA, and the page's TLS state says so.
      const shop = pages(desktop).find((p) => p.url() === "https://shop.test/")!;
      const cdp = await shop.context().newCDPSession(shop);
      const nav = await cdp.send("Runtime.evaluate", {
        expression: "performance.getEntriesByType('navigation')[0].responseStatus",
        returnByValue: true,
      });
      expect(nav.result.value).toBe(200);
      expect(await shop.textContent("#host")).toContain("shop.test");
    });

    it("takes a screenshot of the desktop's tab on screen: a PNG of one of its start tabs, with its URL", async () => {
      const [shot] = await screenshotStack(STACK, { computer: "desktop" });
      expect(path.dirname(shot.file)).toBe(path.join(t.artifacts, "screenshots"));
      expect(["https://shop.test/", "https://github.com/"]).toContain(shot.url);
      const png = fs.readFileSync(shot.file);
      expect(png.length).toBe(shot.bytes);
      expect(png.subarray(0, 8)).toEqual(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]));
    });

    it("lets a person take a computer over from watch: the agent's acting commands refused naming the takeover, the person's click and keys in the page, handed back with the record", async () => {
      const env = t.env();
      const seen = await personTypesInTakeover({
        stack: STACK,
        access: { gatewayUrl: env.gatewayUrl, controlToken: env.token },
        computer: "open",
        operator: "kim",
        text: "demo",
      });
      for (const { method, error } of seen.refused)
        expect(error, method).toMatchObject({ code: TAKEN_OVER_ERROR_CODE, message: expect.stringContaining("kim") });
      expect(seen.typed).toBe("demo");
      expect(seen.record).toMatchObject({ computer: "open", operator: "kim", keys: 4 });
      expect(seen.record.inputs.filter((i) => i.kind === "pointer")).toHaveLength(2);
    }, 180_000);

    it("refuses example.com on the allowlist computer (403 logged, Chromium's error page) and loads it on the allow-all one", async () => {
      const env = t.env();
      const desktop = await computer("desktop");
      const page = await desktop.contexts()[0].newPage();
      const refused = await page.goto("https://example.com/").then(
        () => "loaded",
        (e: Error) => e.message,
      );
      expect(refused).toMatch(/ERR_TUNNEL_CONNECTION_FAILED|ERR_PROXY|ERR_/);
      expect(await page.title()).not.toBe("Example Domain stand-in");
      await page.close();
      const log = await until(
        "the refusal in the proxy log",
        async () => (await env.proxyLog("desktop")).find((r) => r.event === "refused" && r.host === "example.com"),
        30_000,
        250,
      );
      expect(log).toMatchObject({ event: "refused", host: "example.com" });

      const open = await computer("open");
      const openPage = await open.contexts()[0].newPage();
      const response = await openPage.goto("https://example.com/");
      expect(response?.status()).toBe(200);
      expect(await openPage.title()).toBe("Example Domain stand-in");
      await openPage.close();
    });

    it("answers gist.github.com from the synthetic site inside the live *.github.com", async () => {
      const desktop = await computer("desktop");
      const page = await desktop.contexts()[0].newPage();
      const response = await page.goto("https://gist.github.com/");
      expect(response?.status()).toBe(200);
      expect(await page.title()).toBe("Synthetic shop");
      expect(await page.textContent("#host")).toContain("gist.github.com");
      // A live name beside it still goes to the (stand-in) real site.
      await page.goto("https://github.com/");
      expect(await page.title()).toBe("GitHub stand-in");
      await page.close();
    });

    it("signs the computer in to the live site with the session its server gives, and out again", async () => {
      const env = t.env();
      const access = { gatewayUrl: env.gatewayUrl, controlToken: env.token };
      expect(await signIn({ access, site: "github", computer: "desktop" })).toMatchObject({ cookies: 1 });
      const desktop = await computer("desktop");
      const page = await desktop.contexts()[0].newPage();
      // The stand-in echoes the request's headers: the real site would see the session cookie.
      await page.goto("https://github.com/headers");
      const sent = JSON.parse((await page.textContent("body")) ?? "{}") as Record<string, string>;
      expect(sent.cookie).toContain("user_session=alex");
      await signOut({ access, site: "github", computer: "desktop", domains: ["github.com", "*.github.com"] });
      await page.goto("https://github.com/headers");
      const after = JSON.parse((await page.textContent("body")) ?? "{}") as Record<string, string>;
      expect(after.cookie ?? "").not.toContain("user_session");
      await page.close();
    });
  });
}
