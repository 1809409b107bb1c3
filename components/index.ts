// The components of a multi env, one per file, in folders by family (docs/layout.md).
export { MultiEnv } from "./multiEnv";
export type { MultiEnvArgs, MultiEnvOutputs } from "./multiEnv";
export type { WebsiteOutput, ComputerOutput } from "../src/plan/stack-outputs";
export { Website } from "./docker/website";
export { Gateway } from "./docker/gateway";
export { CaptureSidecar } from "./docker/captureSidecar";
export { Computer } from "./docker/computer";
export { DockerEngine } from "./docker/engine";
export { Ec2Host } from "./targets/ec2/host";
export { DockerTarget } from "./targets/docker";
export { HostsTarget } from "./targets/hosts";
export { RemoteEngines } from "./targets/remoteEngines";
export type { EnvTarget, EnvTargetArgs } from "./targets/envTarget";
export { Ec2Firewall } from "./targets/ec2/firewall";
export { ControlToken } from "./controlToken";
