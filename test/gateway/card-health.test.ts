// The gateway's card and /healthz.
import { spawn, type ChildProcess } from "node:child_process";
import { appendFileSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CARD_PATH, WEBSITE_V1_URN, type GatewayCard } from "../../src/protocol/card";
import { startUpstream, type Upstream } from "../helpers/servers";
import { request, startGateway, type GatewayProcess } from "./helpers";

function websiteCard(name: string, live: boolean) {
  return {
    name,
    description: `${name} for tests`,
    version: "1",
    vendorField: { kept: true },
    extensions: [
      {
        uri: WEBSITE_V1_URN,
        params: { domains: [`${name}.test`], live, allowHosts: [] },
        paths: live ? { ready: "/ready", session: "/session" } : { ready: "/ready" },
      },
      { uri: "urn:example:other/v1" },
    ],
  };
}

/** A site server: its card (or a broken one), /ready with a settable status. */
async function siteServer(card: unknown): Promise<Upstream & { ready: { status: number; hits: number } }> {
  const ready = { status: 200, hits: 0 };
  const upstream = await startUpstream((req, res) => {
    if (req.url === CARD_PATH) {
      if (card === undefined) return void res.writeHead(404).end();
      res.writeHead(200, { "Content-Type": "application/json" });
      return void res.end(typeof card === "string" ? card : JSON.stringify(card));
    }
    if (req.url === "/ready") {
      ready.hits++;
      return void res.writeHead(ready.status).end();
    }
    res.end("page");
  });
  return Object.assign(upstream, { ready });
}

describe("gateway card", () => {
  let gateway: GatewayProcess;
  const servers: Upstream[] = [];

  beforeAll(async () => {
    const shop = await siteServer(websiteCard("shop", false));
    const github = await siteServer(websiteCard("github", true));
    const broken = await siteServer("{ not json");
    const wrongShape = await siteServer({ name: "no extensions" });
    const missing = await siteServer(undefined);
    const frontend = await startUpstream((_req, res) => res.end("frontend"));
    servers.push(shop, github, broken, wrongShape, missing, frontend);
    gateway = await startGateway({
      sites: {
        shop: { server: shop.url, frontend: frontend.url },
        github: { server: github.url, live: true },
        broken: { server: broken.url },
        wrongshape: { server: wrongShape.url },
        missing: { server: missing.url },
        down: { server: "http://127.0.0.1:9" },
      },
    });
  });
  afterAll(async () => {
    await gateway?.stop();
    await Promise.all(servers.map((s) => s.close()));
  });

  it("holds each site's own card with its paths under /svc/<site>, and leaves out sites whose card is missing or broken", async () => {
    const answer = await request(gateway.url + CARD_PATH);
    expect(answer.status).toBe(200);
    const card = JSON.parse(answer.body) as GatewayCard;
    expect(card.name).toBe("multienv-gateway");
    expect(card.extensions).toEqual([]); // no capturesDir: no traffic/v1
    expect(Object.keys(card.sites).sort()).toEqual(["github", "shop"]);
    expect(card.sites.shop).toMatchObject({
      name: "shop",
      basePath: "/svc/shop",
      browsePath: "/website/shop/",
      vendorField: { kept: true },
    });
    expect(card.sites.shop.extensions[0]).toEqual({
      uri: WEBSITE_V1_URN,
      params: { domains: ["shop.test"], live: false, allowHosts: [] },
      paths: { ready: "/svc/shop/ready" },
    });
    expect(card.sites.shop.extensions[1]).toEqual({ uri: "urn:example:other/v1" });
    expect(card.sites.github.browsePath).toBeUndefined();
    expect(card.sites.github.extensions[0].paths).toEqual({
      ready: "/svc/github/ready",
      session: "/svc/github/session",
    });
  });

  it("serves the paths the card names", async () => {
    const card = JSON.parse((await request(gateway.url + CARD_PATH)).body) as GatewayCard;
    const ready = await request(gateway.url + card.sites.shop.extensions[0].paths!.ready);
    expect(ready.status).toBe(200);
    const page = await request(gateway.url + card.sites.shop.browsePath!);
    expect(page.body).toBe("frontend");
  });
});

/** A loopback capture the way a sidecar runs it, writing `<dir>/<site>-<role>.pcap<N>`. */
async function capture(dir: string, site: string, role: string, port: number): Promise<ChildProcess> {
  const child = spawn(
    "tcpdump",
    [
      "-i",
      "lo",
      "-U",
      "-Z",
      "root",
      "-w",
      join(dir, `${site}-${role}.pcap`),
      "-C",
      "1",
      "-W",
      "3",
      "tcp",
      "port",
      String(port),
    ],
    {
      stdio: ["ignore", "ignore", "pipe"],
    },
  );
  await new Promise<void>((resolve, reject) => {
    let stderr = "";
    child.stderr!.on("data", (chunk) => {
      stderr += chunk;
      if (stderr.includes("listening on")) resolve();
    });
    child.once("exit", (code) => reject(new Error(`tcpdump exited ${code}: ${stderr}`)));
  });
  return child;
}

describe("gateway /healthz", () => {
  let liveDir: string;
  let staleDir: string;
  let shop: Awaited<ReturnType<typeof siteServer>>;
  let frontend: Upstream;
  const captures: ChildProcess[] = [];
  const gateways: GatewayProcess[] = [];

  const PCAP_HEADER = Buffer.from("d4c3b2a1020004000000000000000000ffff000001000000", "hex");

  beforeAll(async () => {
    liveDir = mkdtempSync(join(tmpdir(), "multienv-health-"));
    staleDir = mkdtempSync(join(tmpdir(), "multienv-health-stale-"));
    shop = await siteServer(websiteCard("shop", false));
    frontend = await startUpstream((_req, res) => res.end("frontend"));
    captures.push(
      await capture(liveDir, "shop", "server", shop.port),
      await capture(liveDir, "shop", "frontend", frontend.port),
    );
  });
  afterAll(async () => {
    await Promise.all(gateways.map((g) => g.stop()));
    for (const child of captures) child.kill("SIGINT");
    await Promise.all([shop?.close(), frontend?.close()]);
    rmSync(liveDir, { recursive: true, force: true });
    rmSync(staleDir, { recursive: true, force: true });
  });

  const gatewayWith = async (config: Record<string, unknown>) => {
    const gateway = await startGateway(config);
    gateways.push(gateway);
    return gateway;
  };

  it("is 200 when every server is ready and every capture is writing", async () => {
    // A freshness window of 1 ms: only packets written during the check itself count, so this
    // proves the check's own traffic (the /ready request, a connection to the frontend) reaches tcpdump.
    const gateway = await gatewayWith({
      sites: { shop: { server: shop.url, frontend: frontend.url } },
      capturesDir: liveDir,
      captureFreshMs: 1,
    });
    const before = shop.ready.hits;
    const answer = await request(`${gateway.url}/healthz`);
    expect(JSON.parse(answer.body)).toEqual({ ok: true, missing: [] });
    expect(answer.status).toBe(200);
    expect(shop.ready.hits).toBe(before + 1);
  });

  it("is 503 naming a site whose server is not ready", async () => {
    const other = await siteServer(websiteCard("other", false));
    other.ready.status = 500;
    const gateway = await gatewayWith({
      sites: { shop: { server: shop.url }, other: { server: other.url }, gone: { server: "http://127.0.0.1:9" } },
    });
    const answer = await request(`${gateway.url}/healthz`);
    expect(answer.status).toBe(503);
    const missing = JSON.parse(answer.body).missing as Array<Record<string, string>>;
    expect(missing.map((m) => `${m.what} ${m.site}`).sort()).toEqual(["ready gone", "ready other"]);
    expect(missing.find((m) => m.site === "other")!.detail).toContain("500");
    await other.close();
  });

  it("is 503 naming each capture that is absent, empty or stale, and 200 again once a stale one grows", async () => {
    // shop: server capture only a header and not touched for 10 minutes; frontend capture missing.
    // cart: server capture an empty file (tcpdump has not written its header).
    const cart = await siteServer(websiteCard("cart", false));
    const stale = join(staleDir, "shop-server.pcap0");
    writeFileSync(stale, PCAP_HEADER);
    const tenMinutesAgo = new Date(Date.now() - 600_000);
    utimesSync(stale, tenMinutesAgo, tenMinutesAgo);
    writeFileSync(join(staleDir, "cart-server.pcap0"), "");
    const gateway = await gatewayWith({
      sites: { shop: { server: shop.url, frontend: frontend.url }, cart: { server: cart.url } },
      capturesDir: staleDir,
      captureFreshMs: 60_000,
    });
    const first = await request(`${gateway.url}/healthz`);
    expect(first.status).toBe(503);
    const missing = JSON.parse(first.body).missing as Array<Record<string, string>>;
    expect(missing.map((m) => `${m.what} ${m.site}-${m.role}`).sort()).toEqual([
      "capture cart-server",
      "capture shop-frontend",
      "capture shop-server",
    ]);
    expect(missing.find((m) => m.site === "shop" && m.role === "server")!.detail).toContain("unchanged since");
    expect(missing.find((m) => m.role === "frontend")!.detail).toContain("no shop-frontend.pcap<N> file");
    expect(missing.find((m) => m.site === "cart")!.detail).toContain("no pcap header");

    // The others appear, and the stale capture grows while the check runs (its modification time still old).
    writeFileSync(join(staleDir, "shop-frontend.pcap0"), PCAP_HEADER);
    writeFileSync(join(staleDir, "cart-server.pcap0"), PCAP_HEADER);
    const pending = request(`${gateway.url}/healthz`);
    await new Promise((resolve) => setTimeout(resolve, 300));
    appendFileSync(stale, Buffer.alloc(64));
    utimesSync(stale, tenMinutesAgo, tenMinutesAgo);
    const second = await pending;
    expect(JSON.parse(second.body)).toEqual({ ok: true, missing: [] });
    expect(second.status).toBe(200);
    await cart.close();
  });
});
