// The walls of a kubernetes env are its NetworkPolicies (src/plan/targets/kubernetes.ts): a default deny of every pod's
// ingress and egress in the env's namespace, then one allowance per arrow of the topology. This policy holds every
// NetworkPolicy of the stack to that: ingress comes only from pods of the namespace; egress to an address block
// leaves out every non-public range (the cluster's pods, Services and nodes, private networks, the metadata
// address) unless it is DNS alone; only live site servers and site proxies reach the web; a browser reaches its own
// proxy and nothing else; the gateway reaches no address block at all, DNS included.
import { LABELS, OUTPUTS, ROLES } from "../contract";
import { KUBERNETES_NON_PUBLIC_CIDRS } from "../../src/plan/targets/kubernetes";
import { ENV_VARS } from "../../src/protocol/env";
import {
  asArray,
  asRecord,
  asString,
  describe,
  manifest,
  metadataOf,
  ofType,
  podContainersOf,
  podRoleOf,
  selectedPods,
  revealKnown,
  TYPES,
  type PolicyResource,
  type PolicyStack,
} from "../model";
import type { StackFinding, StackRule } from "../rule";

// ---- address blocks -------------------------------------------------------------------------------------------

interface Cidr {
  family: 4 | 6;
  address: bigint;
  prefix: number;
}

function parseIpv4(text: string): bigint | undefined {
  const parts = text.split(".");
  if (parts.length !== 4 || parts.some((p) => !/^\d{1,3}$/.test(p) || Number(p) > 255)) return undefined;
  return parts.reduce((acc, p) => (acc << 8n) | BigInt(Number(p)), 0n);
}

function parseIpv6(text: string): bigint | undefined {
  let groups: string[];
  const tail = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  let body = text;
  const extra: string[] = [];
  if (tail) {
    const v4 = parseIpv4(tail[1]);
    if (v4 === undefined) return undefined;
    extra.push(((v4 >> 16n) & 0xffffn).toString(16), (v4 & 0xffffn).toString(16));
    body = text.slice(0, -tail[1].length).replace(/:$/, "") || ":";
    if (body === ":") body = "::";
  }
  if (body.includes("::")) {
    const [head, rest] = body.split("::");
    const h = head === "" ? [] : head.split(":");
    const r = rest === "" ? [] : rest.split(":");
    const missing = 8 - h.length - r.length - extra.length;
    if (missing < 0) return undefined;
    groups = [...h, ...Array<string>(missing).fill("0"), ...r, ...extra];
  } else groups = [...body.split(":"), ...extra];
  if (groups.length !== 8 || groups.some((g) => !/^[0-9a-fA-F]{1,4}$/.test(g))) return undefined;
  return groups.reduce((acc, g) => (acc << 16n) | BigInt(parseInt(g, 16)), 0n);
}

function parseCidr(text: string): Cidr | undefined {
  const [addr, len] = text.trim().split("/");
  const family = addr.includes(":") ? 6 : 4;
  const address = family === 4 ? parseIpv4(addr) : parseIpv6(addr);
  const bits = family === 4 ? 32 : 128;
  const prefix = len === undefined ? bits : Number(len);
  if (address === undefined || !Number.isInteger(prefix) || prefix < 0 || prefix > bits) return undefined;
  return { family, address, prefix };
}

/** Whether block `outer` holds every address of block `inner`. */
function contains(outer: Cidr, inner: Cidr): boolean {
  if (outer.family !== inner.family || outer.prefix > inner.prefix) return false;
  const shift = BigInt((outer.family === 4 ? 32 : 128) - outer.prefix);
  return outer.address >> shift === inner.address >> shift;
}

const NON_PUBLIC = [...KUBERNETES_NON_PUBLIC_CIDRS.ipv4, ...KUBERNETES_NON_PUBLIC_CIDRS.ipv6].map((text) => ({
  text,
  cidr: parseCidr(text)!,
}));

/** The non-public ranges an ipBlock lets through: each one inside its cidr that no `except` entry covers. */
function nonPublicLetThrough(ipBlock: Record<string, unknown>): string[] {
  const cidrText = asString(ipBlock.cidr);
  const cidr = cidrText === undefined ? undefined : parseCidr(cidrText);
  if (cidr === undefined) return [`${cidrText ?? "(no cidr)"} (not an address block the pack can read)`];
  const excepts = asArray(ipBlock.except)
    .map((e) => (typeof e === "string" ? parseCidr(e) : undefined))
    .filter((e): e is Cidr => e !== undefined);
  const through: string[] = [];
  for (const range of NON_PUBLIC) {
    // Two blocks are nested or apart: a block inside a non-public range is non-public as a whole.
    if (contains(range.cidr, cidr)) through.push(range.text);
    else if (contains(cidr, range.cidr) && !excepts.some((e) => contains(e, range.cidr))) through.push(range.text);
  }
  return through;
}

// ---- peers and ports ------------------------------------------------------------------------------------------

/** An egress rule with no peers allows every destination: as if it named these. */
const EVERYWHERE = [{ ipBlock: { cidr: "0.0.0.0/0" } }, { ipBlock: { cidr: "::/0" } }];

function egressPeersOf(rule: Record<string, unknown>): Record<string, unknown>[] {
  const peers = asArray(rule.to).map(asRecord);
  return peers.length === 0 ? EVERYWHERE : peers;
}

/** Whether a rule allows DNS alone: it lists ports, each of them 53 (no range past it). */
function dnsOnly(rule: Record<string, unknown>): boolean {
  const ports = asArray(rule.ports).map(asRecord);
  return (
    ports.length > 0 &&
    ports.every((p) => Number(p.port) === 53 && (p.endPort === undefined || Number(p.endPort) === 53))
  );
}

/** An ingress peer that is not a pod of the policy's namespace: an address block, or any peer naming namespaces. */
function fromOutside(peer: Record<string, unknown>): boolean {
  return peer.ipBlock !== undefined || peer.namespaceSelector !== undefined || peer.podSelector === undefined;
}

function peerText(peer: Record<string, unknown>): string {
  return JSON.stringify(peer);
}

// ---- which servers are live -----------------------------------------------------------------------------------

/**
 * The env's live sites: from the stack's `websites` output where known, else from the gateway's config (its
 * `sites.<name>.live`); undefined when neither is known, and then any server may be a live one.
 */
function liveSites(stack: PolicyStack, pods: PolicyResource[]): Set<string> | undefined {
  const websites = asRecord(revealKnown(stack.outputs?.[OUTPUTS.websites]));
  if (Object.keys(websites).length > 0)
    return new Set(
      Object.entries(websites)
        .filter(([, w]) => asRecord(w).live === true)
        .map(([name]) => name),
    );
  for (const gateway of pods.filter((p) => podRoleOf(p) === ROLES.gateway)) {
    for (const container of podContainersOf(gateway)) {
      const value = asArray(container.spec.env)
        .map(asRecord)
        .find((e) => e.name === ENV_VARS.gatewayConfig)?.value;
      if (typeof value !== "string") continue;
      try {
        const sites = asRecord(asRecord(JSON.parse(value)).sites);
        return new Set(
          Object.entries(sites)
            .filter(([, s]) => asRecord(s).live === true)
            .map(([name]) => name),
        );
      } catch {
        // not known (a preview) or not JSON: fall through
      }
    }
  }
  return undefined;
}

// ---- the rule -------------------------------------------------------------------------------------------------

/** A default deny: every pod of the namespace, both directions, no rule letting anything through. */
function isDefaultDeny(policy: PolicyResource): boolean {
  const spec = asRecord(manifest(policy, "spec"));
  const selector = asRecord(spec.podSelector);
  const types = asArray(spec.policyTypes);
  return (
    Object.keys(asRecord(selector.matchLabels)).length === 0 &&
    asArray(selector.matchExpressions).length === 0 &&
    types.includes("Ingress") &&
    types.includes("Egress") &&
    asArray(spec.ingress).length === 0 &&
    asArray(spec.egress).length === 0
  );
}

/** The namespaces of the stack's kubernetes env: its Namespace resources', and those its pods are created in. */
function envNamespaces(stack: PolicyStack, pods: PolicyResource[]): Map<string, PolicyResource | undefined> {
  const namespaces = new Map<string, PolicyResource | undefined>();
  for (const ns of ofType(stack, TYPES.namespace)) {
    const name = metadataOf(ns).name;
    if (name !== undefined) namespaces.set(name, ns);
  }
  for (const pod of pods) {
    const name = metadataOf(pod).namespace;
    if (name !== undefined && !namespaces.has(name)) namespaces.set(name, undefined);
  }
  return namespaces;
}

const podName = (pod: PolicyResource) => describe(pod);

export const kubernetesNetworkWalls: StackRule = {
  kind: "stack",
  name: "kubernetes-network-walls",
  description:
    "On a cluster the env's walls are NetworkPolicies: its namespace must have a default deny (podSelector {}, policyTypes Ingress and Egress, no rules); " +
    "ingress may come only from pods of the namespace (a podSelector; no ipBlock, no namespaceSelector, no rule without peers); " +
    "egress to an ipBlock must except every non-public range (the cluster's, private networks, link-local metadata) unless it allows port 53 alone; " +
    "only live site servers and site proxies may reach ipBlocks beyond DNS; a browser pod may reach its own computer's proxy pod and nothing else; the gateway pod no ipBlock at all. " +
    `To comply: keep the NetworkPolicies src/plan/targets/kubernetes.ts plans (kubernetesNetworkPolicies): a default-deny policy in the namespace, one podSelector policy per arrow of the topology (select by ${LABELS.role}, ${LABELS.site}, ${LABELS.computer}), and the public web as publicWebPeers() (KUBERNETES_NON_PUBLIC_CIDRS excepted) for live servers and reaching proxies alone.`,
  check(stack) {
    const findings: StackFinding[] = [];
    const pods = ofType(stack, TYPES.pod);
    const policies = ofType(stack, TYPES.networkPolicy);

    for (const [namespace, resource] of envNamespaces(stack, pods)) {
      const inNamespace = policies.filter((p) => {
        const ns = metadataOf(p).namespace;
        return ns === undefined || ns === namespace;
      });
      if (!inNamespace.some(isDefaultDeny))
        findings.push({
          resource,
          message: `namespace "${namespace}" has no default-deny NetworkPolicy, so every pod the other policies do not select reaches and is reached by anything; add one with podSelector: {}, policyTypes: [Ingress, Egress] and no ingress or egress rules`,
        });
    }

    const live = liveSites(stack, pods);
    const mayReachWeb = (pod: PolicyResource) => {
      const role = podRoleOf(pod);
      if (role === ROLES.siteProxy) return true;
      if (role !== ROLES.server) return false;
      const site = metadataOf(pod).labels[LABELS.site];
      return live === undefined || (site !== undefined && live.has(site));
    };

    for (const policy of policies) {
      const spec = asRecord(manifest(policy, "spec"));
      const namespace = metadataOf(policy).namespace;
      const selected = selectedPods(pods, spec.podSelector, namespace);
      const types = asArray(spec.policyTypes);
      const at = (message: string) => findings.push({ resource: policy, message: `${describe(policy)} ${message}` });

      // Without policyTypes a policy is an ingress policy, and an egress one too when it has egress rules.
      const ingressApplies = types.length === 0 || types.includes("Ingress");
      asArray(ingressApplies ? spec.ingress : []).forEach((entry, i) => {
        const from = asArray(asRecord(entry).from).map(asRecord);
        const outside =
          from.length === 0 ? ["every source (it lists no peers)"] : from.filter(fromOutside).map(peerText);
        for (const peer of outside)
          at(
            `ingress[${i}] admits ${peer}, from outside the namespace's pods; admit only a podSelector of the namespace's pods`,
          );
      });

      const egressApplies = types.length === 0 ? asArray(spec.egress).length > 0 : types.includes("Egress");
      if (!egressApplies) continue;
      asArray(spec.egress).forEach((entry, i) => {
        const rule = asRecord(entry);
        const dns = dnsOnly(rule);
        const where = `egress[${i}]`;
        for (const peer of egressPeersOf(rule)) {
          const ipBlock = peer.ipBlock !== undefined ? asRecord(peer.ipBlock) : undefined;
          const beyond = ipBlock !== undefined || peer.namespaceSelector !== undefined;
          const shown = asArray(rule.to).length === 0 ? "every destination (it lists no peers)" : peerText(peer);
          if (beyond && !dns) {
            if (peer.namespaceSelector !== undefined)
              at(
                `${where} reaches pods of other namespaces (${shown}) beyond DNS; reach only pods of the namespace, by podSelector`,
              );
            if (ipBlock !== undefined) {
              const through = nonPublicLetThrough(ipBlock);
              if (through.length > 0)
                at(
                  `${where} reaches ${shown}, which lets through the non-public ${through.join(", ")}; except every range of KUBERNETES_NON_PUBLIC_CIDRS (or allow port 53 alone)`,
                );
              for (const pod of selected.filter((p) => !mayReachWeb(p)))
                at(
                  `${where} lets ${podName(pod)} (role ${podRoleOf(pod) ?? "unknown"}) reach ${shown}; only live site servers and site proxies reach the web, so select them alone`,
                );
            }
          }
          for (const pod of selected) {
            const role = podRoleOf(pod);
            if (role === ROLES.gateway && ipBlock !== undefined)
              at(
                `${where} lets the gateway ${podName(pod)} reach ${shown}; the gateway dials pods of the namespace alone, by podSelector`,
              );
            if (role === ROLES.browser) {
              const computer = metadataOf(pod).labels[LABELS.computer];
              if (!reachesOnlyOwnProxy(peer, pods, namespace, computer))
                at(
                  `${where} lets the browser ${podName(pod)} reach ${shown}; a browser reaches its own computer's proxy alone (podSelector ${LABELS.role}=${ROLES.siteProxy}, ${LABELS.computer}=${computer ?? "?"})`,
                );
            }
          }
        }
      });
    }
    return findings;
  },
};

/**
 * Whether an egress peer names exactly a browser's own computer's proxy: a podSelector (no namespaceSelector, no
 * ipBlock) that pins the proxy's role and computer labels, so no pod added later matches it, and selects no other
 * pod of the stack.
 */
function reachesOnlyOwnProxy(
  peer: Record<string, unknown>,
  pods: PolicyResource[],
  namespace: string | undefined,
  computer: string | undefined,
): boolean {
  if (computer === undefined || peer.podSelector === undefined) return false;
  if (peer.ipBlock !== undefined || peer.namespaceSelector !== undefined) return false;
  const selector = asRecord(peer.podSelector);
  const labels = asRecord(selector.matchLabels);
  if (labels[LABELS.role] !== ROLES.siteProxy || labels[LABELS.computer] !== computer) return false;
  return selectedPods(pods, selector, namespace).every(
    (p) => podRoleOf(p) === ROLES.siteProxy && metadataOf(p).labels[LABELS.computer] === computer,
  );
}
