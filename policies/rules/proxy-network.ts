// A computer's site proxy shares no network with a website container, another computer's containers or
// anything else: every network it is on holds only itself, its own computer's browser and the gateway. So no
// site container (a hostile image) reaches the proxy's control listener or its forward port, and the proxy (an
// allow-all computer's way out) reaches no site container and no other computer directly.
import { LABELS, ROLES } from "../contract";
import {
  containersOf,
  describe,
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

export const siteProxyIsolation: StackRule = {
  kind: "stack",
  name: "site-proxy-isolation",
  description:
    "A computer's site proxy may share a network only with its own computer's browser and with the gateway: never with a website container, a capture, " +
    "another computer's proxy or browser, or anything else. To comply: attach each site proxy to its computer's own network, a link network " +
    `holding only it and the gateway, and an egress network of its own; never to the env network or the sites' egress network (${LABELS.role}=${ROLES.siteProxy}).`,
  check(stack) {
    const findings: StackFinding[] = [];
    const networks = ofType(stack, TYPES.network);
    const containers = containersOf(stack);
    const networkOf = (container: PolicyResource, ref: string) =>
      networks.find((n) => sameEngine(n, container) && networkRefs(n).includes(ref));
    const membersOf = (network: PolicyResource): PolicyResource[] =>
      containers.filter(
        (c) => sameEngine(c, network) && networksOf(c).some((ref) => networkRefs(network).includes(ref)),
      );

    for (const proxy of containers.filter((c) => roleOf(c) === ROLES.siteProxy)) {
      const computer = labelsOf(proxy)[LABELS.computer];
      const allowed = (c: PolicyResource) =>
        c === proxy ||
        roleOf(c) === ROLES.gateway ||
        (roleOf(c) === ROLES.browser && computer !== undefined && labelsOf(c)[LABELS.computer] === computer);
      for (const ref of networksOf(proxy)) {
        const network = networkOf(proxy, ref);
        if (network === undefined) continue;
        for (const other of membersOf(network).filter((c) => !allowed(c))) {
          findings.push({
            resource: other,
            message: `${describe(other)} (role ${roleOf(other) ?? "unknown"}) shares network ${describe(network)} with the site proxy ${describe(proxy)} of computer ${computer ?? "(unlabelled)"}; a proxy's networks hold only it, its browser and the gateway, so detach one of them`,
          });
        }
      }
    }
    return findings;
  },
};
