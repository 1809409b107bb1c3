// Components refuse bad combinations at construction, with a message saying what is wrong.
import * as pulumi from "@pulumi/pulumi";
import { beforeAll, describe, expect, it } from "vitest";
import { CaptureSidecar, DockerEngine, Ec2Host, Gateway, MultiEnv, Website } from "../../components";
import type { Plan } from "../../src/plan";
import type { StackConfig } from "../../src/plan/types";
import { planned } from "../helpers/plans";
import { PROJECT_IMAGE_IDS } from "./helpers";

const EC2 = {
  region: "us-east-1",
  instanceType: "t3.large",
  runnerCidrs: ["192.0.2.1/32"],
  sshPublicKey: "ssh-ed25519 AAAA x",
};

/** A stack of one live site (gh, with a secret setting) and no computer, with `overrides` over it. */
function liveSiteStack(overrides: Partial<StackConfig> = {}): StackConfig {
  return {
    target: "docker",
    websites: {
      gh: {
        domains: ["github.com"],
        live: true,
        allowHosts: [],
        server: { image: "g", port: 8000 },
        settings: {},
        secretSettings: { token: "githubToken" },
      },
    },
    computers: {},
    captureTraffic: false,
    capture: { fileSizeMb: 20, fileCount: 10 },
    selfTest: true,
    ...overrides,
  };
}

let engineCount = 0;
function engine(p: Plan): DockerEngine {
  engineCount += 1;
  return new DockerEngine(`engine${engineCount}`, {
    networks: { internal: [p.networks.env], external: [p.networks.egress, p.networks.ingress] },
    volumes: [p.capture.volumeName],
    projectImages: { gateway: "sha256:gateway" },
    labels: {},
  });
}

describe("component refusals", () => {
  beforeAll(async () => {
    await pulumi.runtime.setMocks(
      { newResource: (args) => ({ id: `${args.name}-id`, state: args.inputs }), call: (args) => args.inputs },
      "multienv",
      "r",
      false,
    );
  });

  it("Website: every secret setting needs its value", () => {
    const p = planned(liveSiteStack(), { stack: "r" });
    expect(() => new Website("gh", { plan: p, site: p.websites[0], engine: engine(p), secrets: {} })).toThrow(
      "Website gh: multienv:websites.gh.secretSettings.token: names config key githubToken, which is not set; set it with `pulumi config set --secret githubToken <value>`",
    );
  });

  it("Website: a live site has no frontend", () => {
    const p = planned(liveSiteStack(), { stack: "r" });
    const site = { ...p.websites[0], frontend: { containerName: "r-gh-frontend", image: "f", port: 80 } };
    expect(
      () => new Website("gh2", { plan: p, site, engine: engine(p), secrets: { githubToken: pulumi.secret("t") } }),
    ).toThrow("a live site serves no pages, so it has no frontend");
  });

  it("CaptureSidecar: not when capture is off", () => {
    const p = planned(liveSiteStack(), { stack: "r" });
    const e = engine(p);
    const website = new Website("gh3", {
      plan: p,
      site: p.websites[0],
      engine: e,
      secrets: { githubToken: pulumi.secret("t") },
    });
    const sidecar = {
      target: "r-gh-server",
      site: "gh",
      role: "server" as const,
      containerName: "r-gh-server-capture",
      filePrefix: "gh-server.pcap",
    };
    expect(() => new CaptureSidecar("c", { plan: p, sidecar, target: website.server, engine: e })).toThrow(
      "capture is off in this plan",
    );
  });

  it("Gateway: on ec2 it needs the tunnel's URL the runner reaches it at", () => {
    const p = planned(liveSiteStack({ target: "ec2", ec2: EC2 }), { stack: "r" });
    expect(
      () =>
        new Gateway("g", {
          plan: p,
          engine: engine(p),
          serviceConfig: { listen: { host: "0.0.0.0", port: 8080 }, sites: {}, computers: {} },
          controlToken: pulumi.secret("t"),
        }),
    ).toThrow(
      "on target ec2 the gateway is published on its host's loopback; give reachedAt, the local URL of the SSH tunnel to it",
    );
  });

  it("Ec2Host: the SSH key must be an OpenSSH public key", () => {
    expect(
      () =>
        new Ec2Host("h", {
          instanceType: "t3.large",
          ami: "ami-1",
          securityGroupId: "sg-1",
          sshPublicKey: "-----BEGIN OPENSSH PRIVATE KEY-----",
          sshUser: "ec2-user",
          lifetimeHours: 4,
          tags: () => ({}),
        }),
    ).toThrow("sshPublicKey is not an OpenSSH public key");
  });

  it("DockerEngine: a network it does not hold is named in the error", () => {
    const p = planned(liveSiteStack(), { stack: "r" });
    expect(() => engine(p).network("r-elsewhere-net")).toThrow("no network r-elsewhere-net on this engine");
  });

  it("MultiEnv: a secret config key without a value names the key and the command that sets it", () => {
    const p = planned(liveSiteStack(), { stack: "r" });
    expect(() => new MultiEnv("m", { plan: p, secrets: {}, projectImages: PROJECT_IMAGE_IDS })).toThrow(
      "multienv:websites.gh.secretSettings.token: names config key githubToken, which is not set; set it with `pulumi config set --secret githubToken <value>`",
    );
  });
});
