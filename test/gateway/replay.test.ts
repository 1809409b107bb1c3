// A replayed site through the gateway: the real gateway process and a real replay server over a HAR, as the plan
// wires them (the replay server the site's frontend, its control listener behind `/replay/v1/<site>/...`).
import http from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { replayServerToken } from "../../src/protocol/auth";
import { spawnService, type ServiceProcess } from "../helpers/processes";
import { startUpstream, type Upstream } from "../helpers/servers";
import { entry, har, harFile, REPLAY_SERVER_ARGS } from "../replay-server/helpers";
import { request, startGateway, TOKEN, type GatewayProcess } from "./helpers";

describe("a replayed site through the gateway", () => {
  let server: Upstream;
  let replay: ServiceProcess & { port: number; controlPort: number };
  let gateway: GatewayProcess;

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
    gateway = await startGateway({
      sites: { gh: { server: server.url, frontend: `http://127.0.0.1:${replay.port}`, live: false } },
      replays: { gh: `http://127.0.0.1:${replay.controlPort}` },
    });
  });

  afterAll(async () => {
    await Promise.all([gateway?.stop(), replay?.stop(), server?.close()]);
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
