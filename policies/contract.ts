// The marks the components put on resources so the policy pack can tell what each one is.
// A container is known by its Docker labels, an AWS resource by its tags; container names are never parsed.
// These are the names components/ writes; components may import them from here.
import { kubernetesNames } from "../src/plan/kubernetes";
import { ENV_VARS } from "../src/protocol/env";

/** Docker label keys. */
export const LABELS = {
  /** On every container: what it is, one of ROLES. */
  role: "multienv.role",
  /** Website containers: the site's name. */
  site: "multienv.site",
  /** Capture sidecars: the site whose container they record. */
  captureSite: "multienv.capture.site",
  /** Capture sidecars: the part of the site they record, `server` or `frontend`. */
  captureRole: "multienv.capture.role",
  /** Browser and site-proxy containers: the computer's name. */
  computer: "multienv.computer",
  /** Every network and volume: the stack (the captures volume is `<stack>-captures`). */
  stack: "multienv.stack",
  /**
   * Website server containers whose site has secret settings: the setting names, comma separated
   * (names only, never values). Tells the pack that AGENTENV_WEBSITE_SETTINGS carries a secret.
   */
  secretSettings: "multienv.secret-settings",
} as const;

/** Values of the `multienv.role` label on containers. */
export const ROLES = {
  gateway: "gateway",
  server: "server",
  frontend: "frontend",
  capture: "capture",
  browser: "browser",
  siteProxy: "site-proxy",
} as const;

export type ContainerRole = (typeof ROLES)[keyof typeof ROLES];

/** `multienv.role` a volume may carry to mark it as the captures volume (besides its `<stack>-captures` name). */
export const CAPTURES_VOLUME_ROLE = "captures";

/** AWS tag keys, on every taggable AWS resource (src/plan/ec2.ts `awsTags` writes them). */
export const TAGS = {
  stack: "multienv:stack",
  task: "multienv:task",
} as const;

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
