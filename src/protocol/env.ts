// The environment variables the containers read, named once for the plan that sets them and the services that read
// them.
/** Environment variable names the containers read (docs/design.md "Entry points", docs/contracts.md). */
export const ENV_VARS = {
  websiteSettings: "AGENTENV_WEBSITE_SETTINGS",
  /** The names the site claims in the config (a JSON list), so its card can declare them. */
  websiteDomains: "AGENTENV_WEBSITE_DOMAINS",
  /** A synthetic site's frontend: the URL of its own server on the env network (`http://<site>-server:<port>`). */
  websiteServer: "AGENTENV_WEBSITE_SERVER",
  gatewayConfig: "MULTIENV_GATEWAY_CONFIG",
  controlToken: "MULTIENV_CONTROL_TOKEN",
  siteProxyConfig: "MULTIENV_SITE_PROXY_CONFIG",
  /** The computer's own control token (derived from the control token): its proxy's control listener requires it. */
  siteProxyToken: "MULTIENV_SITE_PROXY_TOKEN",
  browserConfig: "MULTIENV_BROWSER_CONFIG",
} as const;
