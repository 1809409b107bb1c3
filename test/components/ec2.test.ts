// The ec2 target under Pulumi's mocks: the env VM and one VM per computer, each security group an allowlist.
import { beforeAll, describe, expect, it } from "vitest";
import { runPolicies } from "../../policies/evaluate";
import { DOCKER_DEFAULT_ADDRESS_POOLS } from "../../src/plan";
import type { Graph, GraphResource } from "../../src/runner/check/graph";
import {
  IMAGE,
  NETWORK,
  VOLUME,
  container,
  containers,
  dockerResources,
  engineOf,
  envOf,
  graphOf,
  mountsOf,
  networksOf,
  resource,
  sshOptions,
} from "./helpers";

const STACK = "e1";
const RUNNER = "198.51.100.7/32";
const CONFIG = {
  target: "ec2",
  ec2: {
    region: "eu-west-1",
    instanceType: "t3.large",
    runnerCidrs: [RUNNER],
    sshPublicKey: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAITestKeyOnly runner@test",
  },
  captureTraffic: true,
  websites: {
    shop: {
      domains: ["shop.test"],
      server: { image: "multienv/sample-shop-server" },
      frontend: { image: "multienv/sample-shop-frontend" },
    },
    github: {
      live: true,
      domains: ["github.com", "*.github.com"],
      allowHosts: ["*.githubassets.com"],
      server: { image: "multienv/sample-live-server" },
      secretSettings: { token: "githubToken" },
    },
  },
  computers: {
    desktop: { network: ["github.com"], startTabs: ["https://shop.test/", "https://github.com/"] },
    offline: { network: "none" },
  },
};

const INGRESS = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule";
const EGRESS = "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule";

/** Rules of one security group as `tcp <from>-<to> <peer>` lines, the peer a CIDR or `sg:<group name>`. */
function rulesOf(graph: Graph, type: string, group: string): string[] {
  const groupId = `${group}-id`;
  return graph.resources
    .filter((r) => r.type === type && r.inputs.securityGroupId === groupId)
    .map((r) => {
      const i = r.inputs as Record<string, any>;
      const peer = i.cidrIpv4 ?? i.cidrIpv6 ?? `sg:${String(i.referencedSecurityGroupId).replace(/-id$/, "")}`;
      return `${i.ipProtocol} ${i.fromPort}-${i.toPort} ${peer}`;
    })
    .sort();
}

describe("ec2 target", () => {
  let graph: Graph;
  let revealed: Graph;
  beforeAll(async () => {
    graph = await graphOf(STACK, CONFIG, { githubToken: "ghp_secret-for-ec2-test" });
    revealed = await graphOf(STACK, CONFIG, { githubToken: "ghp_secret-for-ec2-test" }, true);
  });

  it("opens the env VM to the runner on SSH alone (the gateway comes through a tunnel) and to the computers on the browse listener alone", () => {
    expect(rulesOf(graph, INGRESS, "e1-env-sg")).toEqual([
      `tcp 22-22 ${RUNNER}`,
      "tcp 8081-8081 sg:e1-desktop-sg",
      "tcp 8081-8081 sg:e1-offline-sg",
    ]);
    expect(rulesOf(graph, EGRESS, "e1-env-sg")).toEqual([
      "tcp 443-443 0.0.0.0/0",
      "tcp 443-443 ::/0",
      "tcp 80-80 0.0.0.0/0",
      "tcp 80-80 ::/0",
      "tcp 9000-9000 sg:e1-desktop-sg",
      "tcp 9000-9000 sg:e1-offline-sg",
    ]);
  });

  it("makes each computer VM's egress its allowlist: the gateway, plus web ports only when it reaches public hosts", () => {
    expect(rulesOf(graph, EGRESS, "e1-desktop-sg")).toEqual([
      "tcp 443-443 0.0.0.0/0",
      "tcp 443-443 ::/0",
      "tcp 80-80 0.0.0.0/0",
      "tcp 80-80 ::/0",
      "tcp 8081-8081 sg:e1-env-sg",
    ]);
    expect(rulesOf(graph, EGRESS, "e1-offline-sg")).toEqual(["tcp 8081-8081 sg:e1-env-sg"]);
    // The env VM reaches a computer's control port alone; its listener wants that computer's token, which a site
    // container on the env VM does not have (a group rule cannot tell the gateway from a site).
    expect(rulesOf(graph, INGRESS, "e1-offline-sg")).toEqual([`tcp 22-22 ${RUNNER}`, "tcp 9000-9000 sg:e1-env-sg"]);
    for (const rule of graph.resources.filter((r) => r.type === INGRESS || r.type === EGRESS)) {
      expect(rule.inputs.ipProtocol, rule.name).toBe("tcp");
      if (rule.type === INGRESS)
        expect([rule.inputs.cidrIpv4, rule.inputs.cidrIpv6], rule.name).not.toContain("0.0.0.0/0");
    }
    // Security groups carry no inline rules (so AWS's default allow-all egress is removed).
    for (const group of graph.resources.filter((r) => r.type === "aws:ec2/securityGroup:SecurityGroup")) {
      expect(group.inputs.egress, group.name).toBeUndefined();
      expect(group.inputs.ingress, group.name).toBeUndefined();
    }
  });

  it("runs three VMs with IMDSv2 required and encrypted root volumes, each checked for Docker over SSH", () => {
    const instances = revealed.resources.filter((r) => r.type === "aws:ec2/instance:Instance");
    expect(instances.map((i) => i.name).sort()).toEqual(["e1-desktop-vm", "e1-env-vm", "e1-offline-vm"]);
    for (const { inputs } of instances) {
      const instance = { inputs: inputs as Record<string, any> };
      expect(instance.inputs.metadataOptions.httpTokens).toBe("required");
      expect(instance.inputs.rootBlockDevice.encrypted).toBe(true);
      expect(instance.inputs.instanceType).toBe("t3.large");
      const userData = (instance.inputs.userData as Record<string, string>)["[secret]"];
      expect(userData).toContain("systemctl enable --now docker");
      // The VM drops what its containers open to it (sshd among it), internal networks' containers too.
      expect(userData).toContain("iptables -I INPUT -i br-+ -m conntrack --ctstate NEW -j DROP");
      expect(userData).toContain("iptables -I INPUT -i docker0 -m conntrack --ctstate NEW -j DROP");
      // The host key made for this VM, which sshd then presents alone, and room for a parallel up on one connection.
      expect(userData).toMatch(
        /cat >\/etc\/ssh\/multienv_host_ed25519_key <<'MULTIENV_HOST_KEY'\n<private key of e1-\w+-host-key>\nMULTIENV_HOST_KEY/,
      );
      expect(userData).toContain("HostKey /etc/ssh/multienv_host_ed25519_key\nMaxSessions 64\nMaxStartups 100:30:200");
    }
    // The user data holds a private key: secret in the state.
    for (const vm of graph.resources.filter((r) => r.type === "aws:ec2/instance:Instance"))
      expect(vm.inputs.userData, vm.name).toBe("[secret]");
    const readiness = graph.resources.filter(
      (r) => r.type === "pulumi-nodejs:dynamic/multienv:Command" && r.name.endsWith("-docker-ready"),
    );
    expect(readiness.map((r) => r.name).sort()).toEqual([
      "e1-desktop-docker-ready",
      "e1-env-docker-ready",
      "e1-offline-docker-ready",
    ]);
    const envReady = readiness.find((r) => r.name === "e1-env-docker-ready")!;
    const ready = envReady.inputs.create as string;
    expect(ready).toContain("HostName <public IP of e1-env-vm>\n  User ec2-user");
    expect(ready).toContain("StrictHostKeyChecking yes");
    // The pinned key is the one the deploy made for this VM.
    expect(ready).toContain(`ssh-ed25519 AAAA${Buffer.from("e1-env-host-key").toString("base64").replace(/=+$/, "")}'`);
    expect(ready).toContain("cloud-init status --wait");
    expect(ready).toContain("docker info");
  });

  it("tags every AWS resource with the stack and task, and creates each with the stack's AWS provider in its region", () => {
    const provider = resource(graph, "pulumi:providers:aws", "e1-aws");
    expect(provider.inputs.region).toBe("eu-west-1");
    const awsResources = graph.resources.filter((r) => r.type.startsWith("aws:"));
    expect(awsResources.length).toBeGreaterThan(20);
    for (const r of awsResources) {
      expect(r.inputs.tags, `${r.type} ${r.name}`).toMatchObject({ "multienv:stack": STACK, "multienv:task": STACK });
      expect(r.provider, `${r.type} ${r.name}`).toBe("e1-aws");
    }
  });

  it("reaches each VM's engine over SSH", () => {
    const vm = (name: string) => `ssh://ec2-user@<public IP of ${name}-vm>:22`;
    const hostOf = (name: string) =>
      engineOf(
        graph,
        containers(graph).find((c) => c.name === name)!,
      ).host;
    for (const name of [
      "e1-gateway",
      "e1-shop-server",
      "e1-shop-frontend",
      "e1-github-server",
      "e1-shop-server-capture",
    ])
      expect(hostOf(name), name).toBe(vm("e1-env"));
    for (const name of ["e1-desktop-proxy", "e1-desktop-browser"]) expect(hostOf(name), name).toBe(vm("e1-desktop"));
    for (const name of ["e1-offline-proxy", "e1-offline-browser"]) expect(hostOf(name), name).toBe(vm("e1-offline"));
    // Networks and volumes live on the engine that uses them.
    const byEngine = (type: string) =>
      Object.fromEntries(
        graph.resources.filter((r) => r.type === type).map((r) => [r.inputs.name, engineOf(graph, r).host]),
      );
    expect(byEngine(NETWORK)).toEqual({
      "e1-env": vm("e1-env"),
      "e1-egress": vm("e1-env"),
      "e1-ingress": vm("e1-env"),
      "e1-desktop-net": vm("e1-desktop"),
      "e1-desktop-egress": vm("e1-desktop"),
      "e1-offline-net": vm("e1-offline"),
      "e1-offline-egress": vm("e1-offline"),
    });
    expect(byEngine(VOLUME)).toEqual({
      "e1-captures": vm("e1-env"),
      "e1-desktop-ca": vm("e1-desktop"),
      "e1-offline-ca": vm("e1-offline"),
    });
  });

  it("checks each VM's host key against the key the deploy made for it, and no other", () => {
    for (const role of ["env", "desktop", "offline"]) {
      const onVm = dockerResources(graph).filter((r) => r.provider === `e1-${role}-engine-provider`);
      expect(onVm.length, role).toBeGreaterThan(2);
      const { sshOpts } = engineOf(graph, onVm[0]);
      const options = sshOptions(sshOpts!);
      const key = `ssh-ed25519 AAAA${Buffer.from(`e1-${role}-host-key`).toString("base64").replace(/=+$/, "")}`;
      // The pinned key travels in the options: a provider in a shell with no known_hosts file of ours still checks it.
      expect(options.KnownHostsCommand, role).toBe(`/bin/echo ${options.HostKeyAlias} ${key}`);
      expect(options, role).toMatchObject({
        UserKnownHostsFile: "/dev/null",
        GlobalKnownHostsFile: "/dev/null",
        StrictHostKeyChecking: "yes",
        UpdateHostKeys: "no",
        HostKeyAlgorithms: "ssh-ed25519",
        BatchMode: "yes",
      });
      // No identity file is configured for ec2: the runner's agent and default keys log in.
      expect(options.IdentityFile, role).toBeUndefined();
    }
  });

  it("creates each resource with a provider of its own package: docker's for Docker objects, none for the project's own", () => {
    const withProvider = graph.resources.filter((r) => r.provider !== undefined);
    expect(withProvider.length).toBeGreaterThan(20);
    for (const r of withProvider) {
      const provider = graph.resources.find((p) => p.name === r.provider && p.type.startsWith("pulumi:providers:"))!;
      expect(provider.type, `${r.type} ${r.name}`).toBe(`pulumi:providers:${r.type.split(":")[0]}`);
    }
    // A dynamic resource given the docker provider would be sent to the docker plugin, which knows no such type.
    for (const r of graph.resources.filter((r) => r.type.startsWith("pulumi-nodejs:")))
      expect(r.provider, `${r.type} ${r.name}`).toBeUndefined();
  });

  it("wires containers across VMs by private address: the gateway's ports published on the VM, each proxy's control port on its own", () => {
    expect(container(graph, "e1-gateway").ports).toEqual([
      { internal: 8080, external: 8080, ip: "127.0.0.1" },
      { internal: 8081, external: 8081, ip: "0.0.0.0" },
    ]);
    expect(container(graph, "e1-desktop-proxy").ports).toEqual([{ internal: 9000, external: 9000, ip: "0.0.0.0" }]);
    expect(networksOf(container(graph, "e1-desktop-proxy"))).toEqual(["e1-desktop-net", "e1-desktop-egress"]);
    expect(networksOf(container(graph, "e1-desktop-browser"))).toEqual(["e1-desktop-net"]);
    const proxyConfig = JSON.parse(envOf(container(revealed, "e1-desktop-proxy")).MULTIENV_SITE_PROXY_CONFIG);
    expect(proxyConfig.gateway).toBe("http://<private IP of e1-env-vm>:8081");
    // The proxy never dials its VM's networks, any subnet Docker may give a network there, the env VM (beyond its
    // browse listener, its gateway) or a computer's VM, its own among them (where its control port is published).
    expect(proxyConfig.deny.sort()).toEqual(
      [
        "<private IP of e1-desktop-vm>/32",
        "<private IP of e1-env-vm>/32",
        "<private IP of e1-offline-vm>/32",
        "<subnet of e1-desktop-egress>",
        "<subnet of e1-desktop-net>",
        ...DOCKER_DEFAULT_ADDRESS_POOLS,
      ].sort(),
    );
    expect(mountsOf(container(graph, "e1-gateway"))).toEqual(["e1-captures:/captures:ro"]);
    expect(container(graph, "e1-github-server").envs).toBe("[secret]");
    expect(JSON.stringify(graph)).not.toContain("ghp_secret-for-ec2-test");
  });

  it("gives the runner the gateway through an SSH tunnel to the env VM's loopback, and says how to bring it up again", () => {
    const url = "http://127.0.0.1:<local port of the tunnel>";
    expect(graph.outputs.gatewayUrl).toBe(url);
    const tunnel = resource(graph, "pulumi-nodejs:dynamic/multienv:GatewayTunnel", "e1-gateway-tunnel");
    expect(tunnel.inputs).toMatchObject({
      remotePort: 8080,
      ssh: { host: "<public IP of e1-env-vm>", user: "ec2-user" },
    });
    expect(graph.outputs.gatewayTunnel).toMatchObject({
      localPort: "<local port of the tunnel>",
      remotePort: 8080,
      ssh: { host: "<public IP of e1-env-vm>" },
    });
    expect(graph.outputs.controlToken).toBe("[secret]");
    expect((graph.outputs.computers as Record<string, { cdpUrl: string }>).desktop.cdpUrl).toBe(
      `${url}/computers/desktop/cdp`,
    );
  });
});

describe("ec2 target, gateway config", () => {
  it("points the gateway at each computer VM's private address for CDP, the proxy log, the request log and its takeover mark", async () => {
    const graph = await graphOf("e2", { ...CONFIG, captureTraffic: false }, { githubToken: "x-secret" }, true);
    const gateway = container(graph, "e2-gateway");
    const config = JSON.parse(envOf(gateway).MULTIENV_GATEWAY_CONFIG);
    expect(config.computers.desktop).toEqual({
      cdp: "http://<private IP of e2-desktop-vm>:9000/cdp",
      proxyLog: "http://<private IP of e2-desktop-vm>:9000/log",
      endConnections: "http://<private IP of e2-desktop-vm>:9000/connections/end",
      requests: "http://<private IP of e2-desktop-vm>:9000/requests",
      person: "http://<private IP of e2-desktop-vm>:9000/person",
    });
    expect(config.browse).toEqual({ hosts: ["gateway-ingress"], port: 8081 });
    expect(config.capturesDir).toBeUndefined();
    const unused: GraphResource[] = graph.resources.filter((r) => r.type === VOLUME && r.name === "e2-captures");
    expect(unused).toEqual([]);
  });
});

describe("ec2 target in a given subnet", () => {
  it("puts the security groups in the subnet's VPC and the VMs in the subnet", async () => {
    const graph = await graphOf(
      "e3",
      { ...CONFIG, ec2: { ...CONFIG.ec2, subnetId: "subnet-0abc1234" } },
      { githubToken: "x" },
    );
    for (const group of graph.resources.filter((r) => r.type === "aws:ec2/securityGroup:SecurityGroup")) {
      expect(group.inputs.vpcId, group.name).toBe("<VPC of subnet-0abc1234>");
    }
    for (const instance of graph.resources.filter((r) => r.type === "aws:ec2/instance:Instance")) {
      expect(instance.inputs.subnetId, instance.name).toBe("subnet-0abc1234");
    }
  });
});

describe("ec2 target, images", () => {
  it("references the project's images and pulls the sites' on the runner's engine, and copies each to the VMs that run it", async () => {
    const graph = await graphOf("e4", CONFIG, { githubToken: "x" });
    const onRunner = (built: boolean) =>
      graph.resources
        .filter((r) => r.type === IMAGE && (r.inputs.build !== undefined) === built)
        .map((r) => `${r.name} ${r.provider} ${JSON.stringify(engineOf(graph, r))}`)
        .sort();
    // The project's images are `npm run images`'s: referenced by id, never built by the deploy.
    expect(onRunner(true)).toEqual([]);
    const pulled = onRunner(false);
    expect(pulled).toHaveLength(3);
    expect(
      pulled.every((r) => r.endsWith(" e4-images-provider {}")),
      pulled.join("\n"),
    ).toBe(true);
    const loads = graph.resources.filter(
      (r) => r.type === "pulumi-nodejs:dynamic/multienv:Command" && r.name.includes("-load-"),
    );
    // One load per VM, of every image it runs.
    expect(loads.map((l) => l.name).sort()).toEqual([
      "e4-desktop-engine-load-images",
      "e4-env-engine-load-images",
      "e4-offline-engine-load-images",
    ]);
    const envLoad = loads.find((l) => l.name === "e4-env-engine-load-images")!;
    // Shipped by image id: a rebuilt image is a new id, so it reaches the VM and its containers are replaced.
    expect(envLoad.inputs.triggers).toEqual([
      [
        "<id of multienv/gateway:latest>",
        "<id of multienv/sample-live-server>",
        "<id of multienv/sample-shop-frontend>",
        "<id of multienv/sample-shop-server>",
      ],
      expect.objectContaining({ host: "<public IP of e4-env-vm>", user: "ec2-user" }),
    ]);
    expect(envLoad.inputs.create).toContain("HostName <public IP of e4-env-vm>");
    expect(envLoad.inputs.create).toContain('docker save "$@" | $pack |');
    expect(loads.find((l) => l.name === "e4-offline-engine-load-images")!.inputs.triggers).toEqual([
      ["<id of multienv/site-proxy:latest>", "<id of multienv/browser:latest>"],
      expect.anything(),
    ]);
    expect(container(graph, "e4-gateway").image).toBe("<id of multienv/gateway:latest>");
    expect(container(graph, "e4-shop-server").image).toBe("<id of multienv/sample-shop-server>");
    expect(container(graph, "e4-offline-browser").image).toBe("<id of multienv/browser:latest>");
  });
});

describe("ec2 target, what AWS would refuse or mis-handle", () => {
  const instances = (graph: Graph) => graph.resources.filter((r) => r.type === "aws:ec2/instance:Instance");

  it("passes the whole policy pack, every security group and rule description in AWS's character set among it", async () => {
    const graph = await graphOf("e5", CONFIG, { githubToken: "x" });
    expect(runPolicies(graph)).toEqual([]);
    const described = graph.resources.filter(
      (r) => r.type.startsWith("aws:") && typeof r.inputs.description === "string",
    );
    expect(described.length).toBeGreaterThan(10);
    for (const r of described)
      expect(r.inputs.description, r.name).toMatch(/^[a-zA-Z0-9. _\-:/()#,@[\]+=&;{}!$*]{1,255}$/);
  });

  it("reads the AMI of the instance type's architecture, and ignores later AMI changes so a new release replaces no running VM", async () => {
    const x86 = await graphOf("e6", CONFIG, { githubToken: "x" });
    for (const vm of instances(x86)) {
      expect(vm.inputs.ami, vm.name).toBe(
        "<value of SSM parameter /aws/service/ecs/optimized-ami/amazon-linux-2023/recommended/image_id>",
      );
      expect(vm.ignoreChanges, vm.name).toEqual(["ami"]);
    }
    const arm = await graphOf(
      "e7",
      { ...CONFIG, ec2: { ...CONFIG.ec2, instanceType: "m7g.large" } },
      { githubToken: "x" },
    );
    for (const vm of instances(arm)) {
      expect(vm.inputs.ami, vm.name).toBe(
        "<value of SSM parameter /aws/service/ecs/optimized-ami/amazon-linux-2023/arm64/recommended/image_id>",
      );
      expect(vm.inputs.instanceType).toBe("m7g.large");
    }
    const given = await graphOf("e8", { ...CONFIG, ec2: { ...CONFIG.ec2, ami: "ami-0abc1234" } }, { githubToken: "x" });
    for (const vm of instances(given)) expect(vm.inputs.ami, vm.name).toBe("ami-0abc1234");
  });

  it("logs in as the configured SSH user, and adds that user to the docker group", async () => {
    const graph = await graphOf(
      "e9",
      { ...CONFIG, ec2: { ...CONFIG.ec2, sshUser: "ubuntu", ami: "ami-0abc1234" } },
      { githubToken: "x" },
      true,
    );
    for (const vm of instances(graph))
      expect((vm.inputs.userData as Record<string, string>)["[secret]"], vm.name).toContain(
        "usermod -aG docker 'ubuntu'",
      );
    const engines = containers(graph).map((c) => engineOf(graph, c).host);
    expect(engines.length).toBeGreaterThan(5);
    expect(
      engines.every((h) => h?.startsWith("ssh://ubuntu@<public IP of ")),
      engines.join(", "),
    ).toBe(true);
  });

  it("refuses vpcId without subnetId, naming both keys", async () => {
    await expect(
      graphOf("e10", { ...CONFIG, ec2: { ...CONFIG.ec2, vpcId: "vpc-0abc1234" } }, { githubToken: "x" }),
    ).rejects.toThrow(
      /multienv:ec2\.vpcId: is set without ec2\.subnetId: .*set ec2\.subnetId to a subnet of vpc-0abc1234, or remove ec2\.vpcId/,
    );
  });
});

describe("ec2 target, teardown and cost", () => {
  it("deletes every Docker resource on a VM with its instance, so a destroy never needs the VM's engine", async () => {
    const graph = await graphOf("e11", CONFIG, { githubToken: "x" });
    const onVm = dockerResources(graph).filter((r) => engineOf(graph, r).host?.startsWith("ssh://"));
    expect(onVm.length).toBeGreaterThan(15);
    for (const r of onVm) {
      const host = engineOf(graph, r).host!;
      const vm = /<public IP of (.*)>/.exec(host)![1];
      expect(r.deletedWith, `${r.type} ${r.name}`).toBe(vm);
    }
    const loads = graph.resources.filter((r) => r.name.includes("-load-"));
    for (const l of loads) expect(l.deletedWith, l.name).toMatch(/-vm$/);
    // What lives on the runner's engine is deleted as usual.
    const onRunner = graph.resources.filter((r) => r.type === IMAGE);
    expect(onRunner.length).toBeGreaterThan(0);
    for (const r of onRunner) expect(r.deletedWith, r.name).toBeUndefined();
  });

  it("gives every VM a lifetime fuse: terminate on shutdown, and a power-off timer at ec2.lifetimeHours", async () => {
    const fuse = (graph: Graph) => graph.resources.filter((r) => r.type === "aws:ec2/instance:Instance");
    const userData = (vm: GraphResource) => (vm.inputs.userData as Record<string, string>)["[secret]"];
    for (const vm of fuse(await graphOf("e12", CONFIG, { githubToken: "x" }, true))) {
      expect(vm.inputs.instanceInitiatedShutdownBehavior, vm.name).toBe("terminate");
      expect(userData(vm), vm.name).toContain('date -u -d "+240 minutes"');
      expect(userData(vm), vm.name).toContain("systemctl enable --now multienv-fuse.timer");
    }
    for (const vm of fuse(
      await graphOf("e13", { ...CONFIG, ec2: { ...CONFIG.ec2, lifetimeHours: 1.5 } }, { githubToken: "x" }, true),
    )) {
      expect(userData(vm), vm.name).toContain('date -u -d "+90 minutes"');
    }
  });
});
