// The type tokens of the project's dynamic resources (resources.ts): what the policy pack and `multienv check`
// recognise them by. A module of its own, so readers of a graph need not load the providers.
/** Type tokens by resource kind. */
export const RESOURCE_TYPES = {
  container: "pulumi-nodejs:dynamic/docker:Container",
  network: "pulumi-nodejs:dynamic/docker:Network",
  volume: "pulumi-nodejs:dynamic/docker:Volume",
  image: "pulumi-nodejs:dynamic/docker:Image",
  imageRef: "pulumi-nodejs:dynamic/docker:ImageRef",
  command: "pulumi-nodejs:dynamic/multienv:Command",
  secret: "pulumi-nodejs:dynamic/multienv:Secret",
  selfTest: "pulumi-nodejs:dynamic/multienv:SelfTest",
  sshHostKey: "pulumi-nodejs:dynamic/multienv:SshHostKey",
  gatewayTunnel: "pulumi-nodejs:dynamic/multienv:GatewayTunnel",
} as const;
