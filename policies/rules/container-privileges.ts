// Policy 1: only capture sidecars hold NET_RAW or NET_ADMIN; every other container drops NET_RAW
// (Docker grants it by default); no container is privileged or shares the host's network or PID namespace.
import { LABELS, ROLES } from "../contract";
import { asArray, asRecord, asString, input, knownInput, roleOf, TYPES } from "../model";
import type { ResourceRule } from "../rule";

const RAW_SOCKET_CAPABILITIES = ["NET_RAW", "NET_ADMIN"];
const KNOWN_ROLES: string[] = Object.values(ROLES);

/** `cap_net_raw`, `CAP_NET_RAW` and `NET_RAW` are one capability to Docker. */
function capability(name: unknown): string {
  return String(name).toUpperCase().replace(/^CAP_/, "");
}

export const containerPrivileges: ResourceRule = {
  kind: "resource",
  name: "container-privileges",
  description:
    "Only capture sidecars may hold NET_RAW or NET_ADMIN; every other container must drop NET_RAW; no container may be privileged or use the host's network or PID namespace. " +
    `To comply: label every container with ${LABELS.role}, add NET_RAW/NET_ADMIN only to role "capture", put NET_RAW in capabilities.drops of every other container, and never set privileged, networkMode: host or pidMode: host.`,
  appliesTo: [TYPES.container],
  check(container) {
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
      for (const cap of RAW_SOCKET_CAPABILITIES.filter((c) => adds.includes(c) || adds.includes("ALL"))) {
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
  },
};
