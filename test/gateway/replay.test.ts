// A replayed site through the gateway: the real gateway process and a real replay server over a HAR, as the plan
// wires them (the replay server the site's frontend, its control listener behind `/replay/v1/<site>/...`), and a
// computer's real site proxy in front of it: a miss is a `replay-miss` line in that proxy's log, which no other site
// can forge.
import http from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { replayServerToken } from "../../src/protocol/auth";
import { spawnService, type ServiceProcess } from "../helpers/processes";
import { startUpstream, type Upstream } from "../helpers/servers";
import { entry, har, harFile, REPLAY_SERVER_ARGS } from "../replay-server/helpers";
import { curl, startProxy, type ProxyProcess } from "../site-proxy/helpers";
import { request, startGateway, TOKEN, type GatewayProcess } from "./helpers";

describe("a replayed site through the gateway", () => {
  let server: Upstream;
  let replay: ServiceProcess & { port: number; controlPort: number };
  let gateway: GatewayProcess;
  let forger: Upstream;
  let proxy: ProxyProcess;

  beforeAll(async () => {
    // The site's own server: its card, /ready and /session stay its own.
    server = await startUpstream((req: http.IncomingMessage, res: http.ServerResponse) =>
      res
        .writeHead(200, { "Content-Type": "text/plain" })
        .end(req.url === "/headers" ? JSON.stringify(req.headers) : `server ${req.url}`),
    );
    const file = harFile(
      har([
        entry("https://github.com/poll", { body: "first", mimeType: "text/plain" }),
        entry("https://github.com/poll", { body: "second", mimeType: "text/plain" }),
      ]),
    );
    const service = spawnService(REPLAY_SERVER_ARGS, {
      MULTIENV_REPLAY_SERVER_CONFIG: JSON.stringify({
        listen: { host: "127.0.0.1", port: 0 },
        control: { host: "127.0.0.1", port: 0 },
        recording: file,
      }),
      MULTIENV_REPLAY_SERVER_TOKEN: replayServerToken(TOKEN, "gh"),
    });
    const line = await service.listening;
    replay = { ...service, port: line.port as number, controlPort: line.controlPort as number };
    // A synthetic site that answers everything as a replay server's miss would, naming a "nearest" URL of its own.
    forger = await startUpstream((req: http.IncomingMessage, res: http.ServerResponse) =>
      res
        .writeHead(404, {
          "X-Agentenv-Replay": "miss",
          "X-Agentenv-Replay-Nearest": "https://forged.test/planted",
          "Content-Type": "text/plain",
        })
        .end("not here"),
    );
    gateway = await startGateway({
      browse: { hosts: ["127.0.0.1"], port: 0 },
      sites: {
        gh: { server: server.url, frontend: `http://127.0.0.1:${replay.port}`, live: false },
        forger: { server: forger.url, frontend: forger.url, live: false },
      },
      replays: { gh: `http://127.0.0.1:${replay.controlPort}` },
    });
    const listeners = gateway.logs.find((line) => line.event === "listening")!.listeners as {
      listener: string;
      port: number;
    }[];
    const browse = listeners.find((l) => l.listener === "browse")!;
    // The computer's site proxy, as the plan configures it: gh is replayed, forger is a synthetic site.
    proxy = await startProxy({
      gateway: `http://127.0.0.1:${browse.port}`,
      sites: { gh: ["github.com"], forger: ["forger.test"] },
      replayed: ["gh"],
      reach: "none",
    });
  });

  afterAll(async () => {
    await Promise.all([gateway?.stop(), replay?.stop(), server?.close(), forger?.close(), proxy?.stop()]);
  });

  const poll = () =>
    request(`${gateway.url}/website/gh/poll`, {
      headers: { "X-Forwarded-Host": "github.com", "X-Forwarded-Proto": "https" },
    });

  it("serves the recording at the site's names, counts it, and starts over after a reset", async () => {
    expect((await poll()).body).toBe("first");
    expect((await poll()).body).toBe("second");
    const missed = await request(`${gateway.url}/website/gh/never-recorded`, {
      headers: { "X-Forwarded-Host": "github.com", "X-Forwarded-Proto": "https" },
    });
    expect(missed.status).toBe(404);
    expect(missed.headers["x-agentenv-replay"]).toBe("miss");
    const counters = await request(`${gateway.url}/replay/v1/gh/counters`);
    expect(counters.status).toBe(200);
    expect(JSON.parse(counters.body)).toEqual({ exact: 2, fuzzy: 0, missed: 1 });
    const reset = await request(`${gateway.url}/replay/v1/gh/reset`, { method: "POST" });
    expect(reset.status).toBe(200);
    expect(JSON.parse(reset.body)).toEqual({ ended: { exact: 2, fuzzy: 0, missed: 1 } });
    expect((await poll()).body).toBe("first");
    expect(replay.logs.some((l) => l.event === "replay-miss" && String(l.url).includes("/never-recorded"))).toBe(true);
  });

  it("names the nearest recorded URL of a miss, a header the gateway lets through from replay servers alone", async () => {
    const missed = await request(`${gateway.url}/website/gh/never-recorded`, {
      headers: { "X-Forwarded-Host": "github.com", "X-Forwarded-Proto": "https" },
    });
    expect(missed.headers["x-agentenv-replay-nearest"]).toBe("https://github.com/poll");
    const forged = await request(`${gateway.url}/website/forger/anything`);
    expect(forged.status).toBe(404);
    expect(forged.headers["x-agentenv-replay"]).toBe("miss");
    expect(forged.headers["x-agentenv-replay-nearest"]).toBeUndefined();
  });

  it("writes a replay-miss line in the computer's proxy log for a replayed site's miss, and none a site forges", async () => {
    const missed = await curl(proxy.url, "http://github.com/never-recorded?q=1");
    expect(missed.status).toBe(404);
    expect(missed.headers["x-agentenv-replay"]).toBe("miss");
    const line = await proxy.waitForRecord("the replay-miss line", (r) => r.event === "replay-miss");
    expect(line).toMatchObject({
      event: "replay-miss",
      site: "gh",
      method: "GET",
      url: "http://github.com/never-recorded?q=1",
      nearest: "https://github.com/poll",
    });
    // Its request line comes first, with the same id.
    const request = proxy.records().find((r) => r.event === "request" && r.id === (line as { id?: string }).id);
    expect(request).toMatchObject({ site: "gh", status: 404 });
    // The forger's answer carries the marker and a planted "nearest": the computer gets its 404, the log no line.
    const forged = await curl(proxy.url, "http://forger.test/anything");
    expect(forged.status).toBe(404);
    expect(forged.headers["x-agentenv-replay"]).toBe("miss");
    await proxy.waitForRecord("the forger's request line", (r) => r.event === "request" && r.site === "forger");
    const misses = proxy.records().filter((r) => r.event === "replay-miss");
    expect(misses).toHaveLength(1);
    expect(JSON.stringify(proxy.records())).not.toContain("forged.test");
  });

  it("keeps the site's own server on /svc/", async () => {
    const answer = await request(`${gateway.url}/svc/gh/session`);
    expect(answer.body).toBe("server /session");
  });

  it("requires the control token on the replay routes, and never lets a site see the replay server's token", async () => {
    expect((await request(`${gateway.url}/replay/v1/gh/counters`, { control: false })).status).toBe(401);
    expect((await request(`${gateway.url}/replay/v1/gh/reset`, { method: "POST", control: false })).status).toBe(401);
    // A client presenting the replay server's own token to the gateway is not let through to it.
    const own = await request(`${gateway.url}/replay/v1/gh/counters`, {
      control: false,
      headers: { Authorization: `Bearer ${replayServerToken(TOKEN, "gh")}` },
    });
    expect(own.status).toBe(401);
    // The replay server's token in an Authorization the site's own server would get is taken out, as the control
    // token's is.
    const echoed = await request(`${gateway.url}/svc/gh/headers`, {
      headers: { Authorization: `Bearer ${replayServerToken(TOKEN, "gh")}` },
    });
    expect(echoed.status).toBe(200);
    expect(echoed.body).toContain("127.0.0.1");
    expect(echoed.body).not.toContain(replayServerToken(TOKEN, "gh"));
  });

  it("refuses a reset that is not a POST, counters that are not a read, and a site not replayed", async () => {
    expect((await request(`${gateway.url}/replay/v1/gh/reset`)).status).toBe(405);
    expect((await request(`${gateway.url}/replay/v1/gh/counters`, { method: "POST" })).status).toBe(405);
    expect((await request(`${gateway.url}/replay/v1/shop/counters`)).status).toBe(404);
    expect((await request(`${gateway.url}/replay/v1/gh/other`)).status).toBe(404);
  });
});
