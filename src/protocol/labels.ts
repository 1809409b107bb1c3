// The marks the components put on resources, which the policy pack, the runner and the tests read back to tell what
// each one is: a container (or pod) by its labels, an AWS resource by its tags; container names are never parsed.

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
  /**
   * Website server containers (pods: an annotation) whose account is leased from a pool: the pool's name. A pool's
   * account settings are secret wherever they go, so AGENTENV_WEBSITE_SETTINGS carries a secret.
   */
  accountPool: "multienv.account-pool",
} as const;

/** Values of the `multienv.role` label on containers. */
export const ROLES = {
  gateway: "gateway",
  server: "server",
  frontend: "frontend",
  /** A replayed live site's replay server. */
  replay: "replay",
  capture: "capture",
  browser: "browser",
  siteProxy: "site-proxy",
} as const;

export type ContainerRole = (typeof ROLES)[keyof typeof ROLES];

/** `multienv.role` a volume may carry to mark it as the captures volume (besides its `<stack>-captures` name). */
export const CAPTURES_VOLUME_ROLE = "captures";

/** AWS tag keys, on every taggable AWS resource (src/plan/targets/ec2.ts `awsTags` writes them). */
export const TAGS = {
  stack: "multienv:stack",
  task: "multienv:task",
} as const;
