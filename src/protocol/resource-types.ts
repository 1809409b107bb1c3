// The type tokens of the resources the program declares that a policy, `multienv check` or the runner
// recognises: @pulumi/docker's (the bridged docker provider) and the project's own dynamic resources
// (src/providers/resources.ts). A module of its own, so readers of a graph or a state need not load any provider.
/** Type tokens by resource kind. */
export const RESOURCE_TYPES = {
  container: "docker:index/container:Container",
  network: "docker:index/network:Network",
  volume: "docker:index/volume:Volume",
  /** Both a project image built on the engine and a site image given by reference. */
  image: "docker:index/remoteImage:RemoteImage",
  /** The provider of one engine: its `host` and `sshOpts` say where the engine is. */
  dockerProvider: "pulumi:providers:docker",
  command: "pulumi-nodejs:dynamic/multienv:Command",
  secret: "pulumi-nodejs:dynamic/multienv:Secret",
  selfTest: "pulumi-nodejs:dynamic/multienv:SelfTest",
  sshHostKey: "pulumi-nodejs:dynamic/multienv:SshHostKey",
  gatewayTunnel: "pulumi-nodejs:dynamic/multienv:GatewayTunnel",
  accountLease: "pulumi-nodejs:dynamic/multienv:AccountLease",
  siteCleanup: "pulumi-nodejs:dynamic/multienv:SiteCleanup",
} as const;

/**
 * The kinds that are the project's own dynamic resources (src/providers/resources.ts), each served by
 * src/providers/operations.ts.
 */
export const DYNAMIC_KINDS = [
  "command",
  "secret",
  "selfTest",
  "sshHostKey",
  "gatewayTunnel",
  "accountLease",
  "siteCleanup",
] as const;
