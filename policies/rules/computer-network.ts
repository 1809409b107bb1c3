// Policy 3: a computer's browser container is attached to its own internal network only, and its site
// proxy is the only other member, so the proxy is the computer's only way out.
// A stack rule: it needs the network resources and every container on them.
import { LABELS, ROLES } from "../contract";
import {
  asString,
  containersOf,
  describe,
  input,
  isBuiltinNetworkMode,
  knownInput,
  labelsOf,
  networkRefs,
  networksOf,
  ofType,
  roleOf,
  sameEngine,
  TYPES,
  type PolicyResource,
} from "../model";
import type { StackFinding, StackRule } from "../rule";

export const computerNetworkIsolation: StackRule = {
  kind: "stack",
  name: "computer-network-isolation",
  description:
    "A computer's browser container must be attached to exactly one network, an internal one of its own, whose only other member is that computer's site proxy. " +
    "To comply: give each computer a docker.Network with internal: true, attach the browser to it alone (networksAdvanced, no bridge or host network mode), " +
    `and attach no container other than the computer's site proxy (${LABELS.role}=${ROLES.siteProxy}, same ${LABELS.computer}) to it.`,
  check(stack) {
    const findings: StackFinding[] = [];
    const networks = ofType(stack, TYPES.network);
    const containers = containersOf(stack);
    /** The docker.Network a container's attachment names, on the container's own engine. */
    const networkOf = (container: PolicyResource, ref: string) =>
      networks.find((n) => sameEngine(n, container) && networkRefs(n).includes(ref));
    const membersOf = (network: PolicyResource): PolicyResource[] =>
      containers.filter(
        (c) => sameEngine(c, network) && networksOf(c).some((ref) => networkRefs(network).includes(ref)),
      );

    for (const browser of containers.filter((c) => roleOf(c) === ROLES.browser)) {
      const computer = labelsOf(browser)[LABELS.computer];
      const mode = asString(knownInput(browser, "networkMode"));
      if (mode !== undefined && mode !== "" && isBuiltinNetworkMode(mode)) {
        findings.push({
          resource: browser,
          message: `the browser ${describe(browser)} uses networkMode "${mode}"; attach it only to its computer's internal network`,
        });
      }
      const attached = networksOf(browser);
      if (attached.length !== 1) {
        findings.push({
          resource: browser,
          message:
            attached.length === 0
              ? `the browser ${describe(browser)} is attached to no network of its own; attach it to its computer's internal network`
              : `the browser ${describe(browser)} is attached to ${attached.length} networks (${attached.join(", ")}); attach it to its computer's internal network only`,
        });
      }
      for (const ref of attached) {
        const network = networkOf(browser, ref);
        if (network === undefined) {
          findings.push({
            resource: browser,
            message: `the browser ${describe(browser)} is attached to network "${ref}", which this stack does not define as a docker.Network; attach it to its computer's own internal network`,
          });
          continue;
        }
        if (input(network, "internal") !== true) {
          findings.push({
            resource: network,
            message: `network ${describe(network)} holds the browser ${describe(browser)} but is not internal; set internal: true`,
          });
        }
        const others = membersOf(network).filter((c) => c !== browser);
        const proxies = others.filter(
          (c) => roleOf(c) === ROLES.siteProxy && (computer === undefined || labelsOf(c)[LABELS.computer] === computer),
        );
        for (const intruder of others.filter((c) => !proxies.includes(c))) {
          findings.push({
            resource: intruder,
            message: `${describe(intruder)} (role ${roleOf(intruder) ?? "unknown"}) is attached to network ${describe(network)} of the browser ${describe(browser)}; only that computer's site proxy may be, so detach it`,
          });
        }
        if (proxies.length !== 1) {
          findings.push({
            resource: network,
            message:
              proxies.length === 0
                ? `network ${describe(network)} of the browser ${describe(browser)} has no site proxy; attach the computer's site proxy to it`
                : `network ${describe(network)} of the browser ${describe(browser)} has ${proxies.length} site proxies; a computer has exactly one`,
          });
        }
      }
    }
    return findings;
  },
};
