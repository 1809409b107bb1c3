// Policy 6: with capture on, every website container has exactly one capture sidecar (as many sidecars
// as website containers); with capture off there is none. On a cluster a website container is a website pod
// (server or frontend) and its capture a native sidecar of that pod: an init container named `capture` with
// restartPolicy Always, which starts before the site's container and records from its first packet.
import { LABELS, OUTPUTS, POD_CONTAINERS, ROLES } from "../contract";
import {
  capturesVolumes,
  containersOf,
  describe,
  isNativeSidecar,
  isWebsitePod,
  labelsOf,
  ofType,
  podContainersOf,
  podRoleOf,
  roleOf,
  TYPES,
  type PolicyResource,
  type PolicyStack,
} from "../model";
import type { StackFinding, StackRule } from "../rule";
import { reveal } from "../secrets";

const WEBSITE_ROLES: string[] = [ROLES.server, ROLES.frontend, ROLES.replay];

/** A pod's containers named `capture`, wherever in its spec they are. */
function podCaptures(pod: PolicyResource) {
  return podContainersOf(pod).filter((c) => c.name === POD_CONTAINERS.capture);
}

/**
 * Whether capture is on: the captureTraffic output where known, else whether a captures volume exists (Docker)
 * or any pod has a capture container (a cluster, where there is no captures volume).
 */
function captureOn(stack: PolicyStack): boolean {
  const output = reveal(stack.outputs?.[OUTPUTS.captureTraffic]);
  if (typeof output === "boolean") return output;
  return capturesVolumes(stack).length > 0 || ofType(stack, TYPES.pod).some((p) => podCaptures(p).length > 0);
}

/** The Kubernetes form: one native `capture` sidecar per website pod with capture on, no capture anywhere off. */
function podFindings(stack: PolicyStack, on: boolean): StackFinding[] {
  const findings: StackFinding[] = [];
  for (const pod of ofType(stack, TYPES.pod)) {
    const captures = podCaptures(pod);
    if (!on) {
      if (captures.length > 0)
        findings.push({
          resource: pod,
          message: `capture is off but pod ${describe(pod)} has a "${POD_CONTAINERS.capture}" container; remove it (or set captureTraffic: true)`,
        });
      continue;
    }
    if (!isWebsitePod(pod)) {
      if (captures.length > 0)
        findings.push({
          resource: pod,
          message: `pod ${describe(pod)} (role ${podRoleOf(pod) ?? "unknown"}) has a "${POD_CONTAINERS.capture}" container but is no website pod; captures record website pods alone, so remove it`,
        });
      continue;
    }
    const sidecars = captures.filter(isNativeSidecar);
    if (sidecars.length === 0)
      findings.push({
        resource: pod,
        message:
          captures.length === 0
            ? `website pod ${describe(pod)} has no capture sidecar; add an init container "${POD_CONTAINERS.capture}" with restartPolicy: Always recording its traffic`
            : `website pod ${describe(pod)} runs "${POD_CONTAINERS.capture}" but not as a native sidecar, so it does not record from the site's first packet; make it an init container with restartPolicy: Always`,
      });
    if (sidecars.length > 1)
      findings.push({
        resource: pod,
        message: `website pod ${describe(pod)} has ${sidecars.length} capture sidecars; keep exactly one`,
      });
  }
  return findings;
}

/** `server` / `frontend`: the part of a website a container is. */
/** A replayed site's replay server is the site's frontend, for the gateway and for its capture. */
function websitePart(container: PolicyResource): string {
  const role = roleOf(container);
  return role === ROLES.frontend || role === ROLES.replay ? "frontend" : "server";
}

export const captureSidecarPerWebsite: StackRule = {
  kind: "stack",
  name: "capture-sidecar-per-website",
  description:
    "With captureTraffic on, the stack must run exactly one capture sidecar per website container (on a cluster: per website pod); with it off, none. " +
    `To comply: create one sidecar (${LABELS.role}=${ROLES.capture}, ${LABELS.captureSite}=<site>, ${LABELS.captureRole}=server|frontend) for each website server and frontend (${LABELS.role}=server|frontend, ${LABELS.site}=<site>) when capture is on, and none when it is off; ` +
    `on a cluster, give each website pod (${LABELS.role}=server|frontend) one init container "${POD_CONTAINERS.capture}" with restartPolicy: Always when capture is on, and no pod a "${POD_CONTAINERS.capture}" container when it is off.`,
  check(stack) {
    const on = captureOn(stack);
    return [...dockerFindings(stack, on), ...podFindings(stack, on)];
  },
};

function dockerFindings(stack: PolicyStack, on: boolean): StackFinding[] {
  const containers = containersOf(stack);
  const websites = containers.filter((c) => WEBSITE_ROLES.includes(roleOf(c) ?? ""));
  const sidecars = containers.filter((c) => roleOf(c) === ROLES.capture);
  const findings: StackFinding[] = [];
  if (!on) {
    for (const sidecar of sidecars) {
      findings.push({
        resource: sidecar,
        message: `capture is off but capture sidecar ${describe(sidecar)} is deployed; remove it (or set captureTraffic: true)`,
      });
    }
    return findings;
  }
  if (sidecars.length !== websites.length) {
    findings.push({
      message: `capture is on and the stack has ${websites.length} website containers but ${sidecars.length} capture sidecars; each website container needs exactly one`,
    });
  }
  // Match sidecars to website containers by their labels, to name the one that lacks (or doubles) a sidecar.
  const key = (site: string | undefined, part: string | undefined) => `${site ?? "?"}/${part ?? "?"}`;
  const sidecarKeys = sidecars.map((s) => key(labelsOf(s)[LABELS.captureSite], labelsOf(s)[LABELS.captureRole]));
  for (const website of websites) {
    const k = key(labelsOf(website)[LABELS.site], websitePart(website));
    const count = sidecarKeys.filter((s) => s === k).length;
    if (count === 0)
      findings.push({
        resource: website,
        message: `website container ${describe(website)} has no capture sidecar; add one recording its traffic`,
      });
    if (count > 1)
      findings.push({
        resource: website,
        message: `website container ${describe(website)} has ${count} capture sidecars; keep exactly one`,
      });
  }
  const websiteKeys = new Set(websites.map((w) => key(labelsOf(w)[LABELS.site], websitePart(w))));
  sidecars.forEach((sidecar, i) => {
    if (!websiteKeys.has(sidecarKeys[i])) {
      findings.push({
        resource: sidecar,
        message: `capture sidecar ${describe(sidecar)} (${LABELS.captureSite}=${labelsOf(sidecar)[LABELS.captureSite] ?? "unset"}, ${LABELS.captureRole}=${labelsOf(sidecar)[LABELS.captureRole] ?? "unset"}) records no website container of this stack; label it with the site and part it records`,
      });
    }
  });
  return findings;
}
