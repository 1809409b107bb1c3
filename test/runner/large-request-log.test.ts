// Collecting a large request log through the real gateway from the real site proxy: every entry of the episode
// arrives in the stored HAR, however long the read takes, with nothing held whole in memory (the entries stream into
// a spool, and the HAR is written from it). The log is written straight to the proxy's disk (test/helpers/
// request-logs.ts), half of it images' bodies in base64, which the gateway scrubs again on the way.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { collectRun } from "../../src/runner/evidence/collect";
import type { RunRecord } from "../../src/runner/evidence/run-record";
import { cleanup, tempDir } from "../helpers/processes";
import { writeLargeRequestLog } from "../helpers/request-logs";
import { startHttpServer } from "../helpers/servers";
import { agentCollectOptions, sha256OfFile, startComputerBehindGateway } from "./helpers";

afterEach(cleanup);

/** The log's size: large enough that the old read (whole, then parsed) took minutes here; small enough for a test. */
const MIB = Number(process.env.TEST_LARGE_LOG_MIB ?? 64);

/** The `logId` of each entry of a HAR file, in its order (one in each `_multienv`; a string's quotes are escaped). */
function logIdsOfHar(path: string): string[] {
  return Array.from(readFileSync(path, "latin1").matchAll(/"logId":"([^"]*)"/g), (match) => match[1]);
}

describe("collecting a large request log", () => {
  it(`stores every entry of a ${MIB} MiB log in the HAR, in order, recorded in run.json`, async () => {
    const dir = tempDir("large-request-log-");
    const proxyLog = join(dir, "site-proxy.log");
    const written = writeLargeRequestLog(join(dir, "requests"), proxyLog, MIB);
    const origin = await startHttpServer(() => "unused");
    const { gateway } = await startComputerBehindGateway({
      site: origin.url,
      requestLog: { dir: join(dir, "requests") },
      proxyLog,
    });
    const artifactsDir = join(dir, "artifacts", "task-1");
    const result = await collectRun(agentCollectOptions(gateway.url, artifactsDir));

    const har = join(artifactsDir, "requests", "agent.har");
    expect(result.record.evidence.agent.requestsError).toBeUndefined();
    expect(logIdsOfHar(har)).toEqual(written.ids);
    const record = (JSON.parse(readFileSync(join(artifactsDir, "run.json"), "utf8")) as RunRecord).evidence.agent;
    expect(record.requests).toMatchObject({ entries: written.ids.length, sha256: sha256OfFile(har) });
    expect(record.requests).not.toHaveProperty("missing");
    expect(record.requests!.bytes).toBeGreaterThan(written.bytes * 0.9);
  }, 600_000);
});
