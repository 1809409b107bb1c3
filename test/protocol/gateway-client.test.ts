// The gateway client against the real gateway process on loopback: each operation of the gateway's contract as the
// runner, the providers and the benches ask it, a token the gateway refuses, answers that are not what the gateway
// serves, and the control token kept out of every error line, even when a hostile site echoes it back. Every path a
// method of the client asks is also given to the gateway's own route parser, which must send it where that method
// means (both build on src/protocol/gateway-paths.ts), and every method of the contract is asked here.
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import http, { createServer } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { route, type Route } from "../../src/gateway/routes";
import { CARD_PATH, WEBSITE_OPERATIONS, WEBSITE_V1_URN } from "../../src/protocol/card";
import { GatewayClient, GatewayRequestError } from "../../src/protocol/gateway-client";
import { GATEWAY_IDLE_CONNECTION_MS } from "../../src/protocol/gateway-config";
import { freePort } from "../helpers/ports";
import { cleanup, onCleanup, tempDir } from "../helpers/processes";
import { startUpstream, type Upstream } from "../helpers/servers";
import { startGateway, TOKEN, type GatewayProcess } from "../gateway/helpers";

const LOG = Buffer.from('{"event":"startup"}\n{"event":"connection","host":"shop.test"}\n');
const PCAP = Buffer.alloc(4096, 7);

function json(res: http.ServerResponse, body: unknown, status = 200): void {
  res.writeHead(status, { "Content-Type": "application/json" }).end(JSON.stringify(body));
}

/** The shop's server: its card (a reset operation, a session), /ready as told, its data, and a page that is HTML. */
function shopServer(state: { ready: number; resets: number }) {
  return (req: http.IncomingMessage, res: http.ServerResponse) => {
    const path = req.url ?? "";
    if (path === CARD_PATH)
      return json(res, {
        name: "shop",
        extensions: [
          {
            uri: WEBSITE_V1_URN,
            params: { domains: ["shop.test"], live: false },
            paths: { ready: "/ready", [WEBSITE_OPERATIONS.reset]: "/reset", session: "/session" },
          },
        ],
      });
    if (path === "/ready") return void res.writeHead(state.ready).end();
    if (path === "/reset" && req.method === "POST") return void (state.resets++, res.writeHead(204).end());
    if (path === "/session") return json(res, { cookies: [], origins: [] });
    if (path === "/data") return json(res, { orders: [{ sku: "mug" }] });
    // A hostile site that learned the control token and puts it in its error page.
    if (path === "/leak") return void res.writeHead(500).end(`denied for Bearer ${TOKEN}`);
    res.writeHead(200, { "Content-Type": "text/html" }).end("<html>a page</html>");
  };
}

/** A computer's site-proxy control listener as the gateway reaches it: DevTools' HTTP side, its logs, its launcher. */
function computerListener(seen: string[]) {
  return (req: http.IncomingMessage, res: http.ServerResponse) => {
    const path = req.url ?? "";
    seen.push(`${req.method} ${path}`);
    if (path === "/cdp/json/version")
      return json(res, { Browser: "Chrome/1", webSocketDebuggerUrl: "ws://127.0.0.1:9/devtools/browser/b" });
    if (path === "/cdp/json/list")
      return json(res, [
        { id: "T1", type: "page", url: "https://shop.test/", title: "Shop" },
        { id: "W1", type: "service_worker", url: "https://shop.test/sw.js", title: "" },
      ]);
    if (path === "/cdp/json/activate/T1") return void res.end("Target activated");
    if (path === "/cdp/multienv/blank-tab" && req.method === "POST") return json(res, {});
    if (path.startsWith("/connections/end")) return json(res, { ended: 3 });
    if (path === "/requests")
      return void res.writeHead(200, { "Content-Type": "application/x-ndjson" }).end('{"a":1}\n{"a":2}\n');
    if (path === "/log") {
      const range = /^bytes=(\d*)-(\d*)$/.exec(String(req.headers.range ?? ""));
      if (range === null) return void res.end(LOG);
      const start = range[1] === "" ? LOG.length - Number(range[2]) : Number(range[1]);
      if (start >= LOG.length) return void res.writeHead(416, { "Content-Range": `bytes */${LOG.length}` }).end();
      return void res
        .writeHead(206, { "Content-Range": `bytes ${start}-${LOG.length - 1}/${LOG.length}` })
        .end(LOG.subarray(start));
    }
    res.writeHead(404).end();
  };
}

/** A replayed site's control listener; `broken` answers counters that are not numbers. */
function replayListener(broken: boolean) {
  return (req: http.IncomingMessage, res: http.ServerResponse) => {
    if (req.url === "/replay/v1/counters")
      return json(res, broken ? { exact: "many" } : { exact: 1, fuzzy: 2, missed: 3 });
    if (req.url === "/replay/v1/reset" && req.method === "POST")
      return json(res, { ended: { exact: 1, fuzzy: 2, missed: 3 } });
    res.writeHead(404).end();
  };
}

/** Where the gateway must route each method's requests: what its route parser says of the path the method asked. */
const ROUTE_OF_METHOD: Record<string, Partial<Route>> = {
  card: { kind: "card" },
  health: { kind: "healthz" },
  siteReady: { kind: "site", via: "svc" },
  siteOperation: { kind: "site", via: "svc" },
  siteJson: { kind: "site", via: "svc" },
  siteSession: { kind: "site", via: "svc" },
  devtoolsAnswers: { kind: "computer", op: "cdp" },
  devtoolsTargets: { kind: "computer", op: "cdp" },
  activateTab: { kind: "computer", op: "cdp" },
  browserOperation: { kind: "computer", op: "cdp" },
  proxyLog: { kind: "computer", op: "proxy-log" },
  proxyLogPiece: { kind: "computer", op: "proxy-log" },
  endConnections: { kind: "computer", op: "end-connections" },
  requestLogs: { kind: "request-logs" },
  requestLog: { kind: "request-log" },
  captures: { kind: "captures" },
  downloadCapture: { kind: "capture" },
  replayCounters: { kind: "replay", op: "counters" },
  resetReplay: { kind: "replay", op: "reset" },
  take: { kind: "takeover" },
  renew: { kind: "takeover" },
  handBack: { kind: "takeover" },
  takeovers: { kind: "takeovers" },
};
/** The client's own plumbing and the URLs it hands out: no request of the contract of their own. */
const NOT_REQUESTS = ["constructor", "urlOf", "cdpUrl", "authorization", "send", "failure", "ok", "json", "parse"];

/** The methods of the contract the clients of this file were asked. */
const asked = new Set<string>();
/** The method of the contract running now (its request is sent before its first await). */
let asking: string | undefined;

/**
 * A client whose every request is checked against the gateway's route parser before it is sent: the path must route
 * where the method that asked it means (ROUTE_OF_METHOD), else the method fails with the two named.
 */
function checkedClient(url: string, token: string): GatewayClient {
  const client = new (class extends GatewayClient {
    override send(...args: Parameters<GatewayClient["send"]>): ReturnType<GatewayClient["send"]> {
      const [, path] = args;
      const method = asking ?? "send";
      const routed = route(path);
      if (ROUTE_OF_METHOD[method] === undefined)
        throw new Error(`${method} asked ${path}: not a method of the contract`);
      expect(routed, `${method} asked ${path}`).toMatchObject(ROUTE_OF_METHOD[method]);
      return super.send(...args);
    }
  })(url, token);
  return new Proxy(client, {
    get(target, property) {
      const value: unknown = Reflect.get(target, property, target);
      if (typeof value !== "function") return value;
      // The private token needs the client itself as `this`.
      if (typeof property !== "string" || NOT_REQUESTS.includes(property)) return value.bind(target);
      return (...args: unknown[]) => {
        const outer = asking;
        asking ??= property;
        asked.add(property);
        try {
          return (value as (...a: unknown[]) => unknown).apply(target, args);
        } finally {
          asking = outer;
        }
      };
    },
  });
}

describe("the gateway client", () => {
  const shop = { ready: 200, resets: 0 };
  const seen: string[] = [];
  const upstreams: Upstream[] = [];
  let gateway: GatewayProcess;
  let client: GatewayClient;

  beforeAll(async () => {
    const [site, computer, replay, brokenReplay] = await Promise.all([
      startUpstream(shopServer(shop)),
      startUpstream(computerListener(seen)),
      startUpstream(replayListener(false)),
      startUpstream(replayListener(true)),
    ]);
    upstreams.push(site, computer, replay, brokenReplay);
    gateway = await startGateway({
      sites: { shop: { server: site.url }, github: { server: site.url }, broken: { server: site.url } },
      computers: {
        agent: {
          cdp: `${computer.url}/cdp`,
          proxyLog: `${computer.url}/log`,
          endConnections: `${computer.url}/connections/end`,
          requests: `${computer.url}/requests`,
        },
      },
      replays: { github: replay.url, broken: brokenReplay.url },
    });
    client = checkedClient(`${gateway.url}/`, TOKEN);
  });
  afterAll(async () => {
    await gateway?.stop();
    await Promise.all(upstreams.map((u) => u.close()));
    await cleanup();
  });

  it("reads the card, with each site's card under /svc/<site>", async () => {
    const card = await client.card();
    expect(Object.keys(card.sites).sort()).toEqual(["broken", "github", "shop"]);
    expect(JSON.stringify(card.sites.shop)).toContain("/svc/shop/reset");
  });

  it("says the gateway's health, and what is missing when a site is not ready", async () => {
    expect(await checkedClient(gateway.url, "").health()).toEqual({ ok: true, status: 200 });
    shop.ready = 503;
    try {
      const health = await client.health();
      expect(health).toMatchObject({ ok: false, status: 503 });
      expect(health.missing?.map((m) => m.site)).toContain("shop");
      expect(await client.siteReady("shop")).toBe(false);
    } finally {
      shop.ready = 200;
    }
    expect(await client.siteReady("shop")).toBe(true);
  });

  it("runs a site's operation, reads its session and its JSON", async () => {
    const before = shop.resets;
    await client.siteOperation("the shop's reset", "/svc/shop/reset");
    expect(shop.resets).toBe(before + 1);
    expect(await client.siteSession("shop")).toEqual({ cookies: [], origins: [] });
    expect(await client.siteJson("shop", "/data")).toEqual({ orders: [{ sku: "mug" }] });
  });

  it("asks a computer's DevTools and browser launcher through the gateway", async () => {
    expect(client.cdpUrl("agent")).toBe(`${gateway.url}/computers/agent/cdp`);
    expect(await client.devtoolsAnswers("agent")).toBe(true);
    expect(await client.devtoolsAnswers("nobody")).toBe(false);
    const targets = await client.devtoolsTargets("agent", "the tabs");
    expect(targets.map((t) => [t.id, t.type])).toEqual([
      ["T1", "page"],
      ["W1", "service_worker"],
    ]);
    await client.activateTab("agent", "T1", "the tab to the front");
    expect(await client.browserOperation("agent", "/multienv/blank-tab", "a blank tab")).toEqual({});
  });

  it("reads a computer's site-proxy log whole and by range, and ends its connections with a mark", async () => {
    expect(await client.proxyLog("agent")).toBe(LOG.toString());
    const tail = await client.proxyLogPiece("agent", { last: 10 });
    expect(tail).toEqual({ start: LOG.length - 10, bytes: LOG.subarray(-10), size: LOG.length });
    expect(await client.proxyLogPiece("agent", { from: LOG.length })).toEqual({
      start: LOG.length,
      bytes: Buffer.alloc(0),
      size: LOG.length,
    });
    expect(await client.endConnections("agent", { episode: 2 })).toBe(3);
    expect(seen).toContain("POST /connections/end?episode=2");
  });

  it("streams a computer's request log, and says when the computer keeps none", async () => {
    const log = await client.requestLog("agent");
    const chunks: Buffer[] = [];
    for await (const chunk of log!) chunks.push(chunk as Buffer);
    expect(Buffer.concat(chunks).toString()).toBe('{"a":1}\n{"a":2}\n');
    expect(await client.requestLogs()).toEqual(["agent"]);
    const plain = await startGateway({ sites: {}, computers: { nolog: { cdp: `${upstreams[1].url}/cdp` } } });
    onCleanup(() => plain.stop());
    expect(await checkedClient(plain.url, TOKEN).requestLog("nolog")).toBeUndefined();
  });

  it("lists the captures and downloads one whole", async () => {
    const capturesDir = tempDir("client-captures-");
    writeFileSync(join(capturesDir, "shop-server.pcap0"), PCAP);
    const capturing = await startGateway({ sites: { shop: { server: upstreams[0].url } }, capturesDir });
    onCleanup(() => capturing.stop());
    const client = checkedClient(capturing.url, TOKEN);
    const captures = await client.captures();
    expect(captures.map((c) => [c.name, c.bytes])).toEqual([["shop-server.pcap0", PCAP.length]]);
    const file = join(tempDir("client-download-"), "shop-server.pcap0");
    expect(await client.downloadCapture("shop-server.pcap0", file)).toEqual({ bytes: PCAP.length });
    expect(readFileSync(file).equals(PCAP)).toBe(true);
  });

  it("reads and resets a replayed site's counters, and refuses counters that are not numbers", async () => {
    expect(await client.replayCounters("github")).toEqual({ exact: 1, fuzzy: 2, missed: 3 });
    expect(await client.resetReplay("github")).toEqual({ exact: 1, fuzzy: 2, missed: 3 });
    await expect(client.replayCounters("broken")).rejects.toThrow(
      /^replayed site broken's counters: the answer is not what the gateway serves \(exact: /,
    );
  });

  it("lists the takeovers", async () => {
    expect(await client.takeovers()).toMatchObject({ computers: { agent: expect.anything() } });
  });

  it("takes a computer over, renews its hold and hands it back", async () => {
    const taken = await client.take("agent", "dana", 60);
    expect(taken).toMatchObject({ operator: "dana", since: expect.any(String), expires: expect.any(String) });
    const renewed = await client.renew("agent", taken.since, 120);
    expect(Date.parse(renewed.expires!)).toBeGreaterThan(Date.parse(taken.expires!));
    await client.handBack("agent");
    expect((await client.takeovers()).computers.agent).toEqual({});
  });

  it("refuses with one line naming the operation and the status when the gateway refuses the token", async () => {
    const wrong = "wrong-token-0123456789abcdef0123456789";
    const refused = checkedClient(gateway.url, wrong);
    const error = (await refused.card().catch((e: unknown) => e)) as GatewayRequestError;
    expect(error).toBeInstanceOf(GatewayRequestError);
    expect(error.status).toBe(401);
    expect(error.message).toMatch(/^reading the gateway's card: HTTP 401\b/);
    expect(error.message).not.toContain("\n");
    expect(error.message).not.toContain(wrong);
  });

  it("names the operation when an answer is not JSON", async () => {
    await expect(client.siteJson("shop", "/page")).rejects.toThrow(
      /^site shop: GET \/svc\/shop\/page: the answer \(HTTP 200, text\/html\) is not JSON: <html>a page<\/html>$/,
    );
  });

  it("keeps the control token out of an error even when a hostile site echoes it", async () => {
    const error = (await client.siteJson("shop", "/leak").catch((e: unknown) => e)) as Error;
    expect(error.message).toMatch(/^site shop: GET \/svc\/shop\/leak: HTTP 500 /);
    expect(error.message).toContain("Bearer [token]");
    expect(error.message).not.toContain(TOKEN);
  });

  it("says a gateway that does not answer in one line naming the operation, without the token", async () => {
    const gone = checkedClient(`http://127.0.0.1:${await freePort()}`, TOKEN);
    const error = (await gone.proxyLog("agent").catch((e: unknown) => e)) as GatewayRequestError;
    expect(error.message).toMatch(
      /^fetching the site-proxy log of computer agent: cannot reach the gateway \(ECONNREFUSED\)$/,
    );
    expect(error.status).toBeUndefined();
    expect(error.message).not.toContain(TOKEN);
  });

  // Last, once every test above has asked its methods.
  it("asks every method of the gateway's contract here, each at a path the gateway routes where it means", () => {
    const methods = Object.getOwnPropertyNames(GatewayClient.prototype).filter((name) => !NOT_REQUESTS.includes(name));
    expect(methods.sort()).toEqual(Object.keys(ROUTE_OF_METHOD).sort());
    expect([...asked].sort()).toEqual(Object.keys(ROUTE_OF_METHOD).sort());
    expect(route(new URL(client.cdpUrl("agent")).pathname)).toMatchObject({
      kind: "computer",
      computer: "agent",
      op: "cdp",
    });
  });
});

describe("the gateway client's connections", () => {
  afterAll(cleanup);

  it("lets an idle connection go long before the gateway closes it, so a request never lands on a closing one", async () => {
    // A gateway as it looks to its client: it announces its idle timeout (65 s), and here closes a connection idle
    // for over 5 s the moment a request comes on it, as a real one does when its timeout and the request meet.
    let connections = 0;
    const idleSince = new WeakMap<Socket, number>();
    const server = createServer({ keepAliveTimeout: GATEWAY_IDLE_CONNECTION_MS }, (req, res) => {
      const since = idleSince.get(req.socket);
      if (since !== undefined && Date.now() - since > 5_000) return void req.socket.destroy();
      res.writeHead(200, { "content-type": "text/plain" }).end("ok");
      res.on("finish", () => idleSince.set(req.socket, Date.now()));
    });
    server.on("connection", () => connections++);
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    onCleanup(() => new Promise((resolve) => server.close(resolve)));
    const client = new GatewayClient(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`, TOKEN);

    expect((await client.send("asking once", "/svc/shop/data")).status).toBe(200);
    await new Promise((resolve) => setTimeout(resolve, 5_500));
    const again = await client.send("asking again after 5.5 s idle", "/svc/shop/data");
    expect(again.status).toBe(200);
    expect(connections).toBe(2);
  });
});
