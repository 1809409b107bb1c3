// traffic/v1 over files real tcpdump wrote, through the protocol client.
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import http from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTcpdump } from "../capture-server/helpers";
import { CARD_PATH } from "../../src/protocol/card";
import { PCAP_MEDIA_TYPE, servesTraffic, TRAFFIC_CAPTURES_PATH } from "../../src/protocol/traffic";
import { GatewayClient } from "../../src/protocol/gateway-client";
import { rawExchange, startUpstream, type Upstream } from "../helpers/servers";
import { request, startGateway, TOKEN, type GatewayProcess } from "./helpers";

const sha256 = (bytes: Buffer) => createHash("sha256").update(bytes).digest("hex");

describe("traffic/v1", () => {
  let dir: string;
  let gateway: GatewayProcess;
  let plain: GatewayProcess;
  let site: Upstream;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "multienv-captures-"));
    const payload = Buffer.alloc(256 * 1024, "x");
    site = await startUpstream((_req, res) => res.end(payload));
    const tcpdump = await startTcpdump(join(dir, "shop-server.pcap"), site.port);
    // About 3.5 MB of loopback traffic: more than the three 1 MB files hold, so tcpdump rotates and overwrites.
    for (let i = 0; i < 14; i++) {
      await new Promise<void>((resolve, reject) =>
        http
          .get(`${site.url}/page/${i}`, { agent: false }, (res) => res.resume().on("end", resolve))
          .on("error", reject),
      );
      await new Promise((resolve) => setTimeout(resolve, 15)); // distinct modification times
    }
    await tcpdump.stop();
    writeFileSync(join(dir, "notes.txt"), "not a capture");
    writeFileSync(join(dir, "shop-server.pcap"), "no rotation index: not a capture");
    symlinkSync("/etc/passwd", join(dir, "evil-server.pcap0"));
    gateway = await startGateway({ sites: { shop: { server: site.url } }, capturesDir: dir });
    plain = await startGateway({ sites: { shop: { server: site.url } } });
  });
  afterAll(async () => {
    await Promise.all([gateway?.stop(), plain?.stop()]);
    await site?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("lists the rotating capture files oldest first with name, site, container, run, bytes and modified time", async () => {
    const captures = await new GatewayClient(gateway.url, TOKEN).captures();
    const onDisk = readdirSync(dir)
      .filter((name) => /^shop-server\.pcap\d$/.test(name))
      .map((name) => ({ name, stat: statSync(join(dir, name)) }))
      .sort((a, b) => a.stat.mtimeMs - b.stat.mtimeMs);
    expect(onDisk.map((f) => f.name).sort()).toEqual(["shop-server.pcap0", "shop-server.pcap1", "shop-server.pcap2"]);
    expect(captures).toEqual(
      onDisk.map((f) => ({
        name: f.name,
        site: "shop",
        role: "server",
        container: "shop-server",
        run: 1,
        bytes: f.stat.size,
        modified: f.stat.mtime.toISOString(),
      })),
    );
    // tcpdump wrapped around: the first file was overwritten, so it is not the oldest.
    expect(captures[0].name).not.toBe("shop-server.pcap0");
    expect(captures.every((c) => c.bytes > 24)).toBe(true);
  });

  it("streams one capture as pcap with its length; it reads back with tcpdump -r", async () => {
    const name = (await new GatewayClient(gateway.url, TOKEN).captures())[0].name;
    const head = await request(`${gateway.url}${TRAFFIC_CAPTURES_PATH}/${name}`, {
      headers: { Authorization: `Bearer ${TOKEN}` },
    });
    expect(head.headers["content-type"]).toBe(PCAP_MEDIA_TYPE);
    expect(Number(head.headers["content-length"])).toBe(statSync(join(dir, name)).size);

    const downloaded = join(dir, "downloaded.pcap");
    const { bytes } = await new GatewayClient(gateway.url, TOKEN).downloadCapture(name, downloaded);
    expect(bytes).toBe(statSync(join(dir, name)).size);
    expect(sha256(readFileSync(downloaded))).toBe(sha256(readFileSync(join(dir, name))));
    const read = spawnSync("tcpdump", ["-nn", "-r", downloaded], { encoding: "utf8" });
    expect(read.status, read.stderr).toBe(0);
    expect(read.stdout.split("\n").filter((line) => line.includes(`.${site.port}`)).length).toBeGreaterThan(10);
  });

  it("fetches into a stream as well as a file", async () => {
    const sink = new PassThrough();
    const chunks: Buffer[] = [];
    sink.on("data", (chunk) => chunks.push(chunk));
    const { bytes } = await new GatewayClient(gateway.url, TOKEN).downloadCapture("shop-server.pcap1", sink);
    expect(sha256(Buffer.concat(chunks))).toBe(sha256(readFileSync(join(dir, "shop-server.pcap1"))));
    expect(bytes).toBe(chunks.reduce((n, c) => n + c.length, 0));
  });

  it("refuses names that escape the folder or are not capture files", async () => {
    const auth = `Authorization: Bearer ${TOKEN}\r\n`;
    for (const [path, status] of [
      ["/traffic/v1/captures/../../etc/passwd", 400],
      ["/traffic/v1/captures/..%2F..%2Fetc%2Fpasswd", 400],
      ["/traffic/v1/captures/%2e%2e", 400],
      ["/traffic/v1/captures/notes.txt", 400],
      ["/traffic/v1/captures/shop-server.pcap", 400],
      ["/traffic/v1/captures/shop-server.pcap0%00.txt", 400],
      ["/traffic/v1/captures/evil-server.pcap0", 404], // a link out of the folder, though its name fits
      ["/traffic/v1/captures/shop-frontend.pcap0", 404],
    ] as const) {
      const response = (
        await rawExchange(gateway.port, `GET ${path} HTTP/1.1\r\nHost: gw\r\n${auth}Connection: close\r\n\r\n`)
      ).toString("latin1");
      expect(response.split("\r\n")[0], path).toMatch(new RegExp(`^HTTP/1.1 ${status} `));
      expect(response, path).not.toContain("root:");
    }
    const listed = (await new GatewayClient(gateway.url, TOKEN).captures()).map((c) => c.name);
    expect(listed).not.toContain("evil-server.pcap0");
    expect(listed).not.toContain("notes.txt");
  });

  it("declares traffic/v1 in the card only when captures are configured", async () => {
    const withCaptures = JSON.parse((await request(gateway.url + CARD_PATH)).body);
    const without = JSON.parse((await request(plain.url + CARD_PATH)).body);
    expect(servesTraffic(withCaptures)).toBe(true);
    expect(servesTraffic(without)).toBe(false);
    const traffic = withCaptures.extensions.find((e: { uri: string }) => e.uri === "urn:agentenv:traffic/v1");
    expect(traffic.paths.list).toBe(TRAFFIC_CAPTURES_PATH);
    const answer = await request(plain.url + TRAFFIC_CAPTURES_PATH, { headers: { Authorization: `Bearer ${TOKEN}` } });
    expect(answer.status).toBe(404);
  });

  it("reports a wrong token as an error from the client helpers", async () => {
    await expect(new GatewayClient(gateway.url, "wrong-token").captures()).rejects.toThrow(/401/);
  });
});
