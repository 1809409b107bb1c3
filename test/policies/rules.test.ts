// Each policy of the pack against inputs that comply and inputs that do not, through runPolicies
// (the pure evaluation `multienv check` uses). The CrossGuard path is in pack.test.ts.
import { describe, expect, it } from "vitest";
import { runPolicies, type Graph, type GraphResource } from "../../policies/evaluate";
import { TYPES } from "../../policies/model";
import { aws, computer, container, dockerGraph, ec2Resources, labels, sidecar, site, volume } from "./fixtures";

function violations(graph: Graph, policy: string, options: { knownSecrets?: string[] } = {}) {
  return runPolicies(graph, { ...options, only: [policy] });
}

/** `graph` with the inputs of resource `name` replaced by `patch(inputs)`. */
function patched(
  graph: Graph,
  name: string,
  patch: (inputs: Record<string, unknown>) => Record<string, unknown>,
): Graph {
  if (!graph.resources.some((r) => r.name === name)) throw new Error(`fixture has no resource ${name}`);
  return {
    ...graph,
    resources: graph.resources.map((r) => (r.name === name ? { ...r, inputs: patch({ ...r.inputs }) } : r)),
  };
}

function withResources(graph: Graph, ...extra: GraphResource[]): Graph {
  return { ...graph, resources: [...graph.resources, ...extra] };
}

function without(graph: Graph, name: string): Graph {
  return { ...graph, resources: graph.resources.filter((r) => r.name !== name) };
}

describe("the compliant fixture", () => {
  it("passes every policy", () => {
    expect(runPolicies(dockerGraph())).toEqual([]);
    expect(runPolicies({ resources: ec2Resources() })).toEqual([]);
  });
});

describe("container-privileges", () => {
  const P = "container-privileges";

  it("lets a capture sidecar hold NET_RAW and NET_ADMIN", () => {
    expect(violations(dockerGraph(), P)).toEqual([]);
  });

  it("refuses NET_RAW or NET_ADMIN on any other container, however the capability is spelled", () => {
    const graph = patched(dockerGraph(), "t-shop-server", (i) => ({
      ...i,
      capabilities: { adds: ["cap_net_admin"], drops: ["NET_RAW"] },
    }));
    const found = violations(graph, P);
    expect(found).toHaveLength(1);
    expect(found[0].resource).toContain("t-shop-server");
    expect(found[0].message).toMatch(/adds NET_ADMIN but is not a capture sidecar/);
  });

  it("refuses a container that keeps Docker's default NET_RAW", () => {
    const graph = patched(dockerGraph(), "t-desktop-browser", (i) => ({ ...i, capabilities: undefined }));
    expect(violations(graph, P).map((v) => v.message)).toEqual([
      expect.stringMatching(/keeps NET_RAW.*add "NET_RAW" to capabilities.drops/),
    ]);
  });

  it("accepts dropping ALL instead of NET_RAW", () => {
    const graph = patched(dockerGraph(), "t-desktop-browser", (i) => ({ ...i, capabilities: { drops: ["ALL"] } }));
    expect(violations(graph, P)).toEqual([]);
  });

  it("refuses privileged containers, sidecars included", () => {
    const graph = patched(dockerGraph(), "t-shop-server-capture", (i) => ({ ...i, privileged: true }));
    expect(violations(graph, P).map((v) => v.message)).toEqual([expect.stringMatching(/is privileged/)]);
  });

  it("refuses the host's network and PID namespaces", () => {
    let graph = patched(dockerGraph(), "t-gateway", (i) => ({ ...i, networkMode: "host" }));
    graph = patched(graph, "t-shop-frontend", (i) => ({ ...i, pidMode: "host" }));
    const found = violations(graph, P);
    expect(found.map((v) => v.message)).toEqual([
      expect.stringMatching(/host's network namespace/),
      expect.stringMatching(/host's PID namespace/),
    ]);
  });

  it("refuses a container with no role label: the pack could not tell what it may hold", () => {
    const graph = withResources(dockerGraph(), container("t-stray", { capabilities: { drops: ["NET_RAW"] } }));
    expect(violations(graph, P).map((v) => v.message)).toEqual([expect.stringMatching(/has no multienv.role label/)]);
  });
});

describe("captures-volume-access", () => {
  const P = "captures-volume-access";

  it("accepts sidecars read-write and the gateway read-only", () => {
    expect(violations(dockerGraph(), P)).toEqual([]);
  });

  it("refuses a website container mounting the captures volume, even read-only", () => {
    const graph = patched(dockerGraph(), "t-shop-server", (i) => ({
      ...i,
      mounts: [{ type: "volume", source: "t-captures", target: "/data", readOnly: true }],
    }));
    const found = violations(graph, P);
    expect(found).toHaveLength(1);
    expect(found[0].message).toMatch(/"t-shop-server" \(role server\) mounts the captures volume "t-captures"/);
  });

  it("refuses the gateway mounting it read-write", () => {
    const graph = patched(dockerGraph(), "t-gateway", (i) => ({
      ...i,
      mounts: [{ type: "volume", source: "t-captures", target: "/captures", readOnly: false }],
    }));
    expect(violations(graph, P).map((v) => v.message)).toEqual([
      expect.stringMatching(/gateway .* read-write; set readOnly: true/),
    ]);
  });

  it("sees the legacy `volumes` input too", () => {
    const graph = patched(dockerGraph(), "t-desktop-browser", (i) => ({
      ...i,
      volumes: [{ volumeName: "t-captures", containerPath: "/x" }],
    }));
    expect(violations(graph, P)).toHaveLength(1);
  });

  it("refuses inheriting another container's volumes", () => {
    const graph = patched(dockerGraph(), "t-shop-frontend", (i) => ({
      ...i,
      volumes: [{ fromContainer: "t-shop-server-capture" }],
    }));
    expect(violations(graph, P).map((v) => v.message)).toEqual([
      expect.stringMatching(/inherits the volumes of container "t-shop-server-capture"/),
    ]);
  });

  it("does not mistake another volume for the captures volume", () => {
    const graph = patched(dockerGraph(), "t-shop-server", (i) => ({
      ...i,
      mounts: [{ type: "volume", source: "t-desktop-ca", target: "/captures", readOnly: false }],
    }));
    expect(violations(graph, P)).toEqual([]);
  });
});

describe("site-proxy-isolation", () => {
  const P = "site-proxy-isolation";

  it("accepts a proxy on its own network, its link to the gateway and an egress of its own", () => {
    expect(violations(dockerGraph(), P)).toEqual([]);
  });

  it("refuses a proxy on the env network: every site container there could reach its control listener", () => {
    const graph = patched(dockerGraph(), "t-desktop-proxy", (i) => ({
      ...i,
      networksAdvanced: [{ name: "t-desktop-net" }, { name: "t-desktop-link" }, { name: "t-env" }],
    }));
    const messages = violations(graph, P).map((v) => v.message);
    expect(messages).toContainEqual(
      expect.stringMatching(
        /"t-shop-server" \(role server\) shares network "t-env" with the site proxy "t-desktop-proxy"/,
      ),
    );
    expect(messages).toContainEqual(
      expect.stringMatching(/"t-shop-frontend" \(role frontend\) shares network "t-env"/),
    );
  });

  it("refuses a proxy on the live servers' egress network, and a site container on a proxy's link", () => {
    const onEgress = patched(dockerGraph(), "t-desktop-proxy", (i) => ({
      ...i,
      networksAdvanced: [{ name: "t-desktop-net" }, { name: "t-desktop-link" }, { name: "t-egress" }],
    }));
    expect(violations(onEgress, P).map((v) => v.message)).toEqual([
      expect.stringMatching(/"t-github-server" .* shares network "t-egress"/),
    ]);
    const intruder = patched(dockerGraph(), "t-shop-server", (i) => ({
      ...i,
      networksAdvanced: [{ name: "t-env" }, { name: "t-desktop-link" }],
    }));
    expect(violations(intruder, P).map((v) => v.message)).toEqual([
      expect.stringMatching(/"t-shop-server" .* shares network "t-desktop-link"/),
    ]);
  });

  it("refuses another computer's browser beside a proxy", () => {
    const graph = withResources(
      dockerGraph(),
      ...computer("other").map((r) =>
        r.name === "t-other-browser"
          ? { ...r, inputs: { ...r.inputs, networksAdvanced: [{ name: "t-other-net" }, { name: "t-desktop-link" }] } }
          : r,
      ),
    );
    expect(violations(graph, P).map((v) => v.message)).toEqual([
      expect.stringMatching(
        /"t-other-browser" \(role browser\) shares network "t-desktop-link" with the site proxy "t-desktop-proxy"/,
      ),
    ]);
  });
});

describe("computer-network-isolation", () => {
  const P = "computer-network-isolation";

  it("accepts a browser alone with its proxy on an internal network", () => {
    expect(violations(dockerGraph(), P)).toEqual([]);
  });

  it("refuses a browser that is also on the env network", () => {
    const graph = patched(dockerGraph(), "t-desktop-browser", (i) => ({
      ...i,
      networksAdvanced: [{ name: "t-desktop-net" }, { name: "t-env" }],
    }));
    const messages = violations(graph, P).map((v) => v.message);
    expect(messages).toContainEqual(expect.stringMatching(/attached to 2 networks \(t-desktop-net, t-env\)/));
  });

  it("refuses a third container on the computer's network", () => {
    const graph = patched(dockerGraph(), "t-shop-server", (i) => ({
      ...i,
      networksAdvanced: [{ name: "t-env" }, { name: "t-desktop-net" }],
    }));
    const found = violations(graph, P);
    expect(found).toHaveLength(1);
    expect(found[0].resource).toContain("t-shop-server");
    expect(found[0].message).toMatch(/only that computer's site proxy may be/);
  });

  it("tells engines apart: a same-named network on another Docker engine is another network", () => {
    // An engine is its docker provider's host: each VM's provider, and two providers of the local engine.
    const provider = (name: string, host?: string): GraphResource => ({
      type: "pulumi:providers:docker",
      name,
      urn: `urn:pulumi:t::multienv::pulumi:providers:docker::${name}`,
      inputs: host === undefined ? {} : { host, sshOpts: '["-o","StrictHostKeyChecking=yes"]' },
    });
    const providers = [
      provider("t-desktop-engine-provider", "ssh://ec2-user@desktop:22"),
      provider("t-env-engine-provider", "ssh://ec2-user@env:22"),
      provider("t-local-provider"),
      provider("t-local-again-provider"),
    ];
    const onEngine = (r: GraphResource, engine: string): GraphResource => ({ ...r, provider: `t-${engine}-provider` });
    const spread = (on: (r: GraphResource) => string): Graph => ({
      ...dockerGraph(),
      resources: [...providers, ...dockerGraph().resources.map((r) => onEngine(r, on(r)))],
    });
    const graph = spread((r) => (r.name.startsWith("t-desktop") ? "desktop-engine" : "env-engine"));
    const elsewhere = onEngine({ ...site("shop", "server"), name: "t-other" }, "env-engine");
    elsewhere.inputs = { ...elsewhere.inputs, name: "t-other", networksAdvanced: [{ name: "t-desktop-net" }] };
    expect(violations(withResources(graph, elsewhere), P)).toEqual([]);
    expect(violations(withResources(graph, onEngine(elsewhere, "desktop-engine")), P)).toHaveLength(1);
    // Two providers of one host are one engine: the same-named network is the same network.
    const local = spread((r) => (r.name.startsWith("t-desktop") ? "local" : "local-again"));
    expect(violations(withResources(local, onEngine(elsewhere, "local-again")), P)).toHaveLength(1);
    // A host not known yet (a preview before the VM exists) may be any engine: judged as the same one.
    const unknown = { ...providers[0], inputs: { host: "[unknown]" } };
    const previewed = { ...graph, resources: [unknown, ...graph.resources.slice(1)] };
    expect(violations(withResources(previewed, elsewhere), P)).toHaveLength(1);
  });

  it("refuses a computer network that is not internal", () => {
    const graph = patched(dockerGraph(), "t-desktop-net", (i) => ({ ...i, internal: false }));
    expect(violations(graph, P).map((v) => v.message)).toEqual([
      expect.stringMatching(/is not internal; set internal: true/),
    ]);
  });

  it("refuses a browser on Docker's default bridge", () => {
    const graph = patched(dockerGraph(), "t-desktop-browser", (i) => ({ ...i, networkMode: "bridge" }));
    expect(violations(graph, P).map((v) => v.message)).toContainEqual(
      expect.stringMatching(/uses networkMode "bridge"/),
    );
  });

  it("refuses a computer network with no proxy, or with another computer's proxy", () => {
    const noProxy = patched(dockerGraph(), "t-desktop-proxy", (i) => ({ ...i, networksAdvanced: [{ name: "t-env" }] }));
    expect(violations(noProxy, P).map((v) => v.message)).toEqual([expect.stringMatching(/has no site proxy/)]);
    const foreign = patched(dockerGraph(), "t-desktop-proxy", (i) => ({
      ...i,
      labels: labels({ "multienv.role": "site-proxy", "multienv.computer": "other" }),
    }));
    expect(violations(foreign, P).map((v) => v.message)).toEqual([
      expect.stringMatching(/is attached to network/),
      expect.stringMatching(/has no site proxy/),
    ]);
  });
});

describe("secrets-stay-secret", () => {
  const P = "secrets-stay-secret";

  it("accepts secret-marked and redacted secrets", () => {
    expect(violations(dockerGraph(), P)).toEqual([]);
    const redacted = patched(dockerGraph(), "t-gateway", (i) => ({ ...i, envs: "[secret]" }));
    expect(violations({ ...redacted, outputs: { controlToken: "[secret]", captureTraffic: true } }, P)).toEqual([]);
  });

  it("refuses a plaintext control token in the gateway's environment", () => {
    const graph = patched(dockerGraph(), "t-gateway", (i) => ({
      ...i,
      envs: ["MULTIENV_CONTROL_TOKEN=0123456789abcdef0123456789abcdef"],
    }));
    const messages = violations(graph, P).map((v) => v.message);
    expect(messages).toContainEqual(expect.stringMatching(/"t-gateway" sets MULTIENV_CONTROL_TOKEN in plaintext/));
    // ... and the token's value (known from the secret controlToken output) is found there too.
    expect(messages).toContainEqual(
      expect.stringMatching(/"t-gateway" input envs\[0\] holds a secret value in plaintext/),
    );
  });

  it("refuses a plaintext controlToken output, and a missing one", () => {
    const plain = {
      ...dockerGraph(),
      outputs: { controlToken: "0123456789abcdef0123456789abcdef", captureTraffic: true },
    };
    expect(violations(plain, P).map((v) => v.message)).toContainEqual(
      expect.stringMatching(/controlToken output is plaintext/),
    );
    const missing = { ...dockerGraph(), outputs: { captureTraffic: true } };
    expect(violations(missing, P).map((v) => v.message)).toEqual([expect.stringMatching(/exports no controlToken/)]);
  });

  it("refuses a plaintext agentTokens output: each opens a computer's DevTools", () => {
    const graph = dockerGraph();
    const plain = {
      ...graph,
      outputs: { ...graph.outputs, agentTokens: { desktop: "0123456789abcdef0123456789abcdef" } },
    };
    expect(violations(plain, P).map((v) => v.message)).toContainEqual(
      expect.stringMatching(/agentTokens output is plaintext/),
    );
  });

  it("refuses plaintext settings on a server whose site has secret settings", () => {
    const graph = patched(dockerGraph(), "t-github-server", (i) => ({
      ...i,
      envs: ['AGENTENV_WEBSITE_SETTINGS={"account":"alex"}'],
    }));
    expect(violations(graph, P).map((v) => v.message)).toEqual([
      expect.stringMatching(/"t-github-server" sets AGENTENV_WEBSITE_SETTINGS in plaintext/),
    ]);
  });

  it("finds a secret setting's value leaked into another resource's plaintext", () => {
    const graph = patched(dockerGraph(), "t-shop-server", (i) => ({
      ...i,
      envs: ['AGENTENV_WEBSITE_SETTINGS={"copied":"ghp_secretsecret"}'],
    }));
    expect(violations(graph, P).map((v) => v.message)).toEqual([
      expect.stringMatching(/"t-shop-server" input envs\[0\] holds a secret value in plaintext/),
    ]);
  });

  it("finds a redacted secret's placeholder inside a plaintext value (a secret that was unsecreted)", () => {
    const graph = patched(dockerGraph(), "t-shop-server", (i) => ({
      ...i,
      envs: ['AGENTENV_WEBSITE_SETTINGS={"token":"[secret]"}'],
    }));
    expect(violations(graph, P)).toHaveLength(1);
  });

  it("finds a caller-supplied secret (a stack's secret config value) in plaintext", () => {
    const graph = patched(dockerGraph(), "t-shop-frontend", (i) => ({
      ...i,
      command: ["serve", "--key=hunter2hunter2"],
    }));
    expect(violations(graph, P)).toEqual([]);
    expect(violations(graph, P, { knownSecrets: ["hunter2hunter2"] })).toHaveLength(1);
  });

  it("requires the control token's generator to keep its value secret", () => {
    const graph = dockerGraph();
    graph.resources = graph.resources.map((r) =>
      r.name === "t-control-token-generator" ? { ...r, additionalSecretOutputs: ["bytes"] } : r,
    );
    expect(violations(graph, P).map((v) => v.message)).toEqual([
      expect.stringMatching(/"t-control-token-generator" generates the control token but does not list "value"/),
    ]);
  });

  it('requires additionalSecretOutputs: ["envs"] on a container carrying a secret, unless options are unknown', () => {
    const graph = dockerGraph();
    graph.resources = graph.resources.map((r) =>
      r.name === "t-gateway" ? { ...r, additionalSecretOutputs: undefined } : r,
    );
    expect(violations(graph, P).map((v) => v.message)).toEqual([
      expect.stringMatching(
        /"t-gateway" carries MULTIENV_CONTROL_TOKEN but does not list "envs" in additionalSecretOutputs/,
      ),
    ]);
    expect(runPolicies(graph, { only: [P], resourceOptionsKnown: false })).toEqual([]);
  });
});

describe("ec2-ingress-closed-to-world", () => {
  const P = "ec2-ingress-closed-to-world";
  const graph = (...extra: GraphResource[]) => ({ resources: [...ec2Resources(), ...extra] });

  it("accepts SSH and the gateway port from the runner's CIDRs, and other ports from anywhere", () => {
    expect(
      violations(
        graph(
          aws(TYPES.ingressRule, "https", { ipProtocol: "tcp", fromPort: 443, toPort: 443, cidrIpv4: "0.0.0.0/0" }),
        ),
        P,
      ),
    ).toEqual([]);
  });

  it("refuses SSH open to the world, as a rule resource, an old-style rule or inline", () => {
    const rule = aws(TYPES.ingressRule, "ssh", { ipProtocol: "tcp", fromPort: 22, toPort: 22, cidrIpv4: "0.0.0.0/0" });
    const legacy = {
      type: TYPES.securityGroupRule,
      name: "ssh6",
      inputs: { type: "ingress", protocol: "tcp", fromPort: 0, toPort: 1024, ipv6CidrBlocks: ["::/0"] },
    };
    const inline = aws(TYPES.securityGroup, "sg", {
      ingress: [{ protocol: "tcp", fromPort: 8080, toPort: 8080, cidrBlocks: ["10.0.0.0/8", "0.0.0.0/0"] }],
    });
    const found = violations(graph(rule, legacy, inline), P);
    expect(found.map((v) => [v.resource, v.message])).toEqual([
      ["ssh", expect.stringMatching(/opens SSH \(22\) to 0.0.0.0\/0/)],
      ["ssh6", expect.stringMatching(/opens SSH \(22\) to ::\/0/)],
      ["sg", expect.stringMatching(/opens the gateway port \(8080\) to 0.0.0.0\/0/)],
    ]);
  });

  it("refuses an all-protocol ingress from the world (it covers every guarded port)", () => {
    const found = violations(graph(aws(TYPES.ingressRule, "all", { ipProtocol: "-1", cidrIpv6: "::/0" })), P);
    expect(found).toHaveLength(5);
  });

  it("guards the gateway browse port, a site proxy's control (log) port and DevTools as it guards SSH", () => {
    const open = (name: string, port: number) =>
      aws(TYPES.ingressRule, name, { ipProtocol: "tcp", fromPort: port, toPort: port, cidrIpv4: "0.0.0.0/0" });
    const found = violations(
      graph(open("browse", 8081), open("control", 9000), open("cdp", 9222), open("web", 8443)),
      P,
    );
    expect(found.map((v) => [v.resource, v.message])).toEqual([
      ["browse", expect.stringMatching(/opens the gateway browse port \(8081\) to 0.0.0.0\/0/)],
      ["control", expect.stringMatching(/opens a site proxy's control port \(its log, CA and DevTools\) \(9000\)/)],
      ["cdp", expect.stringMatching(/opens the browser's DevTools port \(9222\)/)],
    ]);
  });

  it("sees a guarded port inside a wide tcp range from the world (tcp 0-65535 covers all of them)", () => {
    const wide = aws(TYPES.ingressRule, "wide", {
      ipProtocol: "tcp",
      fromPort: 0,
      toPort: 65535,
      cidrIpv4: "0.0.0.0/0",
    });
    expect(violations(graph(wide), P)).toHaveLength(5);
  });

  it("ignores egress rules", () => {
    const legacy = {
      type: TYPES.securityGroupRule,
      name: "out",
      inputs: { type: "egress", protocol: "tcp", fromPort: 22, toPort: 22, cidrBlocks: ["0.0.0.0/0"] },
    };
    expect(violations(graph(legacy), P)).toEqual([]);
  });
});

describe("ec2-no-open-egress", () => {
  const P = "ec2-no-open-egress";
  it("accepts port-bound egress and refuses all-protocol egress in any form", () => {
    expect(violations({ resources: ec2Resources() }, P)).toEqual([]);
    const found = violations(
      {
        resources: [
          aws(TYPES.egressRule, "out", { ipProtocol: "-1", cidrIpv4: "0.0.0.0/0" }),
          aws(TYPES.securityGroup, "sg", {
            egress: [{ protocol: "all", fromPort: 0, toPort: 0, cidrBlocks: ["0.0.0.0/0"] }],
          }),
          {
            type: TYPES.securityGroupRule,
            name: "legacy",
            inputs: { type: "egress", protocol: "-1", fromPort: 0, toPort: 0 },
          },
        ],
      },
      P,
    );
    expect(found.map((v) => v.resource)).toEqual(["out", "sg", "legacy"]);
  });

  it("flags tcp or udp over every port to the world as it flags all protocols, and not to a peer or a port range", () => {
    const found = violations(
      {
        resources: [
          aws(TYPES.egressRule, "tcp-all", { ipProtocol: "tcp", fromPort: 0, toPort: 65535, cidrIpv4: "0.0.0.0/0" }),
          aws(TYPES.egressRule, "udp-all6", { ipProtocol: "udp", fromPort: 1, toPort: 65535, cidrIpv6: "::/0" }),
          aws(TYPES.securityGroup, "sg", {
            egress: [{ protocol: "tcp", fromPort: 0, toPort: 65535, cidrBlocks: ["0.0.0.0/0"] }],
          }),
          aws(TYPES.egressRule, "tcp-all-vpc", {
            ipProtocol: "tcp",
            fromPort: 0,
            toPort: 65535,
            cidrIpv4: "10.0.0.0/16",
          }),
          aws(TYPES.egressRule, "tcp-high", {
            ipProtocol: "tcp",
            fromPort: 1024,
            toPort: 65535,
            cidrIpv4: "0.0.0.0/0",
          }),
        ],
      },
      P,
    );
    expect(found.map((v) => [v.resource, v.message])).toEqual([
      ["tcp-all", expect.stringMatching(/allows tcp 0-65535 out to 0.0.0.0\/0: every port/)],
      ["udp-all6", expect.stringMatching(/allows udp 1-65535 out to ::\/0/)],
      ["sg", expect.stringMatching(/allows tcp 0-65535 out/)],
    ]);
  });
});

describe("ec2-instance-hardening", () => {
  const P = "ec2-instance-hardening";
  it("refuses an instance without IMDSv2 or with an unencrypted root volume", () => {
    expect(violations({ resources: ec2Resources() }, P)).toEqual([]);
    const weak = aws(TYPES.instance, "vm", {
      metadataOptions: { httpTokens: "optional" },
      rootBlockDevice: { volumeType: "gp3" },
    });
    expect(violations({ resources: [weak] }, P).map((v) => v.message)).toEqual([
      expect.stringMatching(/does not require IMDSv2 \(metadataOptions.httpTokens is "optional"\)/),
      expect.stringMatching(/httpPutResponseHopLimit is unset/),
      expect.stringMatching(/does not encrypt its root volume/),
    ]);
    const bare = aws(TYPES.instance, "vm2", {});
    expect(violations({ resources: [bare] }, P).map((v) => v.message)[0]).toMatch(/httpTokens is unset/);
  });

  it("requires a metadata hop limit of 1, so a container one hop further gets no token", () => {
    const hardened = { httpTokens: "required", httpPutResponseHopLimit: 1 };
    const vm = (name: string, metadataOptions: Record<string, unknown>) =>
      aws(TYPES.instance, name, { metadataOptions, rootBlockDevice: { encrypted: true } });
    expect(violations({ resources: [vm("ok", hardened)] }, P)).toEqual([]);
    expect(
      violations(
        {
          resources: [vm("two", { ...hardened, httpPutResponseHopLimit: 2 }), vm("unset", { httpTokens: "required" })],
        },
        P,
      ).map((v) => [v.resource, v.message]),
    ).toEqual([
      ["two", expect.stringMatching(/httpPutResponseHopLimit is 2; set it to 1/)],
      ["unset", expect.stringMatching(/httpPutResponseHopLimit is unset; set it to 1/)],
    ]);
  });
});

describe("ec2-lifetime-fuse", () => {
  const P = "ec2-lifetime-fuse";
  it("refuses an instance that stops (or keeps AWS's default) instead of terminating on shutdown", () => {
    expect(violations({ resources: ec2Resources() }, P)).toEqual([]);
    const vm = (name: string, extra: Record<string, unknown>) => aws(TYPES.instance, name, extra);
    expect(
      violations({ resources: [vm("stop", { instanceInitiatedShutdownBehavior: "stop" }), vm("unset", {})] }, P).map(
        (v) => [v.resource, v.message],
      ),
    ).toEqual([
      ["stop", expect.stringMatching(/instanceInitiatedShutdownBehavior is "stop".*set it to "terminate"/)],
      ["unset", expect.stringMatching(/is unset \(stop\)/)],
    ]);
  });
});

describe("aws-description-charset", () => {
  const P = "aws-description-charset";
  it("accepts descriptions made of AWS's allowed characters", () => {
    const allowed = "a-z A-Z 0-9 . _ - : / ( ) # , @ [ ] + = & ; { } ! $ *";
    expect(
      violations(
        {
          resources: [
            aws(TYPES.ingressRule, "ok", { description: allowed }),
            aws(TYPES.securityGroup, "sg", { description: "multienv t: the env VM (gateway, sites); an allowlist" }),
          ],
        },
        P,
      ),
    ).toEqual([]);
  });

  it("refuses an apostrophe or a quote in a rule, a group or an inline rule, and an overlong description", () => {
    const found = violations(
      {
        resources: [
          aws(TYPES.ingressRule, "in", { description: "computer desktop's site proxy" }),
          aws(TYPES.egressRule, "out", { description: 'the "gateway"' }),
          { type: TYPES.securityGroupRule, name: "legacy", inputs: { type: "ingress", description: "ça" } },
          aws(TYPES.securityGroup, "sg", {
            description: "x".repeat(256),
            egress: [{ protocol: "tcp", description: "it's" }],
          }),
        ],
      },
      P,
    );
    expect(found.map((v) => [v.resource, v.message])).toEqual([
      [
        "in",
        expect.stringMatching(/description "computer desktop's site proxy" has characters AWS refuses there \("'"\)/),
      ],
      ["out", expect.stringMatching(/has characters AWS refuses there \("\\""\)/)],
      ["legacy", expect.stringMatching(/\("ç"\)/)],
      ["sg", expect.stringMatching(/description is 256 characters; AWS takes at most 255/)],
      ["sg", expect.stringMatching(/egress\[0\].description "it's"/)],
    ]);
  });
});

describe("aws-resource-tags", () => {
  const P = "aws-resource-tags";
  it("refuses a taggable AWS resource without the stack and task tags", () => {
    const untagged = {
      type: "aws:ec2/keyPair:KeyPair",
      name: "key",
      inputs: { tags: { Name: "key", "multienv:stack": "t" } },
    };
    expect(violations({ resources: [untagged] }, P).map((v) => v.message)).toEqual([
      expect.stringMatching(/has no multienv:task tag/),
    ]);
  });

  it("skips AWS types that cannot carry tags, and non-AWS resources", () => {
    const rule = { type: TYPES.securityGroupRule, name: "r", inputs: { type: "ingress" } };
    const docker = site("shop", "server");
    expect(violations({ resources: [rule, docker] }, P)).toEqual([]);
  });

  it("counts the provider's default tags", () => {
    const provider = {
      type: "pulumi:providers:aws",
      name: "p",
      inputs: { defaultTags: JSON.stringify({ tags: { "multienv:stack": "t", "multienv:task": "t" } }) },
    };
    const key = { type: "aws:ec2/keyPair:KeyPair", name: "key", provider: "p", inputs: {} };
    expect(violations({ resources: [provider, key] }, P)).toEqual([]);
  });
});

describe("capture-sidecar-per-website", () => {
  const P = "capture-sidecar-per-website";

  it("accepts one sidecar per website container when capture is on", () => {
    expect(violations(dockerGraph(), P)).toEqual([]);
  });

  it("names the website container whose sidecar is missing", () => {
    const found = violations(without(dockerGraph(), "t-shop-frontend-capture"), P);
    expect(found.map((v) => v.message)).toEqual([
      expect.stringMatching(/3 website containers but 2 capture sidecars/),
      expect.stringMatching(/"t-shop-frontend" has no capture sidecar/),
    ]);
  });

  it("refuses a doubled sidecar", () => {
    const extra = sidecar("shop", "server");
    const found = violations(withResources(dockerGraph(), { ...extra, name: "dup" }), P);
    expect(found.map((v) => v.message)).toContainEqual(expect.stringMatching(/"t-shop-server" has 2 capture sidecars/));
  });

  it("refuses any sidecar when capture is off, and accepts none", () => {
    const off = { ...dockerGraph(), outputs: { ...dockerGraph().outputs, captureTraffic: false } };
    expect(violations(off, P)).toHaveLength(3);
    const none = { ...off, resources: off.resources.filter((r) => !r.name.endsWith("-capture")) };
    expect(violations(none, P)).toEqual([]);
  });

  it("without a captureTraffic output, takes capture to be on when the captures volume exists", () => {
    const noOutput = { resources: without(dockerGraph(), "t-github-server-capture").resources };
    expect(violations(noOutput, P).length).toBeGreaterThan(0);
  });
});

describe("violations", () => {
  it("name the policy, the resource (URN when known, else its name) and what to do", () => {
    const graph = patched(dockerGraph(), "t-shop-server", (i) => ({ ...i, privileged: true }));
    expect(runPolicies(graph)).toEqual([
      {
        policy: "container-privileges",
        resource: "urn:pulumi:t::multienv::docker:index/container:Container::t-shop-server",
        name: "t-shop-server",
        type: TYPES.container,
        message: expect.stringMatching(/^"t-shop-server" is privileged; remove privileged: true/),
      },
    ]);
  });

  it("accept a bare list of resources", () => {
    expect(runPolicies([volume("t-captures"), sidecar("a", "server"), site("a", "server")])).toEqual([]);
    expect(runPolicies([volume("t-captures"), site("a", "server")]).map((v) => v.policy)).toEqual([
      "capture-sidecar-per-website",
      "capture-sidecar-per-website",
    ]);
  });
});
