// traffic/v1 through capture servers (`captureSources`): two real capture servers over folders real tcpdump writes,
// and the gateway reading them.
import { createHash } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import http from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { captureServerToken } from "../../src/protocol/auth";
import { CARD_PATH } from "../../src/protocol/card";
import { PCAP_MEDIA_TYPE, servesTraffic, TRAFFIC_CAPTURES_PATH, type TrafficCapture } from "../../src/protocol/traffic";
import { GatewayClient } from "../../src/protocol/gateway-client";
import { startCaptureServer, startTcpdump, type CaptureServerProcess } from "../capture-server/helpers";
import { echoHandler, rawExchange, startUpstream, type Echo, type Upstream } from "../helpers/servers";
import { CONTROL, request, runGatewayExpectingExit, startGateway, TOKEN, type GatewayProcess } from "./helpers";

const sha256 = (bytes: Buffer) => createHash("sha256").update(bytes).digest("hex");
const AUTH = { Authorization: `Bearer ${TOKEN}` };

/** A site server answering /ready 200 and echoing everything else. */
function siteHandler(): http.RequestListener {
  const echo = echoHandler("site");
  return (req, res) => (req.url === "/ready" ? void res.writeHead(200).end() : echo(req, res));
}

async function get(url: string): Promise<void> {
  await new Promise<void>((resolve, reject) =>
    http.get(url, { agent: false, headers: CONTROL }, (res) => res.resume().on("end", resolve)).on("error", reject),
  );
}

describe("traffic/v1 through capture servers", () => {
  let serverDir: string;
  let frontendDir: string;
  let site: Upstream;
  let frontend: Upstream;
  let tcpdumps: Array<{ stop(): Promise<void> }>;
  let serverCaptures: CaptureServerProcess;
  let frontendCaptures: CaptureServerProcess;
  let gateway: GatewayProcess;
  let halfDown: GatewayProcess;

  const sites = () => ({ shop: { server: site.url, frontend: frontend.url } });

  beforeAll(async () => {
    // Each container's captures in a folder of their own, as in its own pod.
    serverDir = mkdtempSync(join(tmpdir(), "multienv-sources-server-"));
    frontendDir = mkdtempSync(join(tmpdir(), "multienv-sources-frontend-"));
    site = await startUpstream(siteHandler());
    frontend = await startUpstream((_req, res) => res.end(Buffer.alloc(64 * 1024, "f")));
    tcpdumps = await Promise.all([
      startTcpdump(join(serverDir, "shop-server.pcap"), site.port),
      startTcpdump(join(frontendDir, "shop-frontend.pcap"), frontend.port),
    ]);
    for (let i = 0; i < 6; i++) {
      await get(`${site.url}/page/${i}`);
      await get(`${frontend.url}/page/${i}`);
    }
    // tcpdump hands its packets over in blocks: on a busy machine the files hold only their header for a moment.
    for (const file of [join(serverDir, "shop-server.pcap0"), join(frontendDir, "shop-frontend.pcap0")]) {
      const deadline = Date.now() + 10_000;
      while (Date.now() < deadline && !(existsSync(file) && statSync(file).size > 24))
        await new Promise((r) => setTimeout(r, 50));
    }
    // Fresh within 1 ms only: /healthz passes only if the gateway's own probes reach the files between two looks.
    [serverCaptures, frontendCaptures] = await Promise.all([
      startCaptureServer(serverDir, "shop-server", { captureFreshMs: 1 }),
      startCaptureServer(frontendDir, "shop-frontend", { captureFreshMs: 1 }),
    ]);
    [gateway, halfDown] = await Promise.all([
      startGateway({
        sites: sites(),
        captureSources: { "shop-server": serverCaptures.url, "shop-frontend": frontendCaptures.url },
      }),
      startGateway({
        sites: sites(),
        captureSources: { "shop-server": serverCaptures.url, "shop-frontend": "http://127.0.0.1:9" },
      }),
    ]);
  });
  afterAll(async () => {
    await Promise.all([gateway?.stop(), halfDown?.stop(), serverCaptures?.stop(), frontendCaptures?.stop()]);
    await Promise.all((tcpdumps ?? []).map((t) => t.stop()));
    await Promise.all([site?.close(), frontend?.close()]);
    rmSync(serverDir, { recursive: true, force: true });
    rmSync(frontendDir, { recursive: true, force: true });
  });

  const sourceListing = async (source: CaptureServerProcess): Promise<TrafficCapture[]> =>
    JSON.parse((await request(`${source.url}/captures`, { headers: { Authorization: `Bearer ${source.token}` } })).body)
      .captures;

  it("lists every source's captures merged, oldest first by modified time then name", async () => {
    const [merged, own, other] = await Promise.all([
      new GatewayClient(gateway.url, TOKEN).captures(),
      sourceListing(serverCaptures),
      sourceListing(frontendCaptures),
    ]);
    expect(own.length).toBeGreaterThan(0);
    expect(other.length).toBeGreaterThan(0);
    const expected = [...own, ...other].sort(
      (a, b) => Date.parse(a.modified) - Date.parse(b.modified) || a.name.localeCompare(b.name),
    );
    // tcpdump may append between the looks: compare what does not move.
    const stable = (captures: TrafficCapture[]) =>
      captures.map(({ name, container, run }) => ({ name, container, run }));
    expect(stable(merged)).toEqual(stable(expected));
    expect(new Set(merged.map((c) => c.container))).toEqual(new Set(["shop-server", "shop-frontend"]));
  });

  it("streams a capture from its container's source, byte for byte with its length, and HEAD", async () => {
    for (const [dir, name] of [
      [serverDir, "shop-server.pcap0"],
      [frontendDir, "shop-frontend.pcap0"],
    ] as const) {
      const sink = new PassThrough();
      const chunks: Buffer[] = [];
      sink.on("data", (chunk: Buffer) => chunks.push(chunk));
      // The file may still grow (the capture is live): read it back right after.
      const { bytes } = await new GatewayClient(gateway.url, TOKEN).downloadCapture(name, sink);
      const file = readFileSync(join(dir, name));
      expect(bytes).toBe(Buffer.concat(chunks).length);
      expect(sha256(Buffer.concat(chunks))).toBe(sha256(file.subarray(0, bytes)));
      expect(bytes).toBeGreaterThan(24);
      const head = await request(`${gateway.url}${TRAFFIC_CAPTURES_PATH}/${name}`, { method: "HEAD", headers: AUTH });
      expect(head.status).toBe(200);
      expect(head.headers["content-type"]).toBe(PCAP_MEDIA_TYPE);
      expect(Number(head.headers["content-length"])).toBeGreaterThanOrEqual(bytes);
      expect(Number(head.headers["content-length"])).toBeLessThanOrEqual(statSync(join(dir, name)).size);
      expect(head.body).toBe("");
    }
  });

  it("answers 404 for a capture of a container it has no source for, and passes on a source's 404", async () => {
    const unknown = await request(`${gateway.url}${TRAFFIC_CAPTURES_PATH}/cart-server.pcap0`, { headers: AUTH });
    expect(unknown.status).toBe(404);
    expect(JSON.parse(unknown.body)).toMatchObject({ error: "unknown container", container: "cart-server" });
    const absent = await request(`${gateway.url}${TRAFFIC_CAPTURES_PATH}/shop-server.run7.pcap0`, { headers: AUTH });
    expect(absent.status).toBe(404);
  });

  it("answers 502 naming the container whose source does not answer, never a partial listing", async () => {
    const answer = await request(halfDown.url + TRAFFIC_CAPTURES_PATH, { headers: AUTH });
    expect(answer.status).toBe(502);
    const body = JSON.parse(answer.body);
    expect(body).toMatchObject({ error: "capture server failed", containers: ["shop-frontend"] });
    expect(body.detail).toContain("shop-frontend");
    expect(body.captures).toBeUndefined();
    await expect(new GatewayClient(halfDown.url, TOKEN).captures()).rejects.toThrow(/502/);
    // The source that answers still serves its files.
    const file = await request(`${halfDown.url}${TRAFFIC_CAPTURES_PATH}/shop-server.pcap0`, { headers: AUTH });
    expect(file.status).toBe(200);
    const down = await request(`${halfDown.url}${TRAFFIC_CAPTURES_PATH}/shop-frontend.pcap0`, { headers: AUTH });
    expect(down.status).toBe(502);
    expect(JSON.parse(down.body)).toMatchObject({ container: "shop-frontend" });
  });

  it("requires the control token and refuses names a client would have normalised, on the raw socket", async () => {
    expect((await request(gateway.url + TRAFFIC_CAPTURES_PATH, { control: false })).status).toBe(401);
    const withSourceToken = await request(gateway.url + TRAFFIC_CAPTURES_PATH, {
      headers: { Authorization: `Bearer ${serverCaptures.token}` },
      control: false,
    });
    expect(withSourceToken.status).toBe(401);
    for (const path of [
      "/traffic/v1/captures/../x",
      "/traffic/v1/captures/%2e%2e%2fx",
      "/traffic/v1/captures/%2e%2e",
      "/traffic/v1/captures/..%2Fshop-server.pcap0",
      "/traffic/v1/captures/shop-server.pcap0%2f..%2fhealthz",
    ]) {
      const response = (
        await rawExchange(
          gateway.port,
          `GET ${path} HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer ${TOKEN}\r\nConnection: close\r\n\r\n`,
        )
      ).toString("latin1");
      expect(response.split("\r\n")[0], path).toMatch(/^HTTP\/1.1 400 /);
    }
  });

  it("declares traffic/v1 in its card", async () => {
    expect(servesTraffic(JSON.parse((await request(gateway.url + CARD_PATH)).body))).toBe(true);
  });

  it("never lets a site see a capture server's token", async () => {
    const token = captureServerToken(TOKEN, "shop-server");
    const answer = await request(`${gateway.url}/svc/shop/echo`, { headers: { Authorization: `Bearer ${token}` } });
    expect(answer.status).toBe(200);
    expect((JSON.parse(answer.body) as Echo).rawHeaders.join("\n")).not.toContain(token);
  });

  it("is healthy while every source's capture grows with the probes' traffic, and 503 naming the one that stops", async () => {
    const healthy = await request(`${gateway.url}/healthz`);
    expect(JSON.parse(healthy.body)).toEqual({ ok: true, missing: [] });
    expect(healthy.status).toBe(200);
    const again = await request(`${gateway.url}/healthz`);
    expect(again.status).toBe(200);

    await tcpdumps[1].stop(); // the frontend's capture stops
    const stopped = await request(`${gateway.url}/healthz`);
    expect(stopped.status).toBe(503);
    const missing = JSON.parse(stopped.body).missing as Array<Record<string, string>>;
    expect(missing).toHaveLength(1);
    expect(missing[0]).toMatchObject({ what: "capture", site: "shop", role: "frontend" });
    expect(missing[0].detail).toMatch(/^shop-frontend\.pcap\d unchanged since /);

    const down = await request(`${halfDown.url}/healthz`);
    expect(down.status).toBe(503);
    const downMissing = JSON.parse(down.body).missing as Array<Record<string, string>>;
    expect(downMissing.map((m) => `${m.what} ${m.site}-${m.role}`)).toEqual(["capture shop-frontend"]);
    expect(downMissing[0].detail).toMatch(/^capture server http:\/\/127\.0\.0\.1:9\/healthz did not answer/);
  });
});

describe("captureSources in the gateway's config", () => {
  const config = (extra: Record<string, unknown>) =>
    JSON.stringify({
      listen: { host: "127.0.0.1", port: 0 },
      sites: { shop: { server: "http://127.0.0.1:1", frontend: "http://127.0.0.1:2" } },
      ...extra,
    });
  const run = (extra: Record<string, unknown>) =>
    runGatewayExpectingExit({ MULTIENV_GATEWAY_CONFIG: config(extra), MULTIENV_CONTROL_TOKEN: TOKEN });
  const both = { "shop-server": "http://127.0.0.1:8090", "shop-frontend": "http://127.0.0.1:8091" };

  it("refuses capturesDir and captureSources together, in one line naming both", async () => {
    const { code, stderr } = await run({ capturesDir: "/captures", captureSources: both });
    expect(code).toBe(2);
    expect(stderr.trim().split("\n")).toHaveLength(1);
    expect(stderr).toMatch(
      /^multienv-gateway: MULTIENV_GATEWAY_CONFIG\.captureSources: capturesDir and captureSources are both set/,
    );
  });

  it("refuses a source that is no website container, and a website container without one", async () => {
    const { code, stderr } = await run({
      captureSources: {
        "shop-server": "http://127.0.0.1:8090",
        "cart-server": "http://x:1",
        shop: "http://x:1",
        "shop-agent": "ftp://x",
      },
    });
    expect(code).toBe(2);
    expect(stderr.trim().split("\n")).toHaveLength(1);
    expect(stderr).toContain("MULTIENV_GATEWAY_CONFIG.captureSources.shop-agent: expected an http:// URL");
    const second = await run({
      captureSources: { "shop-server": "http://127.0.0.1:8090", "cart-server": "http://x:1", shop: "http://x:1" },
    });
    expect(second.stderr).toContain("MULTIENV_GATEWAY_CONFIG.captureSources.cart-server: no site cart in sites");
    expect(second.stderr).toContain("MULTIENV_GATEWAY_CONFIG.captureSources.shop: not a website container");
    expect(second.stderr).toContain("MULTIENV_GATEWAY_CONFIG.captureSources: no capture server for shop-frontend");
  });
});
