// The hosts target under Pulumi's mocks: existing Docker hosts from the config, reached over SSH with their
// pinned keys, and on them exactly what the ec2 target puts on its VMs (RemoteEngines), without any AWS resource.
import { beforeAll, describe, expect, it } from "vitest";
import { runPolicies } from "../../policies/evaluate";
import type { Graph } from "../../src/runner/check/graph";
import {
  CONTAINER,
  container,
  containers,
  engineOf,
  envOf,
  graphOf,
  networksOf,
  resource,
  sshOptions,
} from "./helpers";

const KEY = (n: number) => `ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI${"k".repeat(10)}${n} root@host${n}`;
const HOSTS = {
  env: { address: "192.0.2.10", user: "deploy", hostKey: KEY(1), port: 2222 },
  computers: {
    desktop: {
      address: "desktop.lab.example",
      user: "deploy",
      hostKey: KEY(2),
      privateAddress: "10.0.0.12",
      identityFile: "/keys/lab",
    },
  },
};
const CONFIG = {
  target: "hosts",
  hosts: HOSTS,
  websites: {
    shop: {
      domains: ["shop.test"],
      server: { image: "multienv/sample-shop-server" },
      frontend: { image: "multienv/sample-shop-frontend" },
    },
  },
  computers: { desktop: { network: "none" } },
};

describe("hosts target", () => {
  let graph: Graph;
  let revealed: Graph;
  beforeAll(async () => {
    graph = await graphOf("h1", CONFIG);
    revealed = await graphOf("h1", CONFIG, {}, true);
  });

  it("creates no AWS resource and deletes nothing with a machine (the hosts outlive the stack)", () => {
    expect(
      graph.resources.filter((r) => r.type.startsWith("aws:") || r.type.startsWith("pulumi:providers:aws")),
    ).toEqual([]);
    for (const r of graph.resources) expect(r.deletedWith, r.name).toBeUndefined();
    expect(runPolicies(graph)).toEqual([]);
    // The image loads are the project's own commands: never sent to the docker plugin.
    for (const r of graph.resources.filter((r) => r.type.startsWith("pulumi-nodejs:")))
      expect(r.provider, `${r.type} ${r.name}`).toBeUndefined();
  });

  it("reaches each role's engine over SSH with the host's own key, user, port and identity", () => {
    const engine = (name: string) => {
      const { host, sshOpts } = engineOf(graph, resource(graph, CONTAINER, name));
      return { host, options: sshOptions(sshOpts!) };
    };
    // The key line as pinned: type and key, without the comment.
    const pinned = (n: number) => KEY(n).split(" ").slice(0, 2).join(" ");
    const gateway = engine("h1-gateway");
    expect(gateway.host).toBe("ssh://deploy@192.0.2.10:2222");
    expect(gateway.options.KnownHostsCommand).toBe(`/bin/echo ${gateway.options.HostKeyAlias} ${pinned(1)}`);
    expect(gateway.options).toMatchObject({
      UserKnownHostsFile: "/dev/null",
      GlobalKnownHostsFile: "/dev/null",
      StrictHostKeyChecking: "yes",
    });
    expect(gateway.options.IdentityFile).toBeUndefined();
    const browser = engine("h1-desktop-browser");
    expect(browser.host).toBe("ssh://deploy@desktop.lab.example:22");
    expect(browser.options.KnownHostsCommand).toBe(`/bin/echo ${browser.options.HostKeyAlias} ${pinned(2)}`);
    expect(browser.options).toMatchObject({
      UserKnownHostsFile: "/dev/null",
      StrictHostKeyChecking: "yes",
      IdentityFile: "/keys/lab",
      IdentitiesOnly: "yes",
    });
    expect(containers(graph)).toHaveLength(5);
    for (const c of containers(graph)) expect(engineOf(graph, c).host, c.name).toMatch(/^ssh:\/\//);
  });

  it("checks each host's readiness without waiting for cloud-init, which an existing host need not have", () => {
    const ready = graph.resources
      .filter((r) => r.name.endsWith("-docker-ready"))
      .map((r) => [r.name, r.inputs.create as string]);
    expect(ready.map(([n]) => n).sort()).toEqual(["h1-desktop-docker-ready", "h1-env-docker-ready"]);
    for (const [, script] of ready) {
      expect(script).not.toContain("cloud-init");
      expect(script).toContain("grep -qx docker");
      expect(script).toContain("StrictHostKeyChecking yes");
    }
  });

  it("lays the env out as on ec2: the proxy's control port on its host, the gateway at the env host's addresses", () => {
    expect(container(graph, "h1-desktop-proxy").ports).toEqual([{ internal: 9000, external: 9000, ip: "0.0.0.0" }]);
    expect(networksOf(container(graph, "h1-desktop-proxy"))).toEqual(["h1-desktop-net", "h1-desktop-egress"]);
    const gateway = JSON.parse(envOf(container(revealed, "h1-gateway")).MULTIENV_GATEWAY_CONFIG);
    expect(gateway.computers.desktop.cdp).toBe("http://10.0.0.12:9000/cdp");
    expect(JSON.parse(envOf(container(revealed, "h1-desktop-proxy")).MULTIENV_SITE_PROXY_CONFIG).gateway).toBe(
      "http://192.0.2.10:8081",
    );
    expect(graph.outputs.gatewayUrl).toBe("http://127.0.0.1:<local port of the tunnel>");
    expect(container(graph, "h1-gateway").ports[0]).toEqual({ internal: 8080, external: 8080, ip: "127.0.0.1" });
    const loads = graph.resources
      .filter((r) => r.name.endsWith("-load-images"))
      .map((r) => r.name)
      .sort();
    expect(loads).toEqual(["h1-desktop-engine-load-images", "h1-env-engine-load-images"]);
  });

  it("refuses a computer without a host, a host for no computer, and two roles on one host, naming each key", async () => {
    const bad = { ...CONFIG, hosts: { env: HOSTS.env, computers: { laptop: { ...HOSTS.env } } } };
    await expect(graphOf("h2", bad)).rejects.toThrow(
      /multienv:hosts\.computers\.desktop: is missing: computer desktop needs a host[\s\S]*multienv:hosts\.computers\.laptop: names no computer of this stack[\s\S]*multienv:hosts\.computers\.laptop: is the same host as hosts\.env \(192\.0\.2\.10:2222\)/,
    );
    await expect(graphOf("h3", { ...CONFIG, hosts: undefined })).rejects.toThrow(
      /multienv:hosts: is required when target is hosts/,
    );
    await expect(
      graphOf("h4", { ...CONFIG, hosts: { ...HOSTS, env: { ...HOSTS.env, hostKey: "AAAA" } } }),
    ).rejects.toThrow(/multienv:hosts\.env\.hostKey: must be the host's public key line/);
  });
});
