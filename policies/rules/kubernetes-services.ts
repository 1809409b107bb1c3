// On a cluster the gateway's runner listener (GATEWAY_PORT, 8080) is on its pod's loopback, reached by a port-forward
// through the API server alone (src/plan/targets/kubernetes.ts). No Service may open a way around that: none reachable
// from outside the cluster (NodePort, LoadBalancer, externalIPs) or pointing outside it (ExternalName), and none
// carrying the runner's port.
import { GATEWAY_PORT } from "../../src/plan/topology";
import { asArray, asRecord, manifest, TYPES } from "../model";
import type { ResourceRule } from "../rule";

const OUTSIDE_TYPES = ["NodePort", "LoadBalancer", "ExternalName"];

export const kubernetesServiceExposure: ResourceRule = {
  kind: "resource",
  name: "kubernetes-service-exposure",
  description:
    `On a cluster no Service may expose the env: every Service is of type ClusterIP, with no externalIPs, and none carries the gateway's runner port (${GATEWAY_PORT}), which a port-forward alone reaches. ` +
    `To comply: declare each Service with type: ClusterIP (or no type), no externalIPs or nodePort, and the ports of its pod's services only (never ${GATEWAY_PORT}, as port or targetPort); reach the gateway's runner listener with a port-forward.`,
  appliesTo: [TYPES.service],
  check(service) {
    const problems: string[] = [];
    const spec = asRecord(manifest(service, "spec"));
    const type = spec.type === undefined ? "ClusterIP" : String(spec.type);
    if (OUTSIDE_TYPES.includes(type))
      problems.push(
        `is of type ${type}, which ${type === "ExternalName" ? "points outside the cluster" : "opens it to outside the cluster"}; make it type: ClusterIP`,
      );
    else if (type !== "ClusterIP") problems.push(`is of type ${type}; make it type: ClusterIP`);
    if (asArray(spec.externalIPs).length > 0)
      problems.push(`takes traffic at the externalIPs ${asArray(spec.externalIPs).join(", ")}; remove externalIPs`);
    for (const port of asArray(spec.ports).map(asRecord)) {
      const label = port.name === undefined ? `port ${String(port.port)}` : `port "${String(port.name)}"`;
      if (Number(port.port) === GATEWAY_PORT || Number(port.targetPort) === GATEWAY_PORT)
        problems.push(
          `${label} carries ${GATEWAY_PORT}, the gateway's runner port, which no Service may expose; remove it (the runner reaches the gateway by port-forward)`,
        );
      if (port.nodePort !== undefined)
        problems.push(`${label} asks for nodePort ${String(port.nodePort)}, a port on every node; remove it`);
    }
    return problems;
  },
};
