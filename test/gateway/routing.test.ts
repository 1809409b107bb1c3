// Which upstream a path reaches.
import type http from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { echoHandler, startUpstream, type Echo, type Upstream } from "../helpers/servers";
import { request, startGateway, type GatewayProcess } from "./helpers";

describe("gateway routing", () => {
  let gateway: GatewayProcess;
  const upstreams: Upstream[] = [];
  const seen: Record<string, http.IncomingMessage[]> = { server: [], frontend: [], live: [] };

  beforeAll(async () => {
    const [server, frontend, live] = await Promise.all(
      (["server", "frontend", "live"] as const).map((tag) =>
        startUpstream(echoHandler(tag, (req) => seen[tag].push(req))),
      ),
    );
    upstreams.push(server, frontend, live);
    gateway = await startGateway({
      sites: {
        shop: { server: server.url, frontend: frontend.url },
        github: { server: live.url, live: true },
      },
    });
  });
  afterAll(async () => {
    await gateway?.stop();
    await Promise.all(upstreams.map((u) => u.close()));
  });

  it("sends /svc/<site>/<rest> to the site's server with the rest as its path", async () => {
    const answer = await request(`${gateway.url}/svc/shop/api/items?page=2`);
    expect(answer.status).toBe(200);
    expect(answer.headers["x-upstream"]).toBe("server");
    expect((JSON.parse(answer.body) as Echo).url).toBe("/api/items?page=2");
  });

  it("sends /svc/<site> of a live site to its server", async () => {
    const answer = await request(`${gateway.url}/svc/github/ready`);
    expect(answer.headers["x-upstream"]).toBe("live");
    expect((JSON.parse(answer.body) as Echo).url).toBe("/ready");
  });

  it("sends /website/<site>/<rest> to a synthetic site's frontend", async () => {
    const answer = await request(`${gateway.url}/website/shop/cart/checkout?step=1`);
    expect(answer.headers["x-upstream"]).toBe("frontend");
    expect((JSON.parse(answer.body) as Echo).url).toBe("/cart/checkout?step=1");
  });

  it("sends both /website/<site> and /website/<site>/ to the frontend's root", async () => {
    for (const path of ["/website/shop", "/website/shop/"]) {
      const answer = await request(gateway.url + path);
      expect(answer.headers["x-upstream"]).toBe("frontend");
      expect((JSON.parse(answer.body) as Echo).url).toBe("/");
    }
  });

  it("gives a live site no /website/ route: 404 JSON and its server is not contacted", async () => {
    const before = seen.live.length;
    const answer = await request(`${gateway.url}/website/github/`);
    expect(answer.status).toBe(404);
    expect(answer.headers["content-type"]).toBe("application/json");
    expect(JSON.parse(answer.body)).toMatchObject({ site: "github" });
    expect(seen.live.length).toBe(before);
  });

  it("answers an unknown site with 404 JSON and contacts no upstream", async () => {
    const before = seen.server.length + seen.frontend.length + seen.live.length;
    for (const path of ["/svc/nope/x", "/website/nope/", "/svc/", "/svc"]) {
      const answer = await request(gateway.url + path);
      expect(answer.status, path).toBe(404);
      expect(JSON.parse(answer.body).error, path).toBe("unknown site");
    }
    expect(seen.server.length + seen.frontend.length + seen.live.length).toBe(before);
  });

  it("answers other paths with 404 JSON", async () => {
    const answer = await request(`${gateway.url}/somewhere/else`);
    expect(answer.status).toBe(404);
    expect(JSON.parse(answer.body)).toEqual({ error: "not found" });
  });
});
