// The marks the components put on resources so the policy pack can tell what each one is.
// A container is known by its Docker labels, an AWS resource by its tags; container names are never parsed.
// These are the names components/ writes; components may import them from here.
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
} as const;

/** The component that generates the gateway's control token; its secret child's output `value` is the token. */
export const CONTROL_TOKEN_COMPONENT = "multienv:index:ControlToken";
export const CONTROL_TOKEN_OUTPUT = "value";

/** The stack outputs the pack reads. */
export const OUTPUTS = {
  controlToken: "controlToken",
  captureTraffic: "captureTraffic",
} as const;
