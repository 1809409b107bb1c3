// The demo's capture suite: every site's traffic recorded and served behind the token (see target.ts).
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import {
  capturePath,
  PCAP_MEDIA_TYPE,
  TRAFFIC_CAPTURES_PATH,
  type TrafficCaptureListing,
} from "../../../src/protocol/traffic";
import { until } from "../../helpers/until";
import { demoHelpers, type DemoTarget } from "./target";

export function captureSuite(t: DemoTarget): void {
  describe("capture: every site's traffic recorded and served behind the token", () => {
    const { STACK, inspect, websiteContainers } = demoHelpers(t);

    it("captures every website container's traffic, readable with tcpdump, behind the token, with no control token ever reaching a site", async () => {
      const env = t.env();
      // Traffic with the control token: the gateway must strip it before the site sees it.
      const echo = (await (await env.gateway("/svc/shop/echo")).json()) as { headers: Record<string, string> };
      expect(echo.headers.authorization).toBeUndefined();
      expect(JSON.stringify(echo)).not.toContain(env.token);
      // A site's own bearer auth still reaches it.
      const own = (await (
        await env.gateway("/svc/shop/echo", {
          auth: false,
          headers: { authorization: "Bearer site-own", "x-multienv-token": env.token },
        })
      ).json()) as { headers: Record<string, string> };
      expect(own.headers.authorization).toBe("Bearer site-own");
      await env.gateway("/website/shop/");

      expect((await env.gateway(TRAFFIC_CAPTURES_PATH, { auth: false })).status).toBe(401);
      const listing = await until(
        "a capture per website container",
        async () => {
          const files = ((await (await env.gateway(TRAFFIC_CAPTURES_PATH)).json()) as TrafficCaptureListing).captures;
          const containers = new Set(files.map((f) => f.container));
          return websiteContainers().every((c) => containers.has(c) || containers.has(c.slice(STACK.length + 1)))
            ? files
            : undefined;
        },
        30_000,
        250,
      );
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), "multienv-e2e-captures-"));
      const download = async (file: { name: string }) => {
        const res = await env.gateway(capturePath(file.name));
        expect(res.status).toBe(200);
        expect(res.headers.get("content-type")).toContain(PCAP_MEDIA_TYPE);
        const bytes = Buffer.from(await res.arrayBuffer());
        const out = path.join(dir, file.name);
        fs.writeFileSync(out, bytes);
        return { bytes, out };
      };
      // tcpdump hands packets over in blocks (up to a second late): wait for the echo request to be written.
      const shopServerText = await until(
        "the echo request in the shop server's capture",
        async () => {
          const list = ((await (await env.gateway(TRAFFIC_CAPTURES_PATH)).json()) as TrafficCaptureListing).captures;
          let text = "";
          for (const file of list.filter((f) => f.name.startsWith("shop-server"))) {
            text += execFileSync("tcpdump", ["-r", (await download(file)).out, "-A", "-n"], {
              encoding: "utf8",
              stdio: ["ignore", "pipe", "pipe"],
            });
          }
          return text.includes("GET /echo") ? text : undefined;
        },
        20_000,
        1000,
      );
      // The downloaded file reads with tcpdump and holds the echo request made above.
      expect(shopServerText).toContain("GET /echo");
      // No capture holds the control token: it never reached a site.
      for (const file of listing) expect((await download(file)).bytes.includes(Buffer.from(env.token))).toBe(false);

      // No website container mounts the captures volume; only sidecars hold NET_RAW.
      for (const c of websiteContainers()) {
        const info = await inspect(c);
        expect((info.Mounts as { Name?: string }[]).map((m) => m.Name)).not.toContain(`${STACK}-captures`);
      }
      for (const { name } of await env.containers()) {
        if (name.endsWith("-web-standin")) continue;
        const info = await inspect(name);
        const holdsRaw =
          (info.HostConfig.CapAdd ?? []).includes("NET_RAW") || (info.HostConfig.CapAdd ?? []).includes("CAP_NET_RAW");
        expect({ name, holdsRaw }).toEqual({ name, holdsRaw: name.endsWith("-capture") });
        if (!name.endsWith("-capture"))
          expect((info.HostConfig.CapDrop as string[]).some((c) => c === "NET_RAW" || c === "CAP_NET_RAW")).toBe(true);
      }
    });
  });
}
