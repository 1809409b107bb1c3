// Policy 2: the captures volume is mounted read-write only by capture sidecars, read-only by the gateway,
// and by no other container. A stack rule: it needs the volume to know which mounts are the captures volume.
import { CAPTURES_VOLUME_ROLE, LABELS, ROLES } from "../contract";
import { capturesVolumes, containersOf, describe, dockerName, mountsOf, roleOf } from "../model";
import type { StackFinding, StackRule } from "../rule";

export const capturesVolumeAccess: StackRule = {
  kind: "stack",
  name: "captures-volume-access",
  description:
    "The captures volume may be mounted read-write only by capture sidecars, read-only by the gateway, and by no other container. " +
    `To comply: mount the captures volume (<stack>-captures, labelled ${LABELS.stack}=<stack>, or labelled ${LABELS.role}=${CAPTURES_VOLUME_ROLE}) readOnly: true in the gateway, and do not mount it (or inherit it with volumes.fromContainer) in any container but the capture sidecars.`,
  check(stack) {
    const names = new Set(capturesVolumes(stack).map(dockerName));
    const findings: StackFinding[] = [];
    for (const container of containersOf(stack)) {
      const role = roleOf(container);
      for (const mount of mountsOf(container)) {
        if (mount.kind === "from-container") {
          if (role !== ROLES.capture && names.size > 0) {
            findings.push({
              resource: container,
              message: `${describe(container)} inherits the volumes of container "${mount.fromContainer}", which can include the captures volume; mount only the volumes it needs`,
            });
          }
          continue;
        }
        if (mount.kind !== "volume" || mount.source === undefined || !names.has(mount.source)) continue;
        if (role === ROLES.capture) continue;
        if (role === ROLES.gateway) {
          if (!mount.readOnly) {
            findings.push({
              resource: container,
              message: `the gateway ${describe(container)} mounts the captures volume "${mount.source}" read-write; set readOnly: true`,
            });
          }
          continue;
        }
        findings.push({
          resource: container,
          message: `${describe(container)} (role ${role ?? "unknown"}) mounts the captures volume "${mount.source}"; only capture sidecars and the gateway may mount it, so remove the mount`,
        });
      }
    }
    return findings;
  },
};
