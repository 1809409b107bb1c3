// Small hand-built resource graphs in the shape components/ registers, for the rules' unit tests.
// Secret values are wrapped in Pulumi's own secret marker, as the mocks deliver them.
import { specialSecretSig, specialSigKey } from "@pulumi/pulumi/runtime/rpc";
import type { Graph, GraphResource } from "../../policies/evaluate";
import { TYPES } from "../../policies/model";

export function secret<T>(value: T): unknown {
  return { [specialSigKey]: specialSecretSig, value };
}

export function labels(map: Record<string, string>): { label: string; value: string }[] {
  return Object.entries(map).map(([label, value]) => ({ label, value }));
}

// Capabilities as components/ writes them: as Docker reads them back.
const DROP_RAW = { adds: [] as string[], drops: ["CAP_NET_RAW"] };

export function container(
  name: string,
  inputs: Record<string, unknown>,
  additionalSecretOutputs?: string[],
): GraphResource {
  const urn = `urn:pulumi:t::multienv::docker:index/container:Container::${name}`;
  return {
    type: TYPES.container,
    name,
    urn,
    inputs: { name, ...inputs },
    ...(additionalSecretOutputs ? { additionalSecretOutputs } : {}),
  };
}

export function network(name: string, internal: boolean): GraphResource {
  return {
    type: TYPES.network,
    name,
    inputs: { name, internal, driver: "bridge", labels: labels({ "multienv.stack": "t" }) },
  };
}

export function volume(name: string): GraphResource {
  return { type: TYPES.volume, name, inputs: { name, labels: labels({ "multienv.stack": "t" }) } };
}

const nets = (...names: string[]) => names.map((name) => ({ name }));
const mount = (source: string, target: string, readOnly: boolean) => ({ type: "volume", source, target, readOnly });

export function gateway(extra: Record<string, unknown> = {}): GraphResource {
  return container(
    "t-gateway",
    {
      capabilities: DROP_RAW,
      networksAdvanced: nets("t-env", "t-ingress", "t-desktop-link"),
      mounts: [mount("t-captures", "/captures", true)],
      envs: [
        'MULTIENV_GATEWAY_CONFIG={"listen":{}}',
        secret("MULTIENV_CONTROL_TOKEN=0123456789abcdef0123456789abcdef"),
      ],
      labels: labels({ "multienv.role": "gateway" }),
      ...extra,
    },
    ["envs"],
  );
}

export function site(
  name: string,
  role: "server" | "frontend",
  extra: Record<string, unknown> = {},
  additionalSecretOutputs?: string[],
): GraphResource {
  return container(
    `t-${name}-${role}`,
    {
      capabilities: DROP_RAW,
      networksAdvanced: nets("t-env"),
      ...(role === "server" ? { envs: ['AGENTENV_WEBSITE_SETTINGS={"currency":"USD"}'] } : {}),
      labels: labels({ "multienv.role": role, "multienv.site": name }),
      ...extra,
    },
    additionalSecretOutputs,
  );
}

export function sidecar(name: string, role: "server" | "frontend", extra: Record<string, unknown> = {}): GraphResource {
  return container(`t-${name}-${role}-capture`, {
    capabilities: { adds: ["CAP_NET_RAW", "CAP_NET_ADMIN"], drops: [] },
    networkMode: `container:t-${name}-${role}-id`,
    mounts: [mount("t-captures", "/captures", false)],
    labels: labels({ "multienv.role": "capture", "multienv.capture.site": name, "multienv.capture.role": role }),
    ...extra,
  });
}

export function computer(name: string): GraphResource[] {
  return [
    network(`t-${name}-net`, true),
    network(`t-${name}-link`, true),
    network(`t-${name}-egress`, false),
    volume(`t-${name}-ca`),
    container(
      `t-${name}-proxy`,
      {
        capabilities: DROP_RAW,
        networksAdvanced: nets(`t-${name}-net`, `t-${name}-link`, `t-${name}-egress`),
        mounts: [mount(`t-${name}-ca`, "/var/lib/multienv/ca", false)],
        envs: [
          'MULTIENV_SITE_PROXY_CONFIG={"listen":{}}',
          secret("MULTIENV_SITE_PROXY_TOKEN=fedcba9876543210fedcba9876543210"),
        ],
        labels: labels({ "multienv.role": "site-proxy", "multienv.computer": name }),
      },
      ["envs"],
    ),
    container(`t-${name}-browser`, {
      capabilities: DROP_RAW,
      networksAdvanced: nets(`t-${name}-net`),
      mounts: [mount(`t-${name}-ca`, "/var/lib/multienv/ca", true)],
      labels: labels({ "multienv.role": "browser", "multienv.computer": name }),
    }),
  ];
}

/**
 * A compliant docker env: a synthetic shop (server + frontend), a live site with a secret setting, one computer,
 * capture on. The containers that carry a secret list "envs" in additionalSecretOutputs, as components/ does.
 */
export function dockerGraph(): Graph {
  return {
    resources: [
      network("t-env", true),
      network("t-egress", false),
      network("t-ingress", false),
      volume("t-captures"),
      gateway(),
      site("shop", "server"),
      site("shop", "frontend"),
      site(
        "github",
        "server",
        {
          networksAdvanced: nets("t-env", "t-egress"),
          envs: secret(['AGENTENV_WEBSITE_SETTINGS={"account":"alex","token":"ghp_secretsecret"}']),
          labels: labels({ "multienv.role": "server", "multienv.site": "github", "multienv.secret-settings": "token" }),
        },
        ["envs"],
      ),
      sidecar("shop", "server"),
      sidecar("shop", "frontend"),
      sidecar("github", "server"),
      ...computer("desktop"),
      { type: "multienv:index:ControlToken", name: "t-control-token", inputs: {} },
      {
        type: "pulumi-nodejs:dynamic/multienv:Secret",
        name: "t-control-token-generator",
        parent: "t-control-token",
        parentType: "multienv:index:ControlToken",
        inputs: { bytes: 32 },
        additionalSecretOutputs: ["value"],
      },
    ],
    outputs: { controlToken: secret("0123456789abcdef0123456789abcdef"), captureTraffic: true },
  };
}

const TAGS = { "multienv:stack": "t", "multienv:task": "t" };

export function aws(type: string, name: string, inputs: Record<string, unknown>): GraphResource {
  return { type, name, inputs: { tags: { Name: name, ...TAGS }, ...inputs } };
}

/** A compliant ec2 env's AWS resources: the env VM and its security group with runner-only SSH and gateway. */
export function ec2Resources(): GraphResource[] {
  return [
    aws(TYPES.securityGroup, "t-env-sg", { description: "env" }),
    aws(TYPES.ingressRule, "t-env-in-ssh", { ipProtocol: "tcp", fromPort: 22, toPort: 22, cidrIpv4: "203.0.113.7/32" }),
    aws(TYPES.ingressRule, "t-env-in-gw", {
      ipProtocol: "tcp",
      fromPort: 8080,
      toPort: 8080,
      cidrIpv4: "203.0.113.7/32",
    }),
    aws(TYPES.egressRule, "t-env-out-443", { ipProtocol: "tcp", fromPort: 443, toPort: 443, cidrIpv4: "0.0.0.0/0" }),
    aws(TYPES.instance, "t-env-vm", {
      metadataOptions: { httpTokens: "required", httpEndpoint: "enabled", httpPutResponseHopLimit: 1 },
      rootBlockDevice: { encrypted: true, volumeType: "gp3" },
      instanceInitiatedShutdownBehavior: "terminate",
    }),
    aws("aws:ec2/keyPair:KeyPair", "t-env-key", { publicKey: "ssh-ed25519 AAAA" }),
  ];
}
