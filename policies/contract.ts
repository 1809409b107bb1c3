// The marks the components put on resources so the policy pack can tell what each one is.
// A container is known by its Docker labels, an AWS resource by its tags; container names are never parsed.
// The names components/ writes are in src/protocol/labels.ts; the rest of what the pack reads is here.
import { kubernetesNames } from "../src/plan/targets/kubernetes";
import { ENV_VARS } from "../src/protocol/env";

// The labels, roles and tags are the components' marks as much as the pack's: they are defined with the other wire
// contracts, and the pack reads them from there.
export { CAPTURES_VOLUME_ROLE, LABELS, ROLES, TAGS, type ContainerRole } from "../src/protocol/labels";

/** Environment variables whose value is a secret whenever they are set. */
export const SECRET_ENV = {
  /** The gateway's control token. */
  controlToken: ENV_VARS.controlToken,
  /** A website server's settings: secret when its site has secret settings. */
  websiteSettings: ENV_VARS.websiteSettings,
  /** A computer's own control token, in its site proxy's environment. */
  siteProxyToken: ENV_VARS.siteProxyToken,
  /**
   * A capture server's own token (kubernetes target: the website pod's `capture-server` sidecar). Spelled out, not
   * imported: src/protocol/gateway-config.ts does not compile under the pack's own ts-node (test/policies checks
   * the two agree).
   */
  captureServerToken: "MULTIENV_CAPTURE_TOKEN",
} as const;

/**
 * Kubernetes pods carry the same `multienv.*` labels as Docker containers (LABELS: stack, role, site or computer)
 * and, on a server whose site has secret settings, the annotation LABELS.secretSettings. Within a website pod the
 * capture's two native sidecars (init containers with restartPolicy Always) are known by their container names.
 */
export const POD_CONTAINERS = {
  /** tcpdump: the only container of a kubernetes env that may add NET_RAW and NET_ADMIN. */
  capture: kubernetesNames.captureContainer,
  /** The capture's file server, which hands the files to the gateway. */
  captureServer: kubernetesNames.captureServerContainer,
} as const;

/** The component that generates the gateway's control token; its secret child's output `value` is the token. */
export const CONTROL_TOKEN_COMPONENT = "multienv:index:ControlToken";
export const CONTROL_TOKEN_OUTPUT = "value";

/** The stack outputs the pack reads. */
export const OUTPUTS = {
  controlToken: "controlToken",
  /** Computer -> its agent token: what opens that computer's DevTools. */
  agentTokens: "agentTokens",
  captureTraffic: "captureTraffic",
  /** Each website's `live` flag, among others: which servers may reach the web on a cluster. */
  websites: "websites",
} as const;
