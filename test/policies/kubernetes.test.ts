// The Kubernetes forms of the pack's rules, over the graph the real program renders for stacks/demo-kubernetes
// (and two variants of it: capture off, a site with a secret setting) under Pulumi's mocks: each passes, through
// runPolicies (`multienv check`) and through the running CrossGuard pack (`pulumi up --policy-pack policies`).
// Then the graph broken the way a mistake or an attacker's change would break it, each caught by the policy named
// for it, with a message naming the resource.
import * as path from "node:path";
import * as k8s from "@pulumi/kubernetes";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runPolicies, type Graph as PolicyGraph } from "../../policies/evaluate";
import { SECRET_ENV } from "../../policies/contract";
import { TYPES } from "../../policies/model";
import { CAPTURE_SERVER_ENV } from "../../src/protocol/gateway-config";
import { readStackFile } from "../../src/config";
import { publicWebPeers } from "../../src/plan/targets/kubernetes";
import { renderGraph, type Graph, type GraphResource } from "../../src/runner/check/graph";
import { engineResourcesOf, RunningPack } from "./crossguard";

const STACK_FILE = path.resolve(__dirname, "../../stacks/Pulumi.demo-kubernetes.yaml");
const NS = "demo-kubernetes";

let pack: RunningPack;
const graphs = new Map<string, Graph>();

beforeAll(async () => {
  pack = await RunningPack.start();
  const stack = readStackFile(STACK_FILE);
  const variants: Record<string, { config: Record<string, string>; secretKeys: string[] }> = {
    demo: { config: stack.rawConfig, secretKeys: stack.secretKeys },
    "capture-off": { config: { ...stack.rawConfig, "multienv:captureTraffic": "false" }, secretKeys: stack.secretKeys },
    "secret-setting": (() => {
      const websites = JSON.parse(stack.rawConfig["multienv:websites"]);
      websites.github.secretSettings = { token: "githubToken" };
      return {
        config: {
          ...stack.rawConfig,
          "multienv:websites": JSON.stringify(websites),
          "multienv:githubToken": "ghp_0123456789abcdef",
        },
        secretKeys: [...stack.secretKeys, "multienv:githubToken"],
      };
    })(),
  };
  // One render at a time: the Pulumi runtime's state is global.
  for (const [name, v] of Object.entries(variants))
    graphs.set(name, await renderGraph({ stack: stack.stack, config: v.config, secretKeys: v.secretKeys }));
});
afterAll(() => pack?.stop());

function graph(variant = "demo"): Graph {
  return structuredClone(graphs.get(variant)!);
}

/** The resource of `type` whose logical name is `<stack>-<name>` (a Pod and its Service share a name). */
function resource(g: Graph, type: string, name: string): GraphResource {
  const found = g.resources.find((r) => r.type === type && r.name === `${NS}-${name}`);
  if (found === undefined) throw new Error(`the graph has no ${type} ${NS}-${name}`);
  return found;
}

const pod = (g: Graph, name: string) => resource(g, TYPES.pod, name);
const spec = (r: GraphResource) => r.inputs.spec as Record<string, any>;
const container = (g: Graph, podName: string, name: string, list = "containers") =>
  (spec(pod(g, podName))[list] as Record<string, any>[]).find((c) => c.name === name)!;

/** A copy of `r` as another resource of the same type, named `<stack>-<name>` (and `name` in the cluster). */
function copyOf(r: GraphResource, name: string): GraphResource {
  const copy = structuredClone(r);
  copy.name = `${NS}-${name}`;
  copy.urn = copy.urn.replace(/::[^:]+$/, `::${copy.name}`);
  copy.inputs.metadata = { ...(copy.inputs.metadata as object), name };
  return copy;
}

const policiesOf = (violations: { policy: string }[]) => [...new Set(violations.map((v) => v.policy))];
const messages = (violations: { message: string }[]) => violations.map((v) => v.message);

/** What `multienv check` and the running pack each report over `g`. */
async function both(g: Graph) {
  const checked = runPolicies(g as PolicyGraph);
  const deployed = await pack.analyzeAll(engineResourcesOf(g as PolicyGraph));
  return { checked, deployed };
}

describe("the demo-kubernetes stack", () => {
  it("renders the kubernetes resources the rules judge", () => {
    const types = new Set(graph().resources.map((r) => r.type));
    for (const t of [TYPES.namespace, TYPES.pod, TYPES.service, TYPES.kubernetesSecret, TYPES.networkPolicy])
      expect(types).toContain(t);
  });

  it.each(["demo", "capture-off", "secret-setting"])(
    "%s passes the whole pack, under mocks and CrossGuard",
    async (v) => {
      const { checked, deployed } = await both(graph(v));
      expect(checked).toEqual([]);
      expect(deployed).toEqual([]);
    },
  );

  it("uses @pulumi/kubernetes's own type tokens, and the capture server's own token variable", () => {
    expect(SECRET_ENV.captureServerToken).toBe(CAPTURE_SERVER_ENV.token);
    expect(TYPES.pod).toBe((k8s.core.v1.Pod as any).__pulumiType);
    expect(TYPES.namespace).toBe((k8s.core.v1.Namespace as any).__pulumiType);
    expect(TYPES.service).toBe((k8s.core.v1.Service as any).__pulumiType);
    expect(TYPES.kubernetesSecret).toBe((k8s.core.v1.Secret as any).__pulumiType);
    expect(TYPES.networkPolicy).toBe((k8s.networking.v1.NetworkPolicy as any).__pulumiType);
  });

  it("is judged in a preview, where ClusterIPs, the namespace and the Secrets' data are not known yet", async () => {
    const UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9";
    const g = graph();
    for (const r of g.resources) {
      if (r.type === TYPES.pod) {
        r.inputs.metadata = { ...(r.inputs.metadata as object), namespace: UNKNOWN };
        spec(r).hostAliases = (spec(r).hostAliases as object[]).map((a) => ({ ...a, ip: UNKNOWN }));
      }
      if (r.type === TYPES.kubernetesSecret) r.inputs.stringData = UNKNOWN;
      if (r.type === TYPES.networkPolicy) r.inputs.metadata = { ...(r.inputs.metadata as object), namespace: UNKNOWN };
    }
    expect(await pack.analyzeAll(engineResourcesOf(g as PolicyGraph))).toEqual([]);
    // What is known is still judged.
    spec(pod(g, "gateway")).automountServiceAccountToken = true;
    expect(messages(await pack.analyzeAll(engineResourcesOf(g as PolicyGraph)))).toEqual([
      expect.stringMatching(/"gateway" \(demo-kubernetes-gateway\) mounts a service account token/),
    ]);
  });
});

describe("container-privileges on pods", () => {
  const P = "container-privileges";

  it("refuses a pod with the service account token mounted (unset is mounted)", async () => {
    const g = graph();
    delete spec(pod(g, "desktop-browser")).automountServiceAccountToken;
    const { checked, deployed } = await both(g);
    expect(policiesOf(checked)).toEqual([P]);
    expect(checked[0].name).toBe(`${NS}-desktop-browser`);
    expect(checked[0].message).toMatch(
      /"desktop-browser" \(demo-kubernetes-desktop-browser\) mounts a service account token/,
    );
    expect(policiesOf(deployed)).toEqual([P]);
  });

  it("refuses a hostPath volume and the node's namespaces", async () => {
    const g = graph();
    const s = spec(pod(g, "shop-server"));
    s.volumes.push({ name: "docker", hostPath: { path: "/var/run/docker.sock" } });
    spec(pod(g, "gateway")).hostNetwork = true;
    spec(pod(g, "open-proxy")).hostPID = true;
    spec(pod(g, "gist-frontend")).hostIPC = true;
    const { checked, deployed } = await both(g);
    expect(policiesOf(checked)).toEqual([P]);
    expect(messages(checked)).toEqual([
      expect.stringMatching(/"shop-server" .* mounts the node's \/var\/run\/docker.sock \(hostPath volume "docker"\)/),
      expect.stringMatching(/"gist-frontend" .* shares the node's IPC namespace/),
      expect.stringMatching(/"gateway" .* shares the node's network namespace \(hostNetwork: true\)/),
      expect.stringMatching(/"open-proxy" .* shares the node's PID namespace/),
    ]);
    expect(deployed).toHaveLength(4);
  });

  it("refuses a capability added to a site container, NET_BIND_SERVICE alone allowed", async () => {
    const g = graph();
    container(g, "shop-server", "server").securityContext.capabilities.add = [
      "NET_BIND_SERVICE",
      "SYS_PTRACE",
      "NET_RAW",
    ];
    const { checked, deployed } = await both(g);
    expect(policiesOf(checked)).toEqual([P]);
    expect(messages(checked)).toEqual([
      expect.stringMatching(/"shop-server" .* container "server" adds NET_RAW but is not a capture sidecar/),
      expect.stringMatching(
        /"shop-server" .* container "server" adds SYS_PTRACE; a container adds NET_BIND_SERVICE at most/,
      ),
    ]);
    expect(deployed).toHaveLength(2);
  });

  it("lets a website pod's capture init container alone hold NET_RAW and NET_ADMIN (and SETGID), nothing more", () => {
    const g = graph();
    // A container named `capture` in a browser's pod is no capture.
    spec(pod(g, "desktop-browser")).initContainers.push({
      ...container(g, "shop-server", "capture", "initContainers"),
    });
    container(g, "shop-frontend", "capture", "initContainers").securityContext.capabilities.add.push("SYS_ADMIN");
    const found = runPolicies(g as PolicyGraph, { only: [P] });
    expect(messages(found)).toEqual([
      expect.stringMatching(/"shop-frontend" .* init container "capture" \(the capture\) adds SYS_ADMIN/),
      expect.stringMatching(/"desktop-browser" .* init container "capture" adds NET_RAW but is not a capture sidecar/),
      expect.stringMatching(
        /"desktop-browser" .* init container "capture" adds NET_ADMIN but is not a capture sidecar/,
      ),
      expect.stringMatching(
        /"desktop-browser" .* init container "capture" adds SETGID; a container adds NET_BIND_SERVICE/,
      ),
    ]);
  });

  it("requires drop ALL, no privilege escalation and no privileged container, init containers included", () => {
    const g = graph();
    const server = container(g, "gist-server", "capture-server", "initContainers");
    server.securityContext = { privileged: true, capabilities: { drop: ["NET_RAW"] }, readOnlyRootFilesystem: true };
    const found = runPolicies(g as PolicyGraph, { only: [P] });
    expect(messages(found)).toEqual([
      expect.stringMatching(/"gist-server" .* init container "capture-server" is privileged/),
      expect.stringMatching(/init container "capture-server" may gain privileges.*allowPrivilegeEscalation: false/),
      expect.stringMatching(/init container "capture-server" keeps the runtime's default capabilities/),
    ]);
  });

  it("requires a read-only root of the project's own containers, not of a site's or a computer's own image", () => {
    const g = graph();
    container(g, "desktop-proxy", "site-proxy").securityContext.readOnlyRootFilesystem = false;
    container(g, "open-browser", "fetch-ca", "initContainers").securityContext.readOnlyRootFilesystem = false;
    container(g, "shop-server", "capture", "initContainers").securityContext.readOnlyRootFilesystem = false;
    // A computer with its own image may write where it likes, as a site's image may.
    const own = container(g, "desktop-browser", "browser");
    own.image = "example/own-browser:1";
    own.securityContext.readOnlyRootFilesystem = false;
    expect(messages(runPolicies(g as PolicyGraph, { only: [P] }))).toEqual([
      expect.stringMatching(/"shop-server" .* init container "capture" runs a project image with a writable root/),
      expect.stringMatching(/"desktop-proxy" .* container "site-proxy" runs a project image with a writable root/),
      expect.stringMatching(/"open-browser" .* init container "fetch-ca" runs a project image with a writable root/),
    ]);
  });
});

describe("kubernetes-network-walls", () => {
  const P = "kubernetes-network-walls";
  const policy = (g: Graph, name: string) => resource(g, TYPES.networkPolicy, name);

  it("refuses a namespace without its default deny, naming the namespace", async () => {
    const g = graph();
    g.resources = g.resources.filter((r) => r.name !== `${NS}-default-deny`);
    const { checked, deployed } = await both(g);
    expect(policiesOf(checked)).toEqual([P]);
    expect(checked[0].name).toBe(`${NS}-namespace`);
    expect(checked[0].message).toMatch(/namespace "demo-kubernetes" has no default-deny NetworkPolicy/);
    expect(policiesOf(deployed)).toEqual([P]);
  });

  it("does not take a default deny with a rule in it, or one of one direction, for a default deny", () => {
    for (const change of [
      (s: Record<string, any>) => (s.egress = [{}]),
      (s: Record<string, any>) => (s.policyTypes = ["Ingress"]),
      (s: Record<string, any>) => (s.podSelector = { matchLabels: { "multienv.role": "browser" } }),
    ]) {
      const g = graph();
      change(spec(policy(g, "default-deny")));
      expect(messages(runPolicies(g as PolicyGraph, { only: [P] }))).toContainEqual(
        expect.stringMatching(/namespace "demo-kubernetes" has no default-deny NetworkPolicy/),
      );
    }
  });

  it("refuses a browser egress to 0.0.0.0/0, naming the policy and the browser", async () => {
    const g = graph();
    spec(policy(g, "desktop-browser-to-desktop-proxy-egress")).egress.push({
      to: [{ ipBlock: { cidr: "0.0.0.0/0" } }],
    });
    const { checked, deployed } = await both(g);
    expect(policiesOf(checked)).toEqual([P]);
    for (const v of checked) expect(v.name).toBe(`${NS}-desktop-browser-to-desktop-proxy-egress`);
    expect(messages(checked)).toEqual([
      expect.stringMatching(
        /egress\[1\] reaches \{"ipBlock":\{"cidr":"0.0.0.0\/0"\}\}, which lets through the non-public 0.0.0.0\/8, 10.0.0.0\/8/,
      ),
      expect.stringMatching(
        /egress\[1\] lets "desktop-browser" \(demo-kubernetes-desktop-browser\) \(role browser\) reach/,
      ),
      expect.stringMatching(
        /egress\[1\] lets the browser "desktop-browser" .* reach .*; a browser reaches its own computer's proxy alone/,
      ),
    ]);
    expect(deployed).toHaveLength(3);
  });

  it("lets a browser reach its own proxy alone: not every proxy, not DNS", () => {
    const g = graph();
    const own = spec(policy(g, "desktop-browser-to-desktop-proxy-egress"));
    own.egress[0].to = [{ podSelector: { matchLabels: { "multienv.role": "site-proxy" } } }];
    own.egress.push({ to: [{ ipBlock: { cidr: "0.0.0.0/0" } }], ports: [{ protocol: "UDP", port: 53 }] });
    expect(messages(runPolicies(g as PolicyGraph, { only: [P] }))).toEqual([
      expect.stringMatching(
        /egress\[0\] lets the browser "desktop-browser" .* reach \{"podSelector":\{"matchLabels":\{"multienv.role":"site-proxy"\}\}\}/,
      ),
      expect.stringMatching(/egress\[1\] lets the browser "desktop-browser" .* reach \{"ipBlock"/),
    ]);
  });

  it("sees a policy that selects every pod (podSelector {}) give the browsers and the gateway egress", () => {
    const g = graph();
    const dns = copyOf(policy(g, "default-deny"), "allow-dns");
    Object.assign(spec(dns), {
      policyTypes: ["Egress"],
      egress: [{ to: [{ namespaceSelector: {} }], ports: [{ protocol: "UDP", port: 53 }] }],
    });
    g.resources.push(dns);
    const found = runPolicies(g as PolicyGraph, { only: [P] });
    expect(found.every((v) => v.name === `${NS}-allow-dns`)).toBe(true);
    expect(messages(found)).toEqual([
      expect.stringMatching(/lets the browser "desktop-browser"/),
      expect.stringMatching(/lets the browser "open-browser"/),
    ]);
  });

  it("refuses web egress of a synthetic site's server, and of the gateway even to DNS alone", () => {
    const g = graph();
    const web = copyOf(policy(g, "github-server-to-web"), "shop-server-to-web");
    spec(web).podSelector = { matchLabels: { "multienv.role": "server", "multienv.site": "shop" } };
    const gatewayDns = copyOf(web, "gateway-dns");
    spec(gatewayDns).podSelector = { matchLabels: { "multienv.role": "gateway" } };
    spec(gatewayDns).egress = [{ to: [{ ipBlock: { cidr: "10.0.0.0/8" } }], ports: [{ protocol: "UDP", port: 53 }] }];
    g.resources.push(web, gatewayDns);
    const found = runPolicies(g as PolicyGraph, { only: [P] });
    expect(found.map((v) => [v.name, v.message])).toEqual([
      [
        `${NS}-shop-server-to-web`,
        expect.stringMatching(
          /lets "shop-server" \(demo-kubernetes-shop-server\) \(role server\) reach .*only live site servers and site proxies reach the web/,
        ),
      ],
      [`${NS}-shop-server-to-web`, expect.stringMatching(/lets "shop-server" .* reach \{"ipBlock":\{"cidr":"::\/0"/)],
      [
        `${NS}-gateway-dns`,
        expect.stringMatching(/egress\[0\] lets the gateway "gateway" .* reach \{"ipBlock":\{"cidr":"10.0.0.0\/8"\}\}/),
      ],
    ]);
  });

  it("refuses the live server's web without the metadata range excepted, and a rule with no peers (everywhere)", () => {
    const g = graph();
    const live = spec(policy(g, "github-server-to-web"));
    live.egress[0].to[0].ipBlock.except = live.egress[0].to[0].ipBlock.except.filter(
      (c: string) => c !== "169.254.0.0/16",
    );
    const proxy = spec(policy(g, "open-proxy-to-web"));
    delete proxy.egress[0].to;
    expect(messages(runPolicies(g as PolicyGraph, { only: [P] }))).toEqual([
      expect.stringMatching(/"github-server-to-web" .* lets through the non-public 169.254.0.0\/16;/),
      expect.stringMatching(
        /"open-proxy-to-web" .* egress\[0\] reaches every destination \(it lists no peers\), which lets through the non-public 0.0.0.0\/8/,
      ),
      expect.stringMatching(
        /"open-proxy-to-web" .* egress\[0\] reaches every destination .* lets through the non-public ::\/3, 4000::\/2, 8000::\/1, 2001::\/23, 2001:db8::\/32, 2002::\/16, 3fff::\/20;/,
      ),
    ]);
  });

  it("reads address blocks as blocks: a wider except covers, a public block needs none, a private one is refused", () => {
    const g = graph();
    const live = spec(policy(g, "github-server-to-web"));
    live.egress[0].to = [
      {
        ipBlock: {
          cidr: "0.0.0.0/0",
          except: ["0.0.0.0/1", "168.63.129.16/32", "169.254.0.0/16", "172.16.0.0/12", "192.0.0.0/2"],
        },
      },
      { ipBlock: { cidr: "140.82.112.0/20" } },
      ...publicWebPeers().slice(1),
    ];
    expect(runPolicies(g as PolicyGraph, { only: [P] })).toEqual([]);
    live.egress[0].to.push({ ipBlock: { cidr: "10.96.0.0/12" } }, { ipBlock: { cidr: "fd00::/8" } });
    expect(messages(runPolicies(g as PolicyGraph, { only: [P] }))).toEqual([
      expect.stringMatching(
        /reaches \{"ipBlock":\{"cidr":"10.96.0.0\/12"\}\}, which lets through the non-public 10.0.0.0\/8/,
      ),
      expect.stringMatching(
        /reaches \{"ipBlock":\{"cidr":"fd00::\/8"\}\}, which lets through the non-public 8000::\/1;/,
      ),
    ]);
  });

  it("refuses ingress from an address block, another namespace, or anywhere", async () => {
    const g = graph();
    spec(policy(g, "gateway-to-shop-server-ingress")).ingress[0].from.push({ ipBlock: { cidr: "10.0.0.0/8" } });
    spec(policy(g, "desktop-proxy-to-desktop-browser-ingress")).ingress[0].from = [
      { namespaceSelector: {}, podSelector: { matchLabels: { "multienv.role": "site-proxy" } } },
    ];
    spec(policy(g, "gateway-to-open-proxy-ingress")).ingress.push({ ports: [{ protocol: "TCP", port: 3128 }] });
    const { checked, deployed } = await both(g);
    expect(checked.map((v) => [v.name, v.message])).toEqual([
      [`${NS}-gateway-to-open-proxy-ingress`, expect.stringMatching(/ingress\[1\] admits every source/)],
      [
        `${NS}-desktop-proxy-to-desktop-browser-ingress`,
        expect.stringMatching(/ingress\[0\] admits \{"namespaceSelector"/),
      ],
      [
        `${NS}-gateway-to-shop-server-ingress`,
        expect.stringMatching(/ingress\[0\] admits \{"ipBlock":\{"cidr":"10.0.0.0\/8"\}\}/),
      ],
    ]);
    expect(deployed).toHaveLength(3);
  });
});

describe("secrets-stay-secret on pods and Secrets", () => {
  const P = "secrets-stay-secret";

  it("refuses a plain-env control token in the gateway's pod spec, under mocks and at pulumi up", async () => {
    const g = graph();
    const env = container(g, "gateway", "gateway").env as Record<string, unknown>[];
    env[1] = { name: "MULTIENV_CONTROL_TOKEN", value: "3f1c0ffee3f1c0ffee3f1c0ffee" };
    const { checked, deployed } = await both(g);
    expect(policiesOf(checked)).toEqual([P]);
    expect(checked[0].name).toBe(`${NS}-gateway`);
    expect(checked[0].message).toMatch(
      /"gateway" \(demo-kubernetes-gateway\) container "gateway" sets MULTIENV_CONTROL_TOKEN in its spec \(env\[\]\.value\)/,
    );
    expect(messages(deployed)).toEqual([
      expect.stringMatching(/container "gateway" sets MULTIENV_CONTROL_TOKEN in its spec/),
    ]);
  });

  it("refuses a computer's token or a capture server's token set by value, or read from a ConfigMap", () => {
    const g = graph();
    (container(g, "open-proxy", "site-proxy").env as Record<string, unknown>[])[1] = {
      name: "MULTIENV_SITE_PROXY_TOKEN",
      value: "[secret]",
    };
    (container(g, "shop-frontend", "capture-server", "initContainers").env as Record<string, unknown>[])[1] = {
      name: "MULTIENV_CAPTURE_TOKEN",
      valueFrom: { configMapKeyRef: { name: "tokens", key: "capture" } },
    };
    expect(messages(runPolicies(g as PolicyGraph, { only: [P] }))).toEqual([
      expect.stringMatching(
        /"shop-frontend" .* container "capture-server" reads MULTIENV_CAPTURE_TOKEN from configMapKeyRef, not from a Secret/,
      ),
      expect.stringMatching(/"open-proxy" .* container "site-proxy" sets MULTIENV_SITE_PROXY_TOKEN in its spec/),
    ]);
  });

  it("holds a server annotated with secret settings to its settings by reference", async () => {
    const g = graph("secret-setting");
    const server = pod(g, "github-server");
    expect((server.inputs.metadata as any).annotations).toEqual({ "multienv.secret-settings": "token" });
    (container(g, "github-server", "server").env as Record<string, unknown>[])[1] = {
      name: "AGENTENV_WEBSITE_SETTINGS",
      value: '{"account":"alex","token":"ghp_0123456789abcdef"}',
    };
    const { checked, deployed } = await both(g);
    expect(policiesOf(checked)).toEqual([P]);
    expect(messages(checked)).toContainEqual(
      expect.stringMatching(/"github-server" .* container "server" sets AGENTENV_WEBSITE_SETTINGS in its spec/),
    );
    expect(messages(deployed)).toEqual([
      expect.stringMatching(/"github-server" .* sets AGENTENV_WEBSITE_SETTINGS in its spec/),
    ]);
    // Unannotated, plain settings are a site's own business.
    expect(runPolicies(graph(), { only: [P] })).toEqual([]);
  });

  it("refuses any secret-marked value put into a pod spec (seen under the mocks)", () => {
    const g = graph();
    (container(g, "gist-server", "server").env as Record<string, unknown>[]).push({
      name: "API_KEY",
      value: "[secret]",
    });
    expect(messages(runPolicies(g as PolicyGraph, { only: [P] }))).toEqual([
      expect.stringMatching(
        /"gist-server" .* container "server" puts a secret into its spec \(API_KEY, env\[\]\.value\)/,
      ),
    ]);
  });

  it("refuses a Secret whose data is plaintext, empty, or stripped of its secret outputs", async () => {
    const g = graph();
    resource(g, TYPES.kubernetesSecret, "gateway-env").inputs.stringData = {
      controlToken: "3f1c0ffee3f1c0ffee3f1c0ffee",
    };
    delete resource(g, TYPES.kubernetesSecret, "open-proxy-env").inputs.stringData;
    resource(g, TYPES.kubernetesSecret, "shop-server-env").additionalSecretOutputs = undefined;
    const { checked, deployed } = await both(g);
    expect(policiesOf(checked)).toEqual([P]);
    expect(checked.map((v) => [v.name, v.message])).toEqual(
      expect.arrayContaining([
        [`${NS}-gateway-env`, expect.stringMatching(/"gateway-env" .* stringData \(controlToken\) is plaintext/)],
        [`${NS}-open-proxy-env`, expect.stringMatching(/"open-proxy-env" .* holds no stringData or data/)],
        [
          `${NS}-shop-server-env`,
          expect.stringMatching(
            /"shop-server-env" .* does not list "data" and "stringData" in additionalSecretOutputs/,
          ),
        ],
      ]),
    );
    // At pulumi up the values are unwrapped: what shows is the missing data and the missing options.
    expect(messages(deployed)).toEqual([
      expect.stringMatching(/"open-proxy-env" .* holds no stringData or data/),
      expect.stringMatching(/"shop-server-env" .* does not list "data" and "stringData"/),
    ]);
  });
});

describe("capture-sidecar-per-website on pods", () => {
  const P = "capture-sidecar-per-website";

  it("names the website pod whose capture is missing", async () => {
    const g = graph();
    const s = spec(pod(g, "shop-frontend"));
    s.initContainers = s.initContainers.filter((c: { name: string }) => c.name !== "capture");
    const { checked, deployed } = await both(g);
    expect(policiesOf(checked)).toEqual([P]);
    expect(checked[0].name).toBe(`${NS}-shop-frontend`);
    expect(checked[0].message).toMatch(
      /website pod "shop-frontend" \(demo-kubernetes-shop-frontend\) has no capture sidecar/,
    );
    expect(policiesOf(deployed)).toEqual([P]);
  });

  it("refuses a capture that is no native sidecar, and a doubled one", () => {
    const g = graph();
    const server = container(g, "gist-server", "capture", "initContainers");
    delete server.restartPolicy;
    const s = spec(pod(g, "github-server"));
    s.initContainers.push(structuredClone(s.initContainers[0]));
    expect(messages(runPolicies(g as PolicyGraph, { only: [P] }))).toEqual([
      expect.stringMatching(/"gist-server" .* runs "capture" but not as a native sidecar/),
      expect.stringMatching(/"github-server" .* has 2 capture sidecars; keep exactly one/),
    ]);
  });

  it("refuses a capture in a pod when capture is off", async () => {
    const g = graph("capture-off");
    expect(g.outputs.captureTraffic).toBe(false);
    const on = graph();
    spec(pod(g, "shop-server")).initContainers = spec(pod(on, "shop-server")).initContainers;
    const { checked, deployed } = await both(g);
    expect(policiesOf(checked)).toEqual([P]);
    expect(checked[0].message).toMatch(/capture is off but pod "shop-server" .* has a "capture" container/);
    expect(policiesOf(deployed)).toEqual([P]);
  });
});

describe("kubernetes-service-exposure", () => {
  const P = "kubernetes-service-exposure";
  const service = (g: Graph, name: string) => resource(g, TYPES.service, name);

  it("refuses a NodePort Service, naming it", async () => {
    const g = graph();
    spec(service(g, "gateway")).type = "NodePort";
    const { checked, deployed } = await both(g);
    expect(policiesOf(checked)).toEqual([P]);
    expect(checked[0].name).toBe(`${NS}-gateway`);
    expect(checked[0].message).toMatch(
      /"gateway" \(demo-kubernetes-gateway\) is of type NodePort, which opens it to outside the cluster/,
    );
    expect(messages(deployed)).toEqual([expect.stringMatching(/is of type NodePort/)]);
  });

  it("refuses LoadBalancer, ExternalName, externalIPs, a nodePort and the runner's port 8080", () => {
    const g = graph();
    spec(service(g, "shop-server")).type = "LoadBalancer";
    spec(service(g, "shop-frontend")).type = "ExternalName";
    spec(service(g, "desktop-proxy")).externalIPs = ["203.0.113.9"];
    spec(service(g, "gateway")).ports.push({ name: "runner", port: 18080, targetPort: 8080, nodePort: 30080 });
    expect(runPolicies(g as PolicyGraph, { only: [P] }).map((v) => [v.name, v.message])).toEqual([
      [`${NS}-gateway`, expect.stringMatching(/port "runner" carries 8080, the gateway's runner port/)],
      [`${NS}-gateway`, expect.stringMatching(/port "runner" asks for nodePort 30080/)],
      [`${NS}-shop-server`, expect.stringMatching(/is of type LoadBalancer/)],
      [`${NS}-shop-frontend`, expect.stringMatching(/is of type ExternalName, which points outside the cluster/)],
      [`${NS}-desktop-proxy`, expect.stringMatching(/takes traffic at the externalIPs 203.0.113.9/)],
    ]);
  });
});
