// The gateway's cluster mode (the default: one worker per core): one listening line, every
// worker serving, and a worker that dies replaced.
import { readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { echoHandler, startUpstream, type Echo, type Upstream } from "../helpers/servers";
import { request, startGateway, type GatewayProcess } from "./helpers";

function workerPids(pid: number): number[] {
  return readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8").trim().split(/\s+/).filter(Boolean).map(Number);
}

describe("gateway workers", () => {
  let gateway: GatewayProcess;
  let site: Upstream;

  beforeAll(async () => {
    site = await startUpstream(echoHandler("site"));
    gateway = await startGateway({ workers: 2, sites: { shop: { server: site.url } } });
  });
  afterAll(async () => {
    await gateway?.stop();
    await site?.close();
  });

  it("prints one listening line naming the bound port and the workers, and serves", async () => {
    expect(gateway.logs.filter((line) => line.event === "listening")).toEqual([
      expect.objectContaining({ host: "127.0.0.1", port: gateway.port, workers: 2 }),
    ]);
    expect(workerPids(gateway.process.pid!)).toHaveLength(2);
    const answer = await request(`${gateway.url}/svc/shop/x`);
    expect((JSON.parse(answer.body) as Echo).url).toBe("/x");
  });

  it("replaces a worker that dies, and keeps serving meanwhile", async () => {
    const [victim] = workerPids(gateway.process.pid!);
    process.kill(victim, "SIGKILL");
    await gateway.waitForLog((line) => line.event === "worker-restarted" && line.pid === victim);
    for (let i = 0; i < 5; i++) expect((await request(`${gateway.url}/svc/shop/after`)).status).toBe(200);
    await expect.poll(() => workerPids(gateway.process.pid!).length).toBe(2);
    expect(workerPids(gateway.process.pid!)).not.toContain(victim);
  });

  it("stops every worker on SIGTERM", async () => {
    const workers = workerPids(gateway.process.pid!);
    await gateway.stop();
    expect(gateway.process.exitCode).toBe(0);
    for (const pid of workers) expect(() => process.kill(pid, 0)).toThrow();
  });
});
