// Policy 1: only capture sidecars hold NET_RAW or NET_ADMIN; every other container drops NET_RAW
// (Docker grants it by default); no container is privileged or shares the host's network or PID namespace.
// The same promise on a cluster, for every Pod: no service account token, no host namespace or host path, and
// every container (init containers included) drops ALL, cannot escalate, is not privileged, adds nothing but
// NET_BIND_SERVICE (a website pod's `capture` sidecar NET_RAW and NET_ADMIN instead), and the project's own
// containers keep a read-only root.
import { LABELS, POD_CONTAINERS, ROLES } from "../contract";
import {
  asArray,
  asRecord,
  asString,
  input,
  isProjectImage,
  knownInput,
  podContainersOf,
  podRoleOf,
  podSpecOf,
  roleOf,
  TYPES,
  type PodContainer,
  type PolicyResource,
} from "../model";
import type { ResourceRule } from "../rule";

const RAW_SOCKET_CAPABILITIES = ["NET_RAW", "NET_ADMIN"];
const KNOWN_ROLES: string[] = Object.values(ROLES);
/** The roles a pod may have: a capture is a sidecar of a website pod, never a pod of its own. */
const POD_ROLES: string[] = KNOWN_ROLES.filter((r) => r !== ROLES.capture);
/** The one capability a container of a pod may add (a site image may bind a port below 1024). */
const POD_ALLOWED_ADD = "NET_BIND_SERVICE";
/**
 * What a website pod's capture may add: the raw-socket pair, and SETGID (`tcpdump -Z root` sets its groups once
 * the capture is open, and exits without it).
 */
const POD_CAPTURE_ADDS = [...RAW_SOCKET_CAPABILITIES, "SETGID"];

/** `cap_net_raw`, `CAP_NET_RAW` and `NET_RAW` are one capability to Docker and to the kubelet. */
function capability(name: unknown): string {
  return String(name).toUpperCase().replace(/^CAP_/, "");
}

/** The raw-socket capabilities a list of added capabilities grants (ALL grants both). */
function rawSocketAdds(adds: string[]): string[] {
  return RAW_SOCKET_CAPABILITIES.filter((c) => adds.includes(c) || adds.includes("ALL"));
}

function checkContainer(container: PolicyResource): string[] {
  const problems: string[] = [];
  const role = roleOf(container);
  if (role === undefined || !KNOWN_ROLES.includes(role)) {
    problems.push(
      role === undefined
        ? `has no ${LABELS.role} label, so the pack cannot tell what it may hold; label it with one of ${KNOWN_ROLES.join(", ")}`
        : `has ${LABELS.role}="${role}", which is not one of ${KNOWN_ROLES.join(", ")}`,
    );
  }
  const caps = asRecord(input(container, "capabilities"));
  const adds = asArray(caps.adds).map(capability);
  const drops = asArray(caps.drops).map(capability);
  if (role !== ROLES.capture) {
    for (const cap of rawSocketAdds(adds)) {
      problems.push(
        `adds ${cap} but is not a capture sidecar (role ${role ?? "unknown"}); remove it from capabilities.adds`,
      );
    }
    if (!drops.includes("NET_RAW") && !drops.includes("ALL")) {
      problems.push(`keeps NET_RAW, which Docker grants by default; add "NET_RAW" to capabilities.drops`);
    }
  }
  if (input(container, "privileged") === true)
    problems.push("is privileged; remove privileged: true (capture sidecars need only NET_RAW and NET_ADMIN)");
  if (asString(knownInput(container, "networkMode")) === "host")
    problems.push("shares the host's network namespace (networkMode: host); attach it to the env's networks instead");
  if (asString(input(container, "pidMode")) === "host")
    problems.push("shares the host's PID namespace (pidMode: host); remove pidMode");
  return problems;
}

/**
 * Whether a container of a pod runs one of the project's own images, which write only to the folders their pod
 * mounts: the gateway's, a site proxy's and a replay server's pods, a capture's sidecars, and a browser's pod unless
 * the computer brings its own image.
 */
function needsReadOnlyRoot(pod: PolicyResource, container: PodContainer): boolean {
  const podRole = podRoleOf(pod);
  if (podRole === ROLES.gateway || podRole === ROLES.siteProxy || podRole === ROLES.replay) return true;
  if (container.role === ROLES.capture || container.role === POD_CONTAINERS.captureServer) return true;
  return podRole === ROLES.browser && isProjectImage(container.image, "browser");
}

function checkPodContainer(pod: PolicyResource, container: PodContainer): string[] {
  const what = `${container.kind === "main" ? "container" : `${container.kind} container`} "${container.name}"`;
  const problems: string[] = [];
  const sc = asRecord(container.spec.securityContext);
  const caps = asRecord(sc.capabilities);
  const adds = asArray(caps.add).map(capability);
  const drops = asArray(caps.drop).map(capability);
  if (sc.privileged === true)
    problems.push(
      `${what} is privileged; remove securityContext.privileged (a capture needs only NET_RAW and NET_ADMIN)`,
    );
  if (sc.allowPrivilegeEscalation !== false)
    problems.push(
      `${what} may gain privileges (no-new-privileges is off); set securityContext.allowPrivilegeEscalation: false`,
    );
  if (!drops.includes("ALL"))
    problems.push(`${what} keeps the runtime's default capabilities; set securityContext.capabilities.drop: ["ALL"]`);
  if (container.role === ROLES.capture) {
    for (const cap of adds.filter((c) => !POD_CAPTURE_ADDS.includes(c)))
      problems.push(`${what} (the capture) adds ${cap}; a capture adds ${POD_CAPTURE_ADDS.join(", ")} alone`);
  } else {
    for (const cap of rawSocketAdds(adds))
      problems.push(
        `${what} adds ${cap} but is not a capture sidecar (pod role ${podRoleOf(pod) ?? "unknown"}); only a website pod's "${POD_CONTAINERS.capture}" init container may, so remove it from securityContext.capabilities.add`,
      );
    for (const cap of adds.filter((c) => c !== POD_ALLOWED_ADD && !RAW_SOCKET_CAPABILITIES.includes(c) && c !== "ALL"))
      problems.push(`${what} adds ${cap}; a container adds ${POD_ALLOWED_ADD} at most, so remove it`);
    if (adds.includes("ALL"))
      problems.push(`${what} adds ALL capabilities; a container adds ${POD_ALLOWED_ADD} at most, so remove it`);
  }
  if (needsReadOnlyRoot(pod, container) && sc.readOnlyRootFilesystem !== true)
    problems.push(
      `${what} runs a project image with a writable root; set securityContext.readOnlyRootFilesystem: true (it writes only to the volumes its pod mounts)`,
    );
  return problems;
}

function checkPod(pod: PolicyResource): string[] {
  const problems: string[] = [];
  const role = podRoleOf(pod);
  if (role === undefined || !POD_ROLES.includes(role)) {
    problems.push(
      role === undefined
        ? `has no ${LABELS.role} label, so the pack cannot tell what it may hold; label it with one of ${POD_ROLES.join(", ")}`
        : `has ${LABELS.role}="${role}", which is not one of ${POD_ROLES.join(", ")}`,
    );
  }
  const spec = podSpecOf(pod);
  if (spec.automountServiceAccountToken !== false)
    problems.push(
      "mounts a service account token (a key to the cluster's API for whatever runs in it); set spec.automountServiceAccountToken: false",
    );
  for (const [key, what] of [
    ["hostNetwork", "network"],
    ["hostPID", "PID"],
    ["hostIPC", "IPC"],
  ])
    if (spec[key] === true) problems.push(`shares the node's ${what} namespace (${key}: true); remove ${key}`);
  for (const volume of asArray(spec.volumes).map(asRecord))
    if (volume.hostPath !== undefined)
      problems.push(
        `mounts the node's ${String(asRecord(volume.hostPath).path ?? "filesystem")} (hostPath volume "${String(volume.name ?? "")}"); use an emptyDir instead`,
      );
  for (const container of podContainersOf(pod)) problems.push(...checkPodContainer(pod, container));
  return problems;
}

export const containerPrivileges: ResourceRule = {
  kind: "resource",
  name: "container-privileges",
  description:
    "Only capture sidecars may hold NET_RAW or NET_ADMIN; every other container must drop NET_RAW; no container may be privileged or use the host's network or PID namespace. " +
    "On a cluster: no pod may mount a service account token, use the node's network, PID or IPC namespace or a hostPath volume; every container (init containers included) must drop ALL capabilities, disallow privilege escalation, not be privileged, and add nothing but NET_BIND_SERVICE (a website pod's capture sidecar NET_RAW, NET_ADMIN and SETGID alone); the project's own containers must have a read-only root. " +
    `To comply: label every container and pod with ${LABELS.role}, add NET_RAW/NET_ADMIN only to role "capture" (on a cluster: a website pod's init container "${POD_CONTAINERS.capture}"), put NET_RAW in capabilities.drops of every other container, and never set privileged, networkMode: host or pidMode: host; ` +
    `give every pod automountServiceAccountToken: false and no hostNetwork, hostPID, hostIPC or hostPath, and every container of it securityContext { allowPrivilegeEscalation: false, privileged: false, capabilities: { drop: ["ALL"] } }, with readOnlyRootFilesystem: true on the gateway, site proxy, replay server, capture and project browser containers.`,
  appliesTo: [TYPES.container, TYPES.pod],
  check(resource) {
    return resource.type === TYPES.pod ? checkPod(resource) : checkContainer(resource);
  },
};
