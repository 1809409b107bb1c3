// npm run bench:collect
//
// What collecting a request log costs: a log of BENCH_COLLECT_MIB (512) MiB, as a long episode leaves it on a site
// proxy's disk (half its bytes images' bodies in base64, half pages' text: test/helpers/request-logs.ts), collected
// by the runner (the proxy's control listener, the real gateway scrubbing each entry on its way, the runner's spool
// and HAR) beside a plain copy of the same files (`cp`), the field's baseline for reading them off a disk. Prints
// each figure, the ratio, the CPU each process spent per MiB, and one JSON line at the end.
import { execFileSync, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { computerControlToken } from "../src/protocol/auth";
import { collectRun } from "../src/runner/evidence/collect";
import { writeLargeRequestLog } from "../test/helpers/request-logs";
import { cpuSeconds, processTree, startGateway, startNode } from "./loopback";

const CONTROL_TOKEN = "bench-control-token-0123456789abcdef";
const MIB = Number(process.env.BENCH_COLLECT_MIB ?? 512);

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "bench-collect-"));
  const children: ChildProcess[] = [];
  try {
    const proxyLog = join(dir, "site-proxy.log");
    const requests = join(dir, "requests");
    const written = writeLargeRequestLog(requests, proxyLog, MIB);
    const megabytes = written.bytes / 1024 / 1024;
    process.stdout.write(`log: ${megabytes.toFixed(0)} MiB, ${written.ids.length} entries\n`);

    // The baseline: the files copied, cache dropped by neither (both read what the page cache holds).
    let started = process.hrtime.bigint();
    execFileSync("cp", ["-r", requests, join(dir, "copy")]);
    const copySeconds = Number(process.hrtime.bigint() - started) / 1e9;
    rmSync(join(dir, "copy"), { recursive: true, force: true });

    const { child: proxy, line } = await startNode<{ control: { port: number } }>(
      [join(__dirname, "..", "bin", "multienv-site-proxy.js")],
      {
        MULTIENV_SITE_PROXY_CONFIG: JSON.stringify({
          listen: { host: "127.0.0.1", port: 0 },
          gateway: "http://127.0.0.1:9",
          sites: { shop: ["shop.test"] },
          reach: "allow-all",
          log: proxyLog,
          control: { host: "127.0.0.1", port: 0, cdp: "127.0.0.1:9" },
          // Room for every file written: a proxy that starts on a full log removes its oldest file to begin a new one.
          requestLog: { dir: requests, computer: "agent", files: 64 },
        }),
        MULTIENV_SITE_PROXY_TOKEN: computerControlToken(CONTROL_TOKEN, "agent"),
      },
      '"startup"',
    );
    children.push(proxy);
    const control = `http://127.0.0.1:${line.control.port}`;
    const gateway = await startGateway(
      {
        listen: { host: "127.0.0.1", port: 0 },
        sites: {},
        computers: { agent: { cdp: `${control}/cdp`, proxyLog: `${control}/log`, requests: `${control}/requests` } },
      },
      CONTROL_TOKEN,
    );
    children.push(gateway.child);

    const pids = [proxy.pid!, ...processTree(gateway.child.pid!)];
    const cpuBefore = cpuSeconds(pids);
    const runnerBefore = process.cpuUsage();
    started = process.hrtime.bigint();
    const artifactsDir = join(dir, "artifacts");
    const result = await collectRun({
      stack: "bench",
      access: { gatewayUrl: `http://127.0.0.1:${gateway.port}`, controlToken: CONTROL_TOKEN },
      artifactsDir,
      captureTraffic: false,
      computers: ["agent"],
      syntheticDomains: ["shop.test"],
      log: (text) => process.stdout.write(`  ${text}\n`),
    });
    const collectSeconds = Number(process.hrtime.bigint() - started) / 1e9;
    const runner = process.cpuUsage(runnerBefore);
    const servicesCpu = cpuSeconds(pids) - cpuBefore;
    const stored = result.record.evidence.agent?.requests;
    const complete = stored?.entries === written.ids.length;
    const harBytes = stored ? statSync(join(artifactsDir, stored.file)).size : 0;

    const figures = {
      bench: "collect",
      logMiB: Math.round(megabytes),
      entries: written.ids.length,
      complete,
      harMiB: Math.round(harBytes / 1024 / 1024),
      copySeconds: Number(copySeconds.toFixed(2)),
      collectSeconds: Number(collectSeconds.toFixed(1)),
      ratio: Number((collectSeconds / copySeconds).toFixed(1)),
      serviceCpuMsPerMiB: Math.round((servicesCpu * 1000) / megabytes),
      runnerCpuMsPerMiB: Math.round((runner.user + runner.system) / 1000 / megabytes),
      loadAverage: execFileSync("cat", ["/proc/loadavg"], { encoding: "utf8" }).split(" ").slice(0, 3).join(" "),
    };
    process.stdout.write(
      `cp: ${figures.copySeconds} s; collect: ${figures.collectSeconds} s (${figures.ratio}x), ` +
        `${complete ? "every entry" : `${stored?.entries ?? 0} of ${written.ids.length} entries`} in the HAR; ` +
        `CPU per MiB: proxy and gateway ${figures.serviceCpuMsPerMiB} ms, runner ${figures.runnerCpuMsPerMiB} ms\n`,
    );
    process.stdout.write(JSON.stringify(figures) + "\n");
    if (!complete) process.exitCode = 1;
  } finally {
    for (const child of children) child.kill("SIGTERM");
    rmSync(dir, { recursive: true, force: true });
  }
}

void main();
