// The capture sidecar's script, run for real in network namespaces of its own (unshare -n, as root) with a
// stand-in tcpdump on PATH: it keeps running while the namespace has an interface besides loopback, exits (for
// the restart policy to start it again) once only loopback is left, as when Docker restarted the website
// container, never overwrites the files of an earlier run, and starts over in place when a reset asks.
import { spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import {
  CAPTURE_CANNOT_START_OVER,
  CAPTURE_POD_IP_ENV,
  CAPTURE_REJOIN_WAIT_SECONDS,
  CAPTURE_SCRIPT,
  CAPTURE_START_OVER_COMMAND,
  captureCommand,
} from "../../src/plan/wiring";
import type { Plan, PlannedCapture } from "../../src/plan/types";
import { CAPTURE_SERVER_PORT } from "../../src/protocol/traffic";
import { until } from "../helpers/until";

const canUnshare = spawnSync("unshare", ["-n", "true"]).status === 0;

/**
 * A tcpdump that writes its first file (`-w <prefix>` + 0) and waits, as the real one does with no packets; each start
 * and each end (TERM, once its file is written out) is a line of `<dir>/tcpdump.log`.
 */
function fakeTcpdump(dir: string): string {
  const bin = path.join(dir, "bin");
  fs.mkdirSync(bin);
  fs.writeFileSync(
    path.join(bin, "tcpdump"),
    [
      "#!/bin/sh",
      'while [ $# -gt 0 ]; do [ "$1" = -w ] && w=$2; shift; done',
      `log=${path.join(dir, "tcpdump.log")}`,
      'echo "started $$" >> "$log"',
      'trap \'echo "ended $$" >> "$log"; exit 0\' TERM',
      'echo packets > "${w}0"',
      "sleep 1000 & wait $!",
      "",
    ].join("\n"),
    { mode: 0o755 },
  );
  return bin;
}

/** Runs the script in a new network namespace after `setup` (shell lines run there first); resolves its exit. */
function runScript(dir: string, setup: string): { exited: Promise<{ code: number | null; ms: number }>; stop(): void } {
  const started = Date.now();
  const child = spawn(
    "unshare",
    ["-n", "sh", "-c", `${setup}\nexec sh -c "$0" capture "$1" 1 3`, CAPTURE_SCRIPT, path.join(dir, "shop-server")],
    { env: { ...process.env, PATH: `${fakeTcpdump(dir)}:${process.env.PATH}`, TMPDIR: dir }, stdio: "ignore" },
  );
  return {
    exited: new Promise((resolve) => child.on("exit", (code) => resolve({ code, ms: Date.now() - started }))),
    // As `docker stop` does: TERM to the script (exec'd by sh inside unshare, so the child's own pid).
    stop: () => child.kill("SIGTERM"),
  };
}

describe.skipIf(!canUnshare)("the capture sidecar's script", () => {
  it("keeps capturing while its namespace has an interface, and exits 75 once only loopback is left", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "multienv-capture-script-"));
    // The veth pair goes after 2.5 s, as a restarted website container's endpoint leaves the old namespace.
    const { exited } = runScript(
      dir,
      "ip link add name veth0 type veth peer name veth1\n(sleep 2.5; ip link del veth0) &",
    );
    const { code, ms } = await exited;
    expect(code).toBe(75);
    // Detached at 2.5 s, seen within the loop's second, then the wait a restarting website container is given.
    const wait = CAPTURE_REJOIN_WAIT_SECONDS * 1000;
    expect(ms).toBeGreaterThan(2_400 + wait);
    expect(ms).toBeLessThan(6_000 + wait);
    expect(fs.readFileSync(path.join(dir, "shop-server.pcap0"), "utf8")).toBe("packets\n");
  }, 30_000);

  it("stops at once on TERM while it waits to rejoin, within Docker's stop grace period", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "multienv-capture-script-"));
    // Loopback alone: the script finds no interface at once and starts its wait; TERM comes 1 s into it.
    const { exited, stop } = runScript(dir, "");
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    stop();
    const { code, ms } = await exited;
    expect(code).toBe(0);
    expect(ms).toBeLessThan(1_500 + 3_000);
  }, 30_000);

  it("starts over in place on a reset's command: its tcpdump ended first, every file of its capture gone, a new one writing", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "multienv-capture-script-"));
    const { exited, stop } = runScript(dir, "ip link add name veth0 type veth peer name veth1");
    const file = (name: string) => path.join(dir, name);
    const log = () => fs.readFileSync(file("tcpdump.log"), "utf8").trim().split("\n");
    await until("the first tcpdump's file", () => fs.existsSync(file("shop-server.pcap0")) || undefined, 10_000, 50);
    // What the ended episode left: its files, an earlier run's, and another container's, which is not this capture's.
    for (const name of ["shop-server.pcap1", "shop-server.run1.pcap0", "other-server.pcap0"])
      fs.writeFileSync(file(name), "the ended episode");
    fs.writeFileSync(file("shop-server.pcap0"), "the ended episode");
    const startOver = () =>
      spawnSync("sh", ["-c", CAPTURE_START_OVER_COMMAND], { env: { ...process.env, TMPDIR: dir }, encoding: "utf8" });
    const first = startOver();
    expect(first.status, first.stderr).toBe(0);
    const [started, ended, again] = log();
    expect(ended.replace("ended", "started")).toBe(started);
    expect(again).toMatch(/^started /);
    expect(again).not.toBe(started);
    expect(
      fs
        .readdirSync(dir)
        .filter((f) => f.includes(".pcap"))
        .sort(),
    ).toEqual(["other-server.pcap0", "shop-server.pcap0"]);
    expect(fs.readFileSync(file("shop-server.pcap0"), "utf8")).toBe("packets\n");
    expect(fs.readFileSync(file("other-server.pcap0"), "utf8")).toBe("the ended episode");
    // And again, the script itself never having ended.
    expect(startOver().status).toBe(0);
    expect(log()).toHaveLength(5);
    stop();
    expect((await exited).code).toBe(0);
  }, 30_000);

  it("tells a reset it cannot start over in place when no script of this kind runs there", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "multienv-capture-script-"));
    const run = spawnSync("sh", ["-c", CAPTURE_START_OVER_COMMAND], { env: { ...process.env, TMPDIR: dir } });
    expect(run.status).toBe(CAPTURE_CANNOT_START_OVER);
  });

  it("keeps the files of earlier runs under run numbers of their own, never overwriting one", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "multienv-capture-script-"));
    fs.writeFileSync(path.join(dir, "shop-server.run1.pcap0"), "first run");
    fs.writeFileSync(path.join(dir, "shop-server.pcap0"), "second run, file 0");
    fs.writeFileSync(path.join(dir, "shop-server.pcap1"), "second run, file 1");
    fs.writeFileSync(path.join(dir, "other-server.pcap0"), "another container");
    // Loopback alone from the start: the script renames, starts tcpdump, finds no interface and exits.
    expect((await runScript(dir, "").exited).code).toBe(75);
    const read = (name: string) => fs.readFileSync(path.join(dir, name), "utf8");
    expect(
      fs
        .readdirSync(dir)
        .filter((f) => f.includes(".pcap"))
        .sort(),
    ).toEqual([
      "other-server.pcap0",
      "shop-server.pcap0",
      "shop-server.run1.pcap0",
      "shop-server.run2.pcap0",
      "shop-server.run2.pcap1",
    ]);
    expect(read("shop-server.run1.pcap0")).toBe("first run");
    expect(read("shop-server.run2.pcap0")).toBe("second run, file 0");
    expect(read("shop-server.run2.pcap1")).toBe("second run, file 1");
    expect(read("shop-server.pcap0")).toBe("packets\n");
    expect(read("other-server.pcap0")).toBe("another container");
  }, 30_000);
});

const hasTcpdump = spawnSync("tcpdump", ["--version"]).status === 0;

/** In the namespace: a capture server on the pod's address, a site's connections to and from 8090 elsewhere. */
const TRAFFIC = `
const net = require("node:net");
const listen = (host, port) => new Promise((r) => { const s = net.createServer((c) => c.resume()); s.listen(port, host, () => r(s)); });
const send = (to, from, text) => new Promise((r, j) => {
  const c = net.connect({ host: to[0], port: to[1], localAddress: from[0], localPort: from[1] }, () => c.end(text));
  c.on("close", r); c.on("error", j);
});
(async () => {
  const servers = [await listen("10.213.250.1", 8090), await listen("10.213.250.2", 8090), await listen("10.213.250.1", 5000)];
  await send(["10.213.250.1", 8090], ["10.213.250.2"], "CAPTURE-SERVER-OWN");
  await send(["10.213.250.2", 8090], ["10.213.250.1"], "SITE-TO-8090-ELSEWHERE");
  await send(["10.213.250.1", 5000], ["10.213.250.3", 8090], "FROM-8090-ELSEWHERE-TO-SITE");
  for (const s of servers) s.close();
})();
`;

describe.skipIf(!canUnshare || !hasTcpdump)("a cluster's capture, with the real tcpdump", () => {
  it("leaves out its own capture server's connections, by the pod's address and 8090, and records 8090 elsewhere", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "multienv-capture-filter-"));
    const base = path.join(dir, "shop-server");
    const command = captureCommand(
      { capture: { fileSizeMb: 1, fileCount: 3, sidecars: [] } } as unknown as Pick<Plan, "capture">,
      { filePrefix: "shop-server.pcap" } as PlannedCapture,
      CAPTURE_SERVER_PORT,
    );
    // The command a cluster's capture container runs, with its files here instead of the pod's volume.
    const [, , script, name, , ...rest] = command;
    const setup = [
      "ip link set lo up",
      "ip link add veth0 type veth peer name veth1",
      "ip addr add 10.213.250.1/24 dev veth0",
      "ip addr add 10.213.250.2/24 dev veth1",
      "ip addr add 10.213.250.3/24 dev veth1",
      "ip link set veth0 up && ip link set veth1 up",
      `${CAPTURE_POD_IP_ENV}=10.213.250.1 sh -c "$0" ${name} "$1" ${rest.join(" ")} & cap=$!`,
      'i=0; while [ ! -s "$1.pcap0" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done; sleep 0.5',
      `"${process.execPath}" -e "$2"`,
      "sleep 1; kill -TERM $cap; wait $cap",
    ].join("\n");
    const run = spawnSync("unshare", ["-n", "sh", "-c", setup, script, base, TRAFFIC], { encoding: "utf8" });
    expect(run.status, run.stderr).toBe(0);
    const read = spawnSync("tcpdump", ["-r", `${base}.pcap0`, "-n", "-A"], { encoding: "utf8" });
    expect(read.status, read.stderr).toBe(0);
    expect(read.stdout).toContain("SITE-TO-8090-ELSEWHERE");
    expect(read.stdout).toContain("FROM-8090-ELSEWHERE-TO-SITE");
    expect(read.stdout).toMatch(/10\.213\.250\.1\.\d+ > 10\.213\.250\.2\.8090/);
    expect(read.stdout).toMatch(/10\.213\.250\.3\.8090 > 10\.213\.250\.1\.5000/);
    expect(read.stdout).not.toContain("CAPTURE-SERVER-OWN");
    expect(read.stdout).not.toMatch(/> 10\.213\.250\.1\.8090|10\.213\.250\.1\.8090 >/);
  }, 30_000);
});
