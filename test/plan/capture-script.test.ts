// The capture sidecar's script, run for real in network namespaces of its own (unshare -n, as root) with a
// stand-in tcpdump on PATH: it keeps running while the namespace has an interface besides loopback, exits (for
// the restart policy to start it again) once only loopback is left, as when Docker restarted the website
// container, and never overwrites the files of an earlier run.
import { spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { CAPTURE_SCRIPT } from "../../src/plan/wiring";

const canUnshare = spawnSync("unshare", ["-n", "true"]).status === 0;

/** A tcpdump that writes its first file (`-w <prefix>` + 0) and waits, as the real one does with no packets. */
function fakeTcpdump(dir: string): string {
  const bin = path.join(dir, "bin");
  fs.mkdirSync(bin);
  fs.writeFileSync(
    path.join(bin, "tcpdump"),
    '#!/bin/sh\nwhile [ $# -gt 0 ]; do [ "$1" = -w ] && w=$2; shift; done\necho packets > "${w}0"\nexec sleep 1000\n',
    { mode: 0o755 },
  );
  return bin;
}

/** Runs the script in a new network namespace after `setup` (shell lines run there first); resolves its exit. */
function runScript(dir: string, setup: string): { exited: Promise<{ code: number | null; ms: number }> } {
  const started = Date.now();
  const child = spawn(
    "unshare",
    ["-n", "sh", "-c", `${setup}\nexec sh -c "$0" capture "$1" 1 3`, CAPTURE_SCRIPT, path.join(dir, "shop-server")],
    { env: { ...process.env, PATH: `${fakeTcpdump(dir)}:${process.env.PATH}` }, stdio: "ignore" },
  );
  return {
    exited: new Promise((resolve) => child.on("exit", (code) => resolve({ code, ms: Date.now() - started }))),
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
    expect(ms).toBeGreaterThan(5_400);
    expect(ms).toBeLessThan(9_000);
    expect(fs.readFileSync(path.join(dir, "shop-server.pcap0"), "utf8")).toBe("packets\n");
  }, 15_000);

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
        .filter((f) => f !== "bin")
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
  }, 15_000);
});
