// The demo's deploy suite: what `multienv check` renders, the outputs, the self-test (see target.ts).
import fs from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { readStackFile } from "../../../src/config";
import { episodeOf } from "../../../src/protocol/site-proxy";
import { RESOURCE_TYPES } from "../../../src/protocol/resource-types";
import { renderGraph } from "../../../src/runner/check/graph";
import { deployStack, type StackSpec } from "../../../src/runner";
import { demoHelpers, type DemoTarget } from "./target";

export function deploySuite(t: DemoTarget): void {
  describe("the deploy: what `check` renders, the outputs, the self-test", () => {
    const { STACK, computer, pages, inspect } = demoHelpers(t);

    it("deployed exactly the resources `multienv check` renders for the stack", async () => {
      const env = t.env();
      const file = readStackFile(t.stackFile(), STACK);
      const graph = await renderGraph({ stack: STACK, config: file.rawConfig, secretKeys: file.secretKeys });
      const key = (r: { type: string; name: string }) => `${r.type} ${r.name}`;
      expect((await env.stateResources()).map(key).sort()).toEqual(graph.resources.map(key).sort());
      // Every container the graph declares is on the engine under its name.
      for (const r of graph.resources.filter((r) => r.type === RESOURCE_TYPES.container)) {
        expect((await inspect(String(r.inputs.name))).State.Running).toBe(true);
      }
    });

    it("reports the outputs the program computed as what is running", async () => {
      const env = t.env();
      const out = env.outputs;
      const published = (await inspect(`${STACK}-gateway`)).NetworkSettings.Ports["8080/tcp"][0];
      // Remote hosts: published on the env host's loopback, and the URL is this machine's end of the SSH tunnel.
      if (t.remote) expect(out.gatewayUrl).toBe(`http://127.0.0.1:${t.remote.tunnelPort()}`);
      else expect(out.gatewayUrl).toBe(`http://127.0.0.1:${published.HostPort}`);
      expect(published.HostIp).toBe("127.0.0.1");
      expect(out.live).toBe(true);
      expect(out.reproducible).toBe(false);
      expect(out.liveWebsites).toEqual([
        expect.objectContaining({ name: "github", domains: ["github.com", "*.github.com"], reproducible: false }),
      ]);
      expect((await inspect(`${STACK}-github-server`)).State.Running).toBe(true);
      for (const [site, website] of Object.entries(
        out.websites as Record<string, { live: boolean; svcUrl: string; browseUrl?: string }>,
      )) {
        expect((await inspect(`${STACK}-${site}-server`)).State.Running).toBe(true);
        const auth = { headers: { authorization: `Bearer ${env.token}` } };
        const ready = await fetch(`${website.svcUrl}ready`, auth);
        expect(ready.status).toBe(200);
        if (website.live) expect(website.browseUrl).toBeUndefined();
        else expect((await fetch(website.browseUrl!, auth)).status).toBe(200);
      }
      for (const [name, c] of Object.entries(out.computers as Record<string, { cdpUrl: string }>)) {
        const version = await fetch(`${c.cdpUrl}/json/version`, { headers: { authorization: `Bearer ${env.token}` } });
        expect({ name, status: version.status }).toEqual({ name, status: 200 });
      }
    });

    it("checks each computer from inside at deploy, through its own proxy: results in the outputs and run.json", async () => {
      const env = t.env();
      const selfTest = env.outputs.selfTest;
      expect("passed" in selfTest && selfTest.passed, JSON.stringify(selfTest, null, 2)).toBe(true);
      if (!("passed" in selfTest)) return;
      console.log(
        `self-test: ${selfTest.seconds.toFixed(1)} s (the up that ran it: ${env.selfTestSeconds?.toFixed(1)} s)`,
      );
      const names = (computer: string) => selfTest.computers[computer].map((r) => `${r.check}: ${r.ok}`);
      expect(names("desktop")).toEqual([
        "synthetic shop.test loads over HTTPS with the env CA: true",
        "live github.com connects: true",
        "not-reached.multienv.invalid, off its reaching, is refused: true",
        "the address 169.254.169.254 is refused: true",
      ]);
      expect(names("open")).toEqual([
        // No start tab: its first site's first name.
        "synthetic gist.github.com loads over HTTPS with the env CA: true",
        "live github.com connects: true",
        "the address 169.254.169.254 is refused: true",
        "public example.com is reached: true",
      ]);
      expect(selfTest.startTabs.desktop.map((r) => [r.url, r.ok, r.detail])).toEqual([
        ["https://shop.test/", true, "site shop declares shop.test"],
        ["https://github.com/", true, "site github declares github.com"],
      ]);
      const record = JSON.parse(fs.readFileSync(path.join(t.artifacts, "run.json"), "utf8"));
      expect(record.selfTest).toEqual(selfTest);
      // The self-test's traffic is marked off in the proxy's log: no episode's evidence holds it.
      const log = await (await env.gateway("/computers/open/proxy-log")).text();
      const start = log.lastIndexOf('{"event":"self-test","time"');
      const section = log.slice(log.lastIndexOf('{"event":"self-test","time"', start - 1), start);
      expect(section).toContain('"phase":"start"');
      expect(section).toContain('"host":"example.com"');
      const episode = episodeOf(log);
      for (const line of section.split("\n").filter((l) => l.includes('"event":"connection"')))
        expect(episode).not.toContain(line);
      // It left nothing in the agent's browser: its pages were in a context of their own.
      const open = await computer("open");
      expect(pages(open).map((p) => p.url())).not.toContain("https://example.com/");
      expect(await open.contexts()[0].cookies()).toEqual([]);
    });

    it("fails `up` naming the computer and the check when a check fails, and passes again once the host is back", async () => {
      const env = t.env();
      const standin = env.webStandin("open");
      const standinEngine = env.apiOf(`${STACK}-open-proxy`);
      await standinEngine.getContainer(standin).stop({ t: 1 });
      const changed: StackSpec = {
        ...t.spec(),
        config: { ...t.spec().config, "multienv:selfTest": { publicUrl: "https://example.com/again" } },
      };
      try {
        await expect(deployStack(changed)).rejects.toThrow(/computer open: public example\.com is reached: no answer/);
      } finally {
        await standinEngine.getContainer(standin).start();
      }
      const passed = (await deployStack(changed)).outputs.selfTest;
      expect("passed" in passed && passed.passed).toBe(true);
      await deployStack(t.spec());
    });
  });
}
