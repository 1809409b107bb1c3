// src/plan/wiring.ts: how containers are wired on an engine.
import { describe, expect, it } from "vitest";
import {
  browserNetworks,
  CAPTURE_SCRIPT,
  captureCommand,
  gatewayNetworks,
  gatewayPublish,
  goDuration,
  proxyNetworks,
  serverNetworks,
  websiteSettingsJson,
} from "../../src/plan/wiring";
import { computer, layoutPlan, site } from "./layout-fixture";

describe("wiring", () => {
  it("spells durations as Go prints them, the form the docker provider reads a health check back in", () => {
    expect([0, 1, 30, 59, 60, 240, 3599, 3600, 3661].map(goDuration)).toEqual([
      "0s",
      "1s",
      "30s",
      "59s",
      "1m0s",
      "4m0s",
      "59m59s",
      "1h0m0s",
      "1h1m1s",
    ]);
    // Go prints a fraction of a second as ms or µs; nothing asks for one, so it is refused, not misspelt.
    for (const bad of [0.5, 90.1, -1]) expect(() => goDuration(bad)).toThrow(/not whole seconds/);
  });

  it("puts a live site's server on egress and a synthetic one's not", () => {
    const p = layoutPlan();
    expect(serverNetworks(p, site(p, "gh")).map((n) => n.network)).toEqual(["s-env", "s-egress"]);
    expect(serverNetworks(p, site(p, "shop")).map((n) => n.network)).toEqual(["s-env"]);
  });

  it("gives a proxy its computer's network, its link to the gateway, and an egress of its own only when the computer reaches public hosts", () => {
    const p = layoutPlan();
    expect(proxyNetworks(p, computer(p, "closed")).map((n) => n.network)).toEqual(["s-closed-net", "s-closed-link"]);
    expect(proxyNetworks(p, computer(p, "listed")).map((n) => n.network)).toEqual([
      "s-listed-net",
      "s-listed-link",
      "s-listed-egress",
    ]);
    // Never the env network (the sites) or the sites' egress network (the live servers).
    for (const c of p.computers) expect(proxyNetworks(p, c).map((n) => n.network)).not.toContain("s-env");
    for (const c of p.computers) expect(proxyNetworks(p, c).map((n) => n.network)).not.toContain("s-egress");
    expect(browserNetworks(computer(p, "wide")).map((n) => n.network)).toEqual(["s-wide-net"]);
  });

  it("puts the gateway on the env network, the ingress network and each computer's link, each under a name of that network alone", () => {
    const p = layoutPlan();
    expect(gatewayNetworks(p)).toEqual([
      { network: "s-env", aliases: [] },
      { network: "s-ingress", aliases: ["gateway-ingress"] },
      { network: "s-closed-link", aliases: ["gateway-closed"] },
      { network: "s-listed-link", aliases: ["gateway-listed"] },
      { network: "s-wide-link", aliases: ["gateway-wide"] },
    ]);
  });

  it("rotates captures by the configured size and count", () => {
    const p = layoutPlan({ capture: { fileSizeMb: 7, fileCount: 4 } });
    const command = captureCommand(
      p,
      p.capture.sidecars.find((s) => s.target === "s-gh-server")!,
    );
    expect(command).toEqual(["sh", "-c", CAPTURE_SCRIPT, "capture", "/captures/gh-server", "7", "4"]);
    expect(CAPTURE_SCRIPT).toContain('tcpdump -i any -n -U -w "$base.pcap" -C "$size" -W "$count" -Z root');
  });

  it("publishes the gateway on loopback with an engine-chosen port on docker, on the VM's gateway port on ec2", () => {
    expect(gatewayPublish(layoutPlan())).toEqual([{ internal: 8080, ip: "127.0.0.1" }]);
    const ec2 = {
      region: "us-east-1",
      instanceType: "t3.large",
      runnerCidrs: ["192.0.2.1/32"],
      sshPublicKey: "ssh-ed25519 AAAA x",
    };
    // ec2: the browse listener too, for the computer VMs (their security groups reach it alone).
    expect(gatewayPublish(layoutPlan({ target: "ec2", ec2 }))).toEqual([
      { internal: 8080, external: 8080, ip: "127.0.0.1" },
      { internal: 8081, external: 8081, ip: "0.0.0.0" },
    ]);
  });

  it("merges secret values over plain settings in one JSON line", () => {
    expect(websiteSettingsJson({ account: "alex", token: "placeholder" }, { token: "t0k" })).toBe(
      '{"account":"alex","token":"t0k"}',
    );
  });
});
