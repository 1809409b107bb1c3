// src/plan/layout.ts: the topology rules the components follow, as pure functions.
import { execFileSync } from "node:child_process";
import { describe, expect, it } from "vitest";
import { plan, type Plan } from "../../src/plan";
import type { StackConfig } from "../../src/plan/types";
import {
  browserNetworks,
  captureCommand,
  ec2SecurityRules,
  gatewayNetworks,
  gatewayPublish,
  gatewayUrl,
  proxyNetworks,
  rehost,
  serverNetworks,
  shipImagesCommand,
  siteUrls,
  websiteSettingsJson,
  lifetimeFuseLines,
} from "../../src/plan/layout";

function planned(overrides: Partial<StackConfig>): Plan {
  const config: StackConfig = {
    target: "docker",
    websites: {
      shop: { domains: ["shop.test"], live: false, allowHosts: [], server: { image: "s", port: 8000 }, frontend: { image: "f", port: 80 }, settings: {}, secretSettings: {} },
      gh: { domains: ["github.com"], live: true, allowHosts: [], server: { image: "g", port: 8000 }, settings: {}, secretSettings: {} },
    },
    computers: {
      wide: { network: "allow-all", routesSites: true, startTabs: [] },
      listed: { network: ["example.org"], routesSites: true, startTabs: [] },
      closed: { network: "none", routesSites: true, startTabs: [] },
    },
    captureTraffic: true,
    capture: { fileSizeMb: 20, fileCount: 10 },
    selfTest: true,
    ...overrides,
  };
  const result = plan(config, { stack: "s" });
  if (!result.ok) throw new Error(JSON.stringify(result.problems));
  return result.plan;
}

const computer = (p: Plan, name: string) => p.computers.find((c) => c.name === name)!;
const site = (p: Plan, name: string) => p.websites.find((w) => w.name === name)!;

describe("layout", () => {
  it("puts a live site's server on egress and a synthetic one's not", () => {
    const p = planned({});
    expect(serverNetworks(p, site(p, "gh")).map((n) => n.network)).toEqual(["s-env", "s-egress"]);
    expect(serverNetworks(p, site(p, "shop")).map((n) => n.network)).toEqual(["s-env"]);
  });

  it("gives a proxy its computer's network, its link to the gateway, and an egress of its own only when the computer reaches public hosts", () => {
    const p = planned({});
    expect(proxyNetworks(p, computer(p, "closed")).map((n) => n.network)).toEqual(["s-closed-net", "s-closed-link"]);
    expect(proxyNetworks(p, computer(p, "listed")).map((n) => n.network)).toEqual(["s-listed-net", "s-listed-link", "s-listed-egress"]);
    // Never the env network (the sites) or the sites' egress network (the live servers).
    for (const c of p.computers) expect(proxyNetworks(p, c).map((n) => n.network)).not.toContain("s-env");
    for (const c of p.computers) expect(proxyNetworks(p, c).map((n) => n.network)).not.toContain("s-egress");
    expect(browserNetworks(computer(p, "wide")).map((n) => n.network)).toEqual(["s-wide-net"]);
  });

  it("puts the gateway on the env network, the ingress network and each computer's link, each under a name of that network alone", () => {
    const p = planned({});
    expect(gatewayNetworks(p)).toEqual([
      { network: "s-env", aliases: [] },
      { network: "s-ingress", aliases: ["gateway-ingress"] },
      { network: "s-closed-link", aliases: ["gateway-closed"] },
      { network: "s-listed-link", aliases: ["gateway-listed"] },
      { network: "s-wide-link", aliases: ["gateway-wide"] },
    ]);
  });

  it("rotates captures by the configured size and count", () => {
    const p = planned({ capture: { fileSizeMb: 7, fileCount: 4 } });
    const command = captureCommand(p, p.capture.sidecars.find((s) => s.target === "s-gh-server")!);
    expect(command.slice(command.indexOf("-w"), command.indexOf("-w") + 6)).toEqual(["-w", "/captures/gh-server.pcap", "-C", "7", "-W", "4"]);
  });

  it("publishes the gateway on loopback with an engine-chosen port on docker, on the VM's gateway port on ec2", () => {
    expect(gatewayPublish(planned({}))).toEqual([{ internal: 8080, ip: "127.0.0.1" }]);
    const ec2 = { region: "us-east-1", instanceType: "t3.large", runnerCidrs: ["192.0.2.1/32"], sshPublicKey: "ssh-ed25519 AAAA x" };
    // ec2: the runner's listener on the VM's loopback alone (the runner comes through an SSH tunnel); the browse
    // listener on every address, for the computer VMs (their security groups reach it alone).
    expect(gatewayPublish(planned({ target: "ec2", ec2 }))).toEqual([
      { internal: 8080, external: 8080, ip: "127.0.0.1" },
      { internal: 8081, external: 8081, ip: "0.0.0.0" },
    ]);
  });

  it("never opens SSH or the gateway port beyond the runner, and gives web egress only to computers that reach public hosts", () => {
    const ec2 = { region: "us-east-1", instanceType: "t3.large", runnerCidrs: ["192.0.2.1/32", "2001:db8::/64"], sshPublicKey: "ssh-ed25519 AAAA x" };
    const rules = ec2SecurityRules(planned({ target: "ec2", ec2 }));
    for (const rule of [...rules.env.ingress, ...rules.computers.closed.ingress].filter((r) => r.peer === undefined)) {
      expect(rule.cidrBlocks, rule.description).toEqual(["192.0.2.1/32"]);
      expect(rule.ipv6CidrBlocks, rule.description).toEqual(["2001:db8::/64"]);
    }
    const webPorts = (name: string) => rules.computers[name].egress.filter((r) => r.cidrBlocks?.includes("0.0.0.0/0")).map((r) => r.fromPort);
    expect(webPorts("wide")).toEqual([80, 443]);
    expect(webPorts("listed")).toEqual([80, 443]);
    expect(webPorts("closed")).toEqual([]);
    expect(rules.computers.closed.egress).toEqual([{ description: "the gateway browse listener", protocol: "tcp", fromPort: 8081, toPort: 8081, peer: "env" }]);
    // The computers reach the gateway's browse listener only, never its published one; the gateway VM reaches each
    // computer's control port only (its listener wants the computer's token).
    expect(rules.env.ingress.filter((r) => r.peer !== undefined).map((r) => r.fromPort)).toEqual([8081, 8081, 8081]);
    expect(rules.computers.closed.ingress.filter((r) => r.peer !== undefined).map((r) => [r.fromPort, r.toPort])).toEqual([[9000, 9000]]);
  });

  it("merges secret values over plain settings in one JSON line", () => {
    expect(websiteSettingsJson({ account: "alex", token: "placeholder" }, { token: "t0k" })).toBe('{"account":"alex","token":"t0k"}');
  });

  it("rehosts a service URL onto an address, keeping scheme, port and path", () => {
    expect(rehost("http://s-gateway:8080", "10.0.1.5")).toBe("http://10.0.1.5:8080");
    expect(rehost("http://s-c-proxy:9000/log", "10.0.1.6")).toBe("http://10.0.1.6:9000/log");
    expect(rehost("http://s-c-proxy:9222", "fd00::5")).toBe("http://[fd00::5]:9222");
    expect(rehost("http://[fd00::1]:9222/x", "10.0.0.1")).toBe("http://10.0.0.1:9222/x");
  });

  it("routes a synthetic site to /svc and /website, a live site to /svc only", () => {
    const url = gatewayUrl("127.0.0.1", 49153);
    expect(url).toBe("http://127.0.0.1:49153");
    expect(siteUrls(url, { name: "shop", live: false })).toEqual({ svcUrl: `${url}/svc/shop/`, browseUrl: `${url}/website/shop/` });
    expect(siteUrls(url, { name: "gh", live: true })).toEqual({ svcUrl: `${url}/svc/gh/` });
  });

  it("ships a host's images in one compressed save, by id, with a shell command sh accepts", () => {
    const endpoint = { host: "203.0.113.9", user: "ec2-user", hostKey: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAITestKey" };
    const script = shipImagesCommand(["sha256:bbb", "sha256:aaa", "sha256:bbb"], endpoint);
    execFileSync("sh", ["-n", "-c", script]);
    expect(script).toContain("for i in '\\''sha256:aaa'\\'' '\\''sha256:bbb'\\''; do docker image inspect");
    expect(script).toContain('docker save "$@" | $pack | ssh -F "$cfg" "$alias" "$unpack | docker load"');
    expect(script).toContain('pack="zstd -q -T0 -3"');
    expect(script.match(/docker save/g)).toHaveLength(1);
  });
});

describe("lifetimeFuseLines", () => {
  it("arms a persistent timer at an absolute time systemd reads, hours after boot", () => {
    const lines = lifetimeFuseLines(0.5);
    expect(lines[0]).toContain('date -u -d "+30 minutes"');
    expect(lines.join("\n")).toContain("Persistent=true");
    expect(lines.join("\n")).toContain("ExecStart=/usr/bin/systemctl poweroff");
    // The fuse's time as the first line computes it, parsed by systemd itself where it is installed.
    const at = execFileSync("/bin/bash", ["-c", `${lines[0]}; echo "$fuse_at"`]).toString().trim();
    const minutes = (Date.parse(at.replace(" UTC", "Z").replace(" ", "T")) - Date.now()) / 60_000;
    expect(minutes).toBeGreaterThan(28);
    expect(minutes).toBeLessThan(31);
    try {
      execFileSync("systemd-analyze", ["calendar", at], { stdio: "pipe" });
    } catch (error) {
      if ((error as { code?: string }).code !== "ENOENT") throw error;
    }
  });
});
