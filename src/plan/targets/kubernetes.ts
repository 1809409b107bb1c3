// The kubernetes target (docs/kubernetes.md): where each part of the env runs on a cluster, which pod may
// reach which, and what each pod's services are told. Pure data from a Plan; the components only declare these
// pods, Services, Secrets and NetworkPolicies.
//
// Placement: one namespace per task stack, named after it. Every website container (a site's server, its
// frontend), the gateway, and each computer's browser and its site proxy run in a bare Pod of their own, each
// behind a ClusterIP Service of the same name. Bare Pods, not Deployments: each part is exactly one process
// with one identity the runner and the gateway address by name; a Deployment's ReplicaSet would name its pods
// anew and, during a rollout, run two of a part at once (two browsers on one session, two captures of one
// site). The kubelet restarts a failed container in place (restartPolicy Always), as Docker's restart policy
// does, and a pod that must start over (a reset) is recreated by the runner from its own spec.
//
// Names: the services keep the names they use on Docker (`shop-server`, `proxy-desk`, `site-proxy`...). No
// cluster DNS is needed for them: each pod's /etc/hosts maps the names it dials to the ClusterIPs of the
// Services behind them (hostAliases), and a listener binds to the pod's own hostname, its pod address (the
// kubelet writes it into /etc/hosts), never to every address. The gateway's runner listener binds to the pod's
// loopback: a port-forward through the API server reaches it, and no pod, Service or node does.
import { problem } from "../problems";
import {
  CAPTURES_DIR,
  CDP_PORT,
  GATEWAY_BROWSE_PORT,
  SITE_PROXY_CONTROL_PORT,
  SITE_PROXY_PORT,
  networkAliases,
  topologyNames,
  type SiteRole,
} from "../topology";
import { CAPTURE_SERVER_PORT } from "../../protocol/traffic";
import { NON_PUBLIC_CIDRS } from "../../protocol/address-ranges";
import type {
  KubernetesConfig,
  KubernetesPlacement,
  KubernetesPlacementGroup,
  Plan,
  PlannedCapture,
  PlannedComputer,
  PlannedKubernetes,
  PlannedWebsite,
  Problem,
  StackConfig,
  Toleration,
} from "../types";

/**
 * The address ranges that are not the public web (the cluster's own pods, Services and nodes are in them, and cloud
 * metadata): the one list the site proxy refuses too (src/protocol/address-ranges.ts), as a policy can hold it.
 */
export const KUBERNETES_NON_PUBLIC_CIDRS = NON_PUBLIC_CIDRS;

/** Namespaces a task stack may not take: the cluster's own. */
const CLUSTER_NAMESPACES = ["default", "kube-system", "kube-public", "kube-node-lease"];

/** The image pull policy when the config gives none: with a registry, pull when absent; without, never pull. */
export function defaultPullPolicy(k: Pick<KubernetesConfig, "imageRegistry">): "IfNotPresent" | "Never" {
  return k.imageRegistry === undefined ? "Never" : "IfNotPresent";
}

/** What the kubernetes target refuses, each naming its key (only when the target is kubernetes). */
export function kubernetesProblems(config: StackConfig, stack: string): Problem[] {
  if (config.target !== "kubernetes") return [];
  const problems: Problem[] = [];
  if (CLUSTER_NAMESPACES.includes(stack) || stack.startsWith("kube-")) {
    problems.push(
      problem(
        "",
        `stack "${stack}": on the kubernetes target a stack's namespace is named after it, and ${stack} is the cluster's own; choose another stack name`,
      ),
    );
  }
  const k = config.kubernetes;
  if (k === undefined) return problems;
  if (k.imagePullPolicy === "Always" && k.imageRegistry === undefined) {
    problems.push(
      problem(
        ["kubernetes", "imagePullPolicy"],
        "Always pulls the project's images (multienv/gateway, site-proxy, browser) from a registry, and kubernetes.imageRegistry names none; set kubernetes.imageRegistry to where they are pushed, or use IfNotPresent or Never with the images loaded on the nodes",
      ),
    );
  }
  k.tolerations.forEach((t, i) => problems.push(...tolerationProblems(t, ["kubernetes", "tolerations", i])));
  for (const group of PLACEMENT_GROUPS)
    k.placement[group]?.tolerations.forEach((t, i) =>
      problems.push(...tolerationProblems(t, ["kubernetes", "placement", group, "tolerations", i])),
    );
  return problems;
}

function tolerationProblems(t: Toleration, path: (string | number)[]): Problem[] {
  if (t.operator === "Exists" && t.value !== undefined)
    return [problem([...path, "value"], "must be unset when operator is Exists (it matches any value)")];
  if (t.operator === "Equal" && t.key === undefined)
    return [problem([...path, "key"], "is required when operator is Equal; set a key, or operator: Exists")];
  if (t.tolerationSeconds !== undefined && t.effect !== "NoExecute")
    return [problem([...path, "tolerationSeconds"], "applies to effect NoExecute alone; set effect: NoExecute")];
  return [];
}

/** Warnings of the kubernetes target: settings that change nothing. */
export function kubernetesWarnings(config: StackConfig): Problem[] {
  if (config.kubernetes === undefined) return [];
  if (config.target !== "kubernetes")
    return [
      problem(
        ["kubernetes"],
        `ignored, since target is ${config.target}; set target: kubernetes to deploy on a cluster, or remove kubernetes`,
      ),
    ];
  const noComputer = Object.keys(config.computers).length === 0;
  if (config.kubernetes.runtimeClassName !== undefined && noComputer)
    return [problem(["kubernetes", "runtimeClassName"], "ignored: it applies to computers' pods, and there is none")];
  if (config.kubernetes.placement.computers !== undefined && noComputer)
    return [problem(["kubernetes", "placement", "computers"], "ignored: it places computers' pods, and there is none")];
  return [];
}

// --- placement ---------------------------------------------------------------------------------------------

/** The groups of pods a config places apart (kubernetes.placement.<group>). */
export const PLACEMENT_GROUPS: readonly KubernetesPlacementGroup[] = ["computers", "sites", "gateway"];

/** The group a pod is placed with: a computer's browser and proxy, a site's pods (replay included), the gateway. */
export function placementGroupOf(role: PodRole): KubernetesPlacementGroup {
  switch (role) {
    case "browser":
    case "site-proxy":
      return "computers";
    case "server":
    case "frontend":
    case "replay":
      return "sites";
    case "gateway":
      return "gateway";
  }
}

/**
 * A group's placement: the target-wide nodeSelector with the group's over it (the group's value wins a key set in
 * both: it is the narrower statement), and the target-wide tolerations followed by the group's.
 */
function groupPlacement(
  config: Pick<KubernetesConfig, "nodeSelector" | "tolerations" | "placement">,
  group: KubernetesPlacementGroup,
): KubernetesPlacement {
  const own = config.placement[group];
  return {
    nodeSelector: { ...config.nodeSelector, ...own?.nodeSelector },
    tolerations: [...config.tolerations, ...(own?.tolerations ?? [])].map((t) => ({ ...t })),
  };
}

/** Where a pod goes: its group's placement. */
export function podPlacement(
  k: Pick<PlannedKubernetes, "placement">,
  pod: Pick<PlannedPod, "role">,
): KubernetesPlacement {
  return k.placement[placementGroupOf(pod.role)];
}

// --- pods --------------------------------------------------------------------------------------------------

export type PodRole = "gateway" | "server" | "frontend" | "replay" | "browser" | "site-proxy";

/** A port a pod listens on, exposed by its Service under the same name. */
export interface PodPort {
  name: string;
  port: number;
}

/** One pod of the env, and the Service of the same name in front of it. */
export interface PlannedPod {
  /** Pod and Service name, unique in the namespace. */
  name: string;
  role: PodRole;
  /** The main container's name. */
  container: string;
  /** `multienv.stack`, `multienv.role`, and `multienv.site` or `multienv.computer`. */
  labels: Record<string, string>;
  ports: PodPort[];
  /** Names this pod dials -> the pod (Service) behind each; written into its /etc/hosts as the Service's ClusterIP. */
  hostAliases: Record<string, string>;
  site?: string;
  siteRole?: SiteRole;
  computer?: string;
  /** Website pods that capture: the capture, recorded by a container of this pod. */
  capture?: PlannedCapture;
}

/** The `multienv.*` label keys (the same the Docker containers carry: src/protocol/labels.ts LABELS). */
const LABEL = {
  stack: "multienv.stack",
  role: "multienv.role",
  site: "multienv.site",
  computer: "multienv.computer",
};

/** Pod names: the name each part's services already use on the env network, or `<computer>-<part>`. */
export const kubernetesNames = {
  gateway: "gateway",
  site: (site: string, role: SiteRole) => `${site}-${role}`,
  /** A replayed site's replay server: the name the gateway dials it by on Docker too (`<site>-replay`). */
  replay: (site: string) => topologyNames.replayAlias(site),
  browser: (computer: string) => `${computer}-browser`,
  proxy: (computer: string) => `${computer}-proxy`,
  /** A website pod's capture containers: tcpdump, and the server that hands its files to the gateway. */
  captureContainer: "capture",
  captureServerContainer: "capture-server",
};

/**
 * The website container a pod's capture records, as the gateway and the traffic/v1 listing name it: `<site>-<role>`,
 * the pod's own name but for a replay server's pod (`<site>-replay`), whose capture is its site's frontend's.
 */
export function capturedContainer(capture: Pick<PlannedCapture, "site" | "role">): string {
  return kubernetesNames.site(capture.site, capture.role);
}

function sitePod(plan: Pick<Plan, "stack" | "capture">, site: PlannedWebsite, role: SiteRole): PlannedPod {
  const container = role === "server" ? site.server : site.frontend;
  if (container === undefined) throw new Error(`site ${site.name} has no ${role}`);
  const name = kubernetesNames.site(site.name, role);
  const captured = plan.capture.sidecars.find((s) => s.site === site.name && s.role === role);
  return {
    name,
    role,
    container: role,
    labels: { [LABEL.stack]: plan.stack, [LABEL.role]: role, [LABEL.site]: site.name },
    ports: [
      { name: "http", port: container.port },
      ...(captured ? [{ name: "captures", port: CAPTURE_SERVER_PORT }] : []),
    ],
    // A frontend dials its own server (AGENTENV_WEBSITE_SERVER); a server dials no pod.
    hostAliases: role === "frontend" ? { [site.server.alias ?? name]: kubernetesNames.site(site.name, "server") } : {},
    site: site.name,
    siteRole: role,
    ...(captured ? { capture: captured } : {}),
  };
}

/**
 * A replayed site's replay server: a pod the gateway alone reaches, on its site and control ports (and its capture
 * server's when capturing: the replay server is the site's frontend for the gateway, and captured as that).
 */
function replayPod(plan: Pick<Plan, "stack" | "capture">, site: PlannedWebsite): PlannedPod {
  if (site.replay === undefined) throw new Error(`site ${site.name} is not replayed`);
  const captured = plan.capture.sidecars.find((s) => s.site === site.name && s.role === "frontend");
  return {
    name: kubernetesNames.replay(site.name),
    role: "replay",
    container: "replay-server",
    labels: { [LABEL.stack]: plan.stack, [LABEL.role]: "replay", [LABEL.site]: site.name },
    ports: [
      { name: "http", port: site.replay.port },
      { name: "control", port: site.replay.controlPort },
      ...(captured ? [{ name: "captures", port: CAPTURE_SERVER_PORT }] : []),
    ],
    hostAliases: {},
    site: site.name,
    ...(captured ? { capture: captured } : {}),
  };
}

/** Every pod of the env, websites first, then the gateway, then each computer's proxy and browser. */
export function kubernetesPods(plan: Pick<Plan, "stack" | "capture" | "websites" | "computers">): PlannedPod[] {
  const sites = plan.websites.flatMap((site) => [
    sitePod(plan, site, "server"),
    ...(site.frontend ? [sitePod(plan, site, "frontend")] : []),
    ...(site.replay ? [replayPod(plan, site)] : []),
  ]);
  const gatewayAliases: Record<string, string> = {};
  for (const pod of sites) gatewayAliases[pod.name] = pod.name;
  for (const c of plan.computers) gatewayAliases[networkAliases.proxyOnLink(c.name)] = kubernetesNames.proxy(c.name);
  const gateway: PlannedPod = {
    name: kubernetesNames.gateway,
    role: "gateway",
    container: "gateway",
    labels: { [LABEL.stack]: plan.stack, [LABEL.role]: "gateway" },
    ports: plan.computers.length > 0 ? [{ name: "browse", port: GATEWAY_BROWSE_PORT }] : [],
    hostAliases: gatewayAliases,
  };
  const computers = plan.computers.flatMap((c) => computerPods(plan, c));
  return [...sites, gateway, ...computers];
}

/** The plan's pods by the component that deploys each, so each component is handed its own. */
export interface KubernetesPodsByPart {
  /** Every pod: the target puts a Service in front of each that has ports. */
  all: PlannedPod[];
  gateway: PlannedPod;
  /** Site -> its server's pod and its frontend's. */
  sites: Record<string, PlannedPod[]>;
  /** Replayed site -> its replay server's pod. */
  replays: Record<string, PlannedPod>;
  /** Computer -> its site proxy's pod and its browser's. */
  computers: Record<string, { proxy: PlannedPod; browser: PlannedPod }>;
}

export function kubernetesPodsByPart(
  plan: Pick<Plan, "stack" | "capture" | "websites" | "computers">,
): KubernetesPodsByPart {
  const all = kubernetesPods(plan);
  const named = (name: string): PlannedPod => {
    const pod = all.find((p) => p.name === name);
    if (pod === undefined) throw new Error(`the plan of stack ${plan.stack} has no pod ${name}`);
    return pod;
  };
  return {
    all,
    gateway: named(kubernetesNames.gateway),
    sites: Object.fromEntries(
      plan.websites.map((site) => [site.name, all.filter((p) => p.site === site.name && p.role !== "replay")]),
    ),
    replays: Object.fromEntries(
      plan.websites.flatMap((site) =>
        site.replay ? [[site.name, named(kubernetesNames.replay(site.name))] as const] : [],
      ),
    ),
    computers: Object.fromEntries(
      plan.computers.map((c) => [
        c.name,
        { proxy: named(kubernetesNames.proxy(c.name)), browser: named(kubernetesNames.browser(c.name)) },
      ]),
    ),
  };
}

function computerPods(plan: Pick<Plan, "stack">, c: PlannedComputer): PlannedPod[] {
  const labels = (role: PodRole) => ({ [LABEL.stack]: plan.stack, [LABEL.role]: role, [LABEL.computer]: c.name });
  return [
    {
      name: kubernetesNames.proxy(c.name),
      role: "site-proxy",
      container: "site-proxy",
      labels: labels("site-proxy"),
      ports: [
        { name: "forward", port: SITE_PROXY_PORT },
        { name: "control", port: SITE_PROXY_CONTROL_PORT },
      ],
      hostAliases: {
        [networkAliases.gatewayOnLink(c.name)]: kubernetesNames.gateway,
        [networkAliases.browserOnComputerNet]: kubernetesNames.browser(c.name),
      },
      computer: c.name,
    },
    {
      name: kubernetesNames.browser(c.name),
      role: "browser",
      container: "browser",
      labels: labels("browser"),
      ports: [{ name: "devtools", port: CDP_PORT }],
      hostAliases: { [networkAliases.proxyOnComputerNet]: kubernetesNames.proxy(c.name) },
      computer: c.name,
    },
  ];
}

// --- network policies -------------------------------------------------------------------------------------

/** A NetworkPolicy peer, as the API writes it. */
export type PolicyPeer =
  { podSelector: { matchLabels: Record<string, string> } } | { ipBlock: { cidr: string; except?: string[] } };

export interface PolicyPort {
  protocol: "TCP" | "UDP";
  port?: number;
}

/** A NetworkPolicy's name and spec, as the API writes them. */
export interface PlannedNetworkPolicy {
  name: string;
  spec: {
    podSelector: { matchLabels?: Record<string, string> };
    policyTypes: ("Ingress" | "Egress")[];
    ingress?: { from: PolicyPeer[]; ports: PolicyPort[] }[];
    egress?: { to: PolicyPeer[]; ports?: PolicyPort[] }[];
  };
}

const tcp = (port: number): PolicyPort => ({ protocol: "TCP", port });
const DNS_PORTS: PolicyPort[] = [
  { protocol: "UDP", port: 53 },
  { protocol: "TCP", port: 53 },
];
const selector = (pod: PlannedPod): { matchLabels: Record<string, string> } => ({ matchLabels: { ...pod.labels } });

/** The public web: every address but the non-public ranges (so never the cluster's pods, Services, nodes, metadata). */
export function publicWebPeers(): PolicyPeer[] {
  return [
    { ipBlock: { cidr: "0.0.0.0/0", except: [...KUBERNETES_NON_PUBLIC_CIDRS.ipv4] } },
    { ipBlock: { cidr: "::/0", except: [...KUBERNETES_NON_PUBLIC_CIDRS.ipv6] } },
  ];
}

/**
 * The cluster's DNS, wherever it runs (its Service and pods, a node-local cache on a link-local address, a cloud's
 * resolver): on a private, shared or link-local address, port 53 alone; never a public one (a channel out).
 */
const DNS_PEERS: PolicyPeer[] = [
  "10.0.0.0/8",
  "100.64.0.0/10",
  "169.254.0.0/16",
  "172.16.0.0/12",
  "192.168.0.0/16",
  "fc00::/7",
  "fe80::/10",
].map((cidr) => ({ ipBlock: { cidr } }));

/** One arrow of the topology: `from` may open connections to `to` on `ports`. */
interface Arrow {
  name: string;
  from: PlannedPod;
  to: PlannedPod;
  ports: number[];
}

/**
 * The namespace's NetworkPolicies: a default deny of every ingress and egress of every pod, then, for each arrow
 * of the topology (docs/design.md "Topology"), an egress policy on its source and an ingress policy on its
 * destination (a policy selects the pods it applies to, so an arrow between two pods takes one on each end), and
 * the pods that reach the public web: live site servers, and the proxies of computers that reach public hosts,
 * each with DNS. Nothing else: no pod reaches the API server, a node or the metadata address, and no pod but the
 * ones named here reaches outside the namespace.
 */
export function kubernetesNetworkPolicies(
  plan: Pick<Plan, "stack" | "capture" | "websites" | "computers">,
): PlannedNetworkPolicy[] {
  const pods = kubernetesPods(plan);
  const byName = new Map(pods.map((p) => [p.name, p]));
  const pod = (name: string) => {
    const found = byName.get(name);
    if (found === undefined) throw new Error(`no pod ${name} in the plan`);
    return found;
  };
  const gateway = pod(kubernetesNames.gateway);
  const arrows: Arrow[] = [];
  for (const site of pods.filter((p) => p.site !== undefined)) {
    arrows.push({ name: `gateway-to-${site.name}`, from: gateway, to: site, ports: site.ports.map((p) => p.port) });
    if (site.siteRole === "frontend") {
      const server = pod(kubernetesNames.site(site.site ?? "", "server"));
      arrows.push({ name: `${site.name}-to-${server.name}`, from: site, to: server, ports: [server.ports[0].port] });
    }
  }
  for (const c of plan.computers) {
    const proxy = pod(kubernetesNames.proxy(c.name));
    const browser = pod(kubernetesNames.browser(c.name));
    arrows.push(
      { name: `gateway-to-${proxy.name}`, from: gateway, to: proxy, ports: [SITE_PROXY_CONTROL_PORT] },
      { name: `${proxy.name}-to-gateway`, from: proxy, to: gateway, ports: [GATEWAY_BROWSE_PORT] },
      { name: `${browser.name}-to-${proxy.name}`, from: browser, to: proxy, ports: [SITE_PROXY_PORT] },
      { name: `${proxy.name}-to-${browser.name}`, from: proxy, to: browser, ports: [CDP_PORT] },
    );
  }
  const policies: PlannedNetworkPolicy[] = [
    { name: "default-deny", spec: { podSelector: {}, policyTypes: ["Ingress", "Egress"] } },
  ];
  for (const arrow of arrows) {
    const ports = arrow.ports.map(tcp);
    policies.push(
      {
        name: `${arrow.name}-egress`,
        spec: {
          podSelector: selector(arrow.from),
          policyTypes: ["Egress"],
          egress: [{ to: [{ podSelector: selector(arrow.to) }], ports }],
        },
      },
      {
        name: `${arrow.name}-ingress`,
        spec: {
          podSelector: selector(arrow.to),
          policyTypes: ["Ingress"],
          ingress: [{ from: [{ podSelector: selector(arrow.from) }], ports }],
        },
      },
    );
  }
  for (const site of plan.websites.filter((w) => w.serverOnEgress)) {
    policies.push(
      webEgress(
        `${pod(kubernetesNames.site(site.name, "server")).name}-to-web`,
        pod(kubernetesNames.site(site.name, "server")),
        undefined,
      ),
    );
  }
  for (const c of plan.computers.filter((c) => c.reachesPublicHosts)) {
    // An allowlist reaches named hosts, which a policy cannot name: its proxy (which resolves and judges each name)
    // gets the web ports alone; allow-all gets every port, as on Docker.
    const ports = c.reaching === "allow-all" ? undefined : [tcp(80), tcp(443)];
    policies.push(webEgress(`${kubernetesNames.proxy(c.name)}-to-web`, pod(kubernetesNames.proxy(c.name)), ports));
  }
  return policies;
}

function webEgress(name: string, from: PlannedPod, ports: PolicyPort[] | undefined): PlannedNetworkPolicy {
  return {
    name,
    spec: {
      podSelector: selector(from),
      policyTypes: ["Egress"],
      egress: [
        { to: publicWebPeers(), ...(ports ? { ports } : {}) },
        { to: DNS_PEERS, ports: DNS_PORTS },
      ],
    },
  };
}

// --- what runs in the pods -----------------------------------------------------------------------------------

export function plannedKubernetes(stack: string, k: KubernetesConfig | undefined): PlannedKubernetes {
  const config = k ?? { nodeSelector: {}, tolerations: [], placement: {} };
  return {
    namespace: stack,
    ...(config.kubeconfig !== undefined ? { kubeconfig: config.kubeconfig } : {}),
    ...(config.context !== undefined ? { context: config.context } : {}),
    ...(config.imageRegistry !== undefined ? { imageRegistry: config.imageRegistry } : {}),
    imagePullPolicy: config.imagePullPolicy ?? defaultPullPolicy(config),
    ...(config.runtimeClassName !== undefined ? { runtimeClassName: config.runtimeClassName } : {}),
    placement: {
      computers: groupPlacement(config, "computers"),
      sites: groupPlacement(config, "sites"),
      gateway: groupPlacement(config, "gateway"),
    },
  };
}

/** A project image's reference on the cluster: under the registry when one is configured. */
export function kubernetesImage(k: Pick<PlannedKubernetes, "imageRegistry">, imageName: string): string {
  return k.imageRegistry === undefined ? imageName : `${k.imageRegistry.replace(/\/+$/, "")}/${imageName}`;
}

/** The capture container is started once its first file is open: the site container starts after that. */
export function captureStartedCommand(filePrefix: string): string[] {
  return ["sh", "-c", `ls ${CAPTURES_DIR}/${filePrefix}[0-9]* >/dev/null 2>&1`];
}

/** The gateway's readiness: `/healthz` on its loopback listener answers 200 (sites ready, every capture writing). */
export function gatewayReadyCommand(port: number): string[] {
  const request = `GET /healthz HTTP/1.0\\r\\nHost: 127.0.0.1\\r\\n\\r\\n`;
  const script = [
    `exec 3<>/dev/tcp/127.0.0.1/${port}`,
    `printf '${request}' >&3`,
    "read -r status <&3",
    `[[ "$status" == "HTTP/1."?" 200 "* ]]`,
  ].join(" && ");
  return ["bash", "-c", script];
}

/**
 * What the browser pod's init container runs: it fetches the env CA's certificate from its site proxy (which
 * serves it, public as it is, at SITE_PROXY_CA_PATH on its forward port) into the folder the launcher reads,
 * retrying until the proxy answers. The proxy and the browser are pods of their own, so no volume is shared.
 */
export function fetchCaCommand(caFile: string, proxyUrl: string, caPath: string): string[] {
  const script = [
    "const fs = require('fs');",
    `const url = ${JSON.stringify(proxyUrl.replace(/\/+$/, "") + caPath)};`,
    "(async () => { for (let i = 0; ; i++) { try {",
    "  const r = await fetch(url); const pem = await r.text();",
    "  if (r.ok && pem.includes('BEGIN CERTIFICATE')) {",
    `    fs.writeFileSync(${JSON.stringify(caFile)} + '.tmp', pem); fs.renameSync(${JSON.stringify(caFile)} + '.tmp', ${JSON.stringify(caFile)}); return; }`,
    "  console.error('the site proxy answered ' + r.status + '; retrying');",
    "} catch (e) { if (i % 10 === 0) console.error('waiting for the site proxy: ' + e.message); }",
    "await new Promise((res) => setTimeout(res, 500)); } })();",
  ].join("\n");
  return ["node", "-e", script];
}
