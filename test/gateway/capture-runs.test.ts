// A capture that started again after its website container restarted: the earlier run's files are listed under
// their run, the current files as the run after, and the listing shows where nothing was recorded.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { listCaptures } from "../../src/service-kit/captures";
import { captureGaps, parseCaptureName } from "../../src/protocol/traffic";

function file(dir: string, name: string, modifiedSeconds: number): void {
  fs.writeFileSync(path.join(dir, name), name);
  fs.utimesSync(path.join(dir, name), modifiedSeconds, modifiedSeconds);
}

describe("capture runs", () => {
  it("parse an earlier run's file names and refuse run 0 or a run without its rotation index", () => {
    expect(parseCaptureName("shop-server.run2.pcap1")).toEqual({
      site: "shop",
      role: "server",
      index: 1,
      earlierRun: 2,
    });
    expect(parseCaptureName("shop-server.pcap1")).toEqual({ site: "shop", role: "server", index: 1 });
    for (const bad of ["shop-server.run0.pcap1", "shop-server.run2.pcap", "shop-server.run.pcap1", "shop-server.run2"])
      expect(parseCaptureName(bad), bad).toBeUndefined();
  });

  it("are listed oldest first, each file with its run, and a gap between consecutive runs of a container", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "multienv-capture-runs-"));
    file(dir, "shop-server.run1.pcap0", 1_000);
    file(dir, "shop-server.run1.pcap1", 1_010);
    file(dir, "shop-server.run2.pcap0", 1_100);
    file(dir, "shop-server.pcap0", 1_200);
    file(dir, "shop-frontend.pcap0", 1_050);
    const listed = await listCaptures(dir);
    expect(listed.map((c) => [c.name, c.container, c.run])).toEqual([
      ["shop-server.run1.pcap0", "shop-server", 1],
      ["shop-server.run1.pcap1", "shop-server", 1],
      ["shop-frontend.pcap0", "shop-frontend", 1],
      ["shop-server.run2.pcap0", "shop-server", 2],
      ["shop-server.pcap0", "shop-server", 3],
    ]);
    const at = (s: number) => new Date(s * 1000).toISOString();
    expect(captureGaps(listed)).toEqual([
      { container: "shop-server", run: 1, endedAt: at(1_010), resumedBy: at(1_100) },
      { container: "shop-server", run: 2, endedAt: at(1_100), resumedBy: at(1_200) },
    ]);
  });
});
