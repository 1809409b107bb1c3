// Policy 6: with capture on, every website container has exactly one capture sidecar (as many sidecars
// as website containers); with capture off there is none.
import { LABELS, OUTPUTS, ROLES } from "../contract";
import {
  capturesVolumes,
  containersOf,
  describe,
  labelsOf,
  roleOf,
  type PolicyResource,
  type PolicyStack,
} from "../model";
import type { StackFinding, StackRule } from "../rule";
import { reveal } from "../secrets";

const WEBSITE_ROLES: string[] = [ROLES.server, ROLES.frontend];

/** Whether capture is on: the captureTraffic output where known, else whether a captures volume exists. */
function captureOn(stack: PolicyStack): boolean {
  const output = reveal(stack.outputs?.[OUTPUTS.captureTraffic]);
  if (typeof output === "boolean") return output;
  return capturesVolumes(stack).length > 0;
}

/** `server` / `frontend`: the part of a website a container is. */
function websitePart(container: PolicyResource): string {
  return roleOf(container) === ROLES.frontend ? "frontend" : "server";
}

export const captureSidecarPerWebsite: StackRule = {
  kind: "stack",
  name: "capture-sidecar-per-website",
  description:
    "With captureTraffic on, the stack must run exactly one capture sidecar per website container; with it off, none. " +
    `To comply: create one sidecar (${LABELS.role}=${ROLES.capture}, ${LABELS.captureSite}=<site>, ${LABELS.captureRole}=server|frontend) for each website server and frontend (${LABELS.role}=server|frontend, ${LABELS.site}=<site>) when capture is on, and none when it is off.`,
  check(stack) {
    const containers = containersOf(stack);
    const websites = containers.filter((c) => WEBSITE_ROLES.includes(roleOf(c) ?? ""));
    const sidecars = containers.filter((c) => roleOf(c) === ROLES.capture);
    const findings: StackFinding[] = [];
    if (!captureOn(stack)) {
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
  },
};
