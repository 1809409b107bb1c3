// npm run bench:collect
//
// What collecting a request log costs: a log of BENCH_COLLECT_MIB (512) MiB, as a long episode leaves it on a site
// proxy's disk (half its bytes images' bodies in base64, half pages' text: test/helpers/request-logs.ts), collected
// by the runner (the proxy's control listener, the real gateway scrubbing each entry on its way, the runner's spool
// and HAR) beside a plain copy of the same files (`cp`), the field's baseline for reading them off a disk. Prints
// each figure, the ratio, the CPU each process spent per MiB, and one JSON line at the end. Beside them, in this
// process, the CPU per MiB of the scrub alone, as the site proxy keeps a binary body (Scrubber.binary with its own
// token) and as the gateway passes an image's base64 and a page's text on (Scrubber.text with every token it knows).
import { execFileSync, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import { computerAgentToken, computerControlToken, secretTokens } from "../src/protocol/auth";
import { Scrubber } from "../src/protocol/scrub";
import { collectRun } from "../src/runner/evidence/collect";
import { writeLargeRequestLog } from "../test/helpers/request-logs";
import { cpuSeconds, processTree, startGateway, startNode } from "./loopback";

const CONTROL_TOKEN = "bench-control-token-0123456789abcdef";
const MIB = Number(process.env.BENCH_COLLECT_MIB ?? 512);
/** With BENCH_CPU_PROF=<dir>, the proxy and the gateway write CPU profiles there (node --cpu-prof). */
const PROFILE = process.env.BENCH_CPU_PROF;
const nodeArgs = PROFILE ? ["--cpu-prof", `--cpu-prof-dir=${PROFILE}`] : [];

/** CPU ms per MiB of `scrub` over `inputs` (each `bytes` long), the best of three rounds. */
function scrubCpuMsPerMiB<T>(inputs: T[], bytes: number, scrub: (input: T) => unknown): number {
  let best = Infinity;
  for (let round = 0; round < 3; round++) {
    const before = process.cpuUsage();
    for (const input of inputs) scrub(input);
    const spent = process.cpuUsage(before);
    best = Math.min(best, (spent.user + spent.system) / 1000 / ((inputs.length * bytes) / 1024 / 1024));
  }
  return Number(best.toFixed(1));
}

/** The scrub alone, per MiB: the proxy's of a binary body, the gateway's of an image's base64 and of a page's text. */
function scrubFigures() {
  const proxy = new Scrubber(secretTokens([computerControlToken(CONTROL_TOKEN, "agent")]), []);
  const gateway = new Scrubber(
    secretTokens([
      CONTROL_TOKEN,
      ...["agent", "other"].flatMap((name) => [
        computerControlToken(CONTROL_TOKEN, name),
        computerAgentToken(CONTROL_TOKEN, name),
      ]),
    ]),
    [],
  );
  const images = Array.from({ length: 16 }, () => randomBytes(256 * 1024));
  const base64 = images.map((image) => image.toString("base64"));
  const words = ['<div class="item">', "price", "order", "</div>", "const", "return", "cart", "\n", "shop", "value"];
  const page = Array.from({ length: 48 * 1024 }, (_, i) => words[(i * 7919) % words.length]).join(" ");
  return {
    proxyBinaryScrubCpuMsPerMiB: scrubCpuMsPerMiB(images, images[0].length, (image) => proxy.binary(image)),
    gatewayBase64ScrubCpuMsPerMiB: scrubCpuMsPerMiB(base64, base64[0].length, (text) => gateway.text(text)),
    gatewayPageScrubCpuMsPerMiB: scrubCpuMsPerMiB(Array(16).fill(page), page.length, (text) => gateway.text(text)),
  };
}

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
      [...nodeArgs, join(__dirname, "..", "bin", "multienv-site-proxy.js")],
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
      nodeArgs,
    );
    children.push(gateway.child);

    const gatewayPids = processTree(gateway.child.pid!);
    const proxyBefore = cpuSeconds([proxy.pid!]);
    const gatewayBefore = cpuSeconds(gatewayPids);
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
    const proxyCpu = cpuSeconds([proxy.pid!]) - proxyBefore;
    const gatewayCpu = cpuSeconds(gatewayPids) - gatewayBefore;
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
      proxyCpuMsPerMiB: Math.round((proxyCpu * 1000) / megabytes),
      gatewayCpuMsPerMiB: Math.round((gatewayCpu * 1000) / megabytes),
      runnerCpuMsPerMiB: Math.round((runner.user + runner.system) / 1000 / megabytes),
      ...scrubFigures(),
      loadAverage: execFileSync("cat", ["/proc/loadavg"], { encoding: "utf8" }).split(" ").slice(0, 3).join(" "),
    };
    process.stdout.write(
      `cp: ${figures.copySeconds} s; collect: ${figures.collectSeconds} s (${figures.ratio}x), ` +
        `${complete ? "every entry" : `${stored?.entries ?? 0} of ${written.ids.length} entries`} in the HAR; ` +
        `CPU per MiB: proxy ${figures.proxyCpuMsPerMiB} ms, gateway ${figures.gatewayCpuMsPerMiB} ms, ` +
        `runner ${figures.runnerCpuMsPerMiB} ms; the scrub alone: the proxy's of a binary body ` +
        `${figures.proxyBinaryScrubCpuMsPerMiB} ms, the gateway's of its base64 ${figures.gatewayBase64ScrubCpuMsPerMiB} ms ` +
        `and of a page's text ${figures.gatewayPageScrubCpuMsPerMiB} ms\n`,
    );
    process.stdout.write(JSON.stringify(figures) + "\n");
    if (!complete) process.exitCode = 1;
  } finally {
    for (const child of children) child.kill("SIGTERM");
    rmSync(dir, { recursive: true, force: true });
  }
}

void main();
