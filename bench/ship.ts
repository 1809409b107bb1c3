// npm run bench:ship
//
// Shipping the demo task's images (stacks/Pulumi.demo.yaml: the gateway, site proxy, browser and the three
// sample sites) from this machine's engine to a Docker host over SSH, two ways, each into a fresh stand-in VM
// (a network namespace with its own dockerd and sshd, test/helpers/standin.ts):
//   1. before: what the ec2 target did until now and the usual recipe: one `docker save <image> | ssh <host>
//      docker load` per image, uncompressed, each its own SSH connection;
//   2. after: `shipImagesCommand`, one `docker save` of them all (layers they share once), zstd over the host's
//      one shared SSH connection.
// Bytes are what crosses SSH (the save stream, or its zstd form), counted apart from the timed runs.
// The last line is one JSON object with every figure. Options (env): BENCH_ROUNDS (1). Root: makes namespaces.
import { execFileSync } from "node:child_process";
import { shellQuote, shipImagesCommand, sshRun, sshSetup } from "../src/plan/targets/ssh";
import { startStandinVm } from "../test/helpers/standin";

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 1);
const IMAGES = [
  "multienv/gateway:latest",
  "multienv/site-proxy:latest",
  "multienv/browser:latest",
  "multienv/sample-shop-server",
  "multienv/sample-shop-frontend",
  "multienv/sample-live-server",
];

const sh = (script: string) =>
  execFileSync("/bin/sh", ["-c", script], { maxBuffer: 1 << 20, stdio: ["ignore", "pipe", "pipe"] }).toString();
const ids = IMAGES.map((i) => sh(`docker image inspect -f '{{.Id}}' ${shellQuote(i)}`).trim());

function bytes(command: string): number {
  return Number(sh(`${command} | wc -c`).trim());
}

async function round(kind: "before" | "after", n: number): Promise<number> {
  const host = await startStandinVm(`ship${n}${kind[0]}`, 220 + n * 2 + (kind === "before" ? 0 : 1));
  try {
    const started = process.hrtime.bigint();
    if (kind === "before") {
      // The former per-image command: its own ssh each time, no compression.
      const prelude = sshSetup(host.ssh).replace(/\n\( flock 9;[^\n]*\n?$/, "\n");
      for (const id of ids)
        sh(`${prelude}\ndocker save ${shellQuote(id)} | ssh -F "$cfg" -o ControlPath=none "$alias" docker load`);
    } else {
      sh(shipImagesCommand(ids, host.ssh));
    }
    const seconds = Number(process.hrtime.bigint() - started) / 1e9;
    const there = sh(
      `${sshSetup(host.ssh)}\n${sshRun(shellQuote(`for i in ${ids.join(" ")}; do docker image inspect -f . $i; done | wc -l`))}`,
    ).trim();
    if (Number(there) !== ids.length) throw new Error(`${kind}: the host has ${there} of ${ids.length} images`);
    return seconds;
  } finally {
    await host.stop();
  }
}

(async () => {
  const beforeBytes = IMAGES.reduce((sum, _i, k) => sum + bytes(`docker save ${shellQuote(ids[k])}`), 0);
  const afterRaw = bytes(`docker save ${ids.map(shellQuote).join(" ")}`);
  const afterBytes = bytes(`docker save ${ids.map(shellQuote).join(" ")} | zstd -q -T0 -3`);
  const before: number[] = [];
  const after: number[] = [];
  for (let n = 0; n < ROUNDS; n++) {
    before.push(await round("before", n));
    after.push(await round("after", n));
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  const figures = {
    images: IMAGES.length,
    rounds: ROUNDS,
    beforeBytes,
    afterUncompressedBytes: afterRaw,
    afterBytes,
    bytesRatio: Number((beforeBytes / afterBytes).toFixed(2)),
    beforeSeconds: Number(median(before).toFixed(2)),
    afterSeconds: Number(median(after).toFixed(2)),
    secondsRatio: Number((median(before) / median(after)).toFixed(2)),
  };
  console.log(
    `before (one save | ssh load per image, uncompressed): ${(beforeBytes / 1e6).toFixed(0)} MB, ${figures.beforeSeconds} s`,
  );
  console.log(
    `after (one save of all, zstd, shared connection): ${(afterBytes / 1e6).toFixed(0)} MB (${(afterRaw / 1e6).toFixed(0)} MB before zstd), ${figures.afterSeconds} s`,
  );
  console.log(`ratios: ${figures.bytesRatio}x fewer bytes, ${figures.secondsRatio}x faster`);
  console.log(JSON.stringify(figures));
})().catch((error) => {
  console.error(error instanceof Error ? error.message : error);
  process.exitCode = 1;
});
